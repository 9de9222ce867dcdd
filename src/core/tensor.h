#pragma once
// A Tensor is a typed, shaped, contiguous view of storage it may share.
// Storage is either owned (allocated here, counted per device) or borrowed
// (an mmapped weight file kept alive by `owner`).
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace fathom {

enum class Device : uint8_t { cpu, cuda };
const char* device_name(Device device);

class Tensor {
 public:
  Tensor() = default;

  // Fresh, uninitialized, 64-byte aligned storage counted in allocated_bytes().
  static Tensor empty(std::vector<int64_t> shape, DType dtype);
  // Storage for something that fills from the front and may never fill (a KV
  // cache at its capacity): address space is reserved here and the kernel
  // commits each page when it is first written, so resident memory grows with
  // what is stored, not with the capacity. Small pages (no transparent huge
  // pages), so a cache that holds a few rows does not commit 2 MiB per head.
  // Counted in reserved_bytes(), not allocated_bytes().
  static Tensor reserve(std::vector<int64_t> shape, DType dtype);
  // A view of memory someone else owns; `owner` keeps it alive. A backend
  // wraps its device allocations this way.
  static Tensor borrow(void* data, std::vector<int64_t> shape, DType dtype,
                       std::shared_ptr<const void> owner, Device device = Device::cpu);

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return int(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  bool defined() const { return data_ != nullptr || numel() == 0; }

  void* raw() const { return data_; }
  template <typename T> T* data() const { return static_cast<T*>(data_); }

  // Same storage, new shape with the same element count.
  Tensor reshape(std::vector<int64_t> shape) const;
  // Rows [begin, end) of the leading dimension, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;

  std::string shape_string() const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
  std::vector<int64_t> shape_;
  std::shared_ptr<const void> owner_;
};

// Bytes currently held by Tensor::empty allocations on a device (the memory contract).
int64_t allocated_bytes(Device device);
// The most allocated_bytes() has been since the last reset_allocation_peak():
// what a step's working memory really reached (tests hold the contract to it).
int64_t allocated_peak_bytes(Device device);
void reset_allocation_peak(Device device);
// Address space currently reserved by Tensor::reserve.
int64_t reserved_bytes(Device device);
// What a backend's own allocator reports (positive: taken; negative: given back).
void count_allocation(Device device, int64_t bytes);
void count_reservation(Device device, int64_t bytes);

}  // namespace fathom
