#include "core/tensor.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/error.h"

namespace fathom {
namespace {
std::atomic<int64_t> cpu_allocated{0};
std::atomic<int64_t> cpu_allocated_peak{0};
std::atomic<int64_t> cpu_reserved{0};

void count_allocation(int64_t bytes) {
  const int64_t now = cpu_allocated += bytes;
  int64_t peak = cpu_allocated_peak.load(std::memory_order_relaxed);
  while (now > peak && !cpu_allocated_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

int64_t count_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    check(d >= 0, "tensor: negative dimension ", d);
    n *= d;
  }
  return n;
}
}  // namespace

int64_t allocated_bytes(Device) { return cpu_allocated.load(); }
int64_t allocated_peak_bytes(Device) { return cpu_allocated_peak.load(); }
void reset_allocation_peak(Device) { cpu_allocated_peak = cpu_allocated.load(); }
int64_t reserved_bytes(Device) { return cpu_reserved.load(); }

int64_t Tensor::numel() const { return count_elements(shape_); }

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const size_t bytes = t.nbytes();
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !p) throw std::bad_alloc();
  count_allocation(int64_t(rounded));
  t.data_ = p;
  t.owner_ = std::shared_ptr<const void>(p, [rounded](const void* q) {
    std::free(const_cast<void*>(q));
    cpu_allocated -= int64_t(rounded);
  });
  return t;
}

Tensor Tensor::reserve(std::vector<int64_t> shape, DType dtype) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const size_t bytes = t.nbytes();
  if (bytes == 0) return t;
  // MAP_NORESERVE: the capacity is not charged against overcommit accounting;
  // the memory contract, not the kernel, decides what fits.
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_NOHUGEPAGE);
  cpu_reserved += int64_t(bytes);
  t.data_ = p;
  t.owner_ = std::shared_ptr<const void>(p, [bytes](const void* q) {
    ::munmap(const_cast<void*>(q), bytes);
    cpu_reserved -= int64_t(bytes);
  });
  return t;
}

Tensor Tensor::borrow(void* data, std::vector<int64_t> shape, DType dtype,
                      std::shared_ptr<const void> owner) {
  Tensor t;
  t.data_ = data;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  check(count_elements(shape) == numel(), "reshape: ", shape_string(), " has ", numel(),
        " elements, target has ", count_elements(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  check(rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "slice_rows: [", begin,
        ", ", end, ") out of ", shape_string());
  Tensor t = *this;
  const int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  t.data_ = static_cast<char*>(data_) + size_t(begin * row) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

std::string Tensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

}  // namespace fathom
