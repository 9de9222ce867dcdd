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

struct AffineQuant;

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
  // An affine-quantized matrix [rows, cols] over `codes` (u32 [rows, cols·bits/32],
  // its storage shared): row r, value i is scale·q + bias with q the i-th
  // `bits`-wide code of row r's little-endian bit stream and scale, bias those
  // of group i / group_size. Throws naming `name` when the shapes disagree.
  static Tensor affine(const Tensor& codes, int64_t cols, AffineQuant quant, const std::string& name);

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return int(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int64_t numel() const;
  // Bytes of the storage (an affine tensor's codes; its scales and biases are apart).
  size_t nbytes() const;
  bool defined() const { return data_ != nullptr || numel() == 0; }

  void* raw() const { return data_; }
  // The scales, biases and code width of an affine tensor (throws for any other).
  const AffineQuant& affine_quant() const;
  template <typename T> T* data() const { return static_cast<T*>(data_); }

  // Same storage, new shape with the same element count (an affine tensor
  // keeps its last dimension: groups run along it).
  Tensor reshape(std::vector<int64_t> shape) const;
  // Rows [begin, end) of the leading dimension, sharing storage (an affine
  // tensor's scales and biases are sliced with it).
  Tensor slice_rows(int64_t begin, int64_t end) const;

  std::string shape_string() const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
  std::vector<int64_t> shape_;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<const AffineQuant> quant_;  // set for DType::affine only
};

// MLX's affine quantization of a matrix's rows (what Tensor::affine attaches).
struct AffineQuant {
  int bits = 0;        // 2, 3, 4, 5, 6 or 8
  int group_size = 0;  // 32, 64 or 128
  Tensor scales;       // [rows, cols / group_size]: f32, bf16 or f16
  Tensor biases;       // the same shape and dtype
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
