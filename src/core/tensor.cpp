#include "core/tensor.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/error.h"

namespace fathom {
namespace {
constexpr int kDevices = 2;
std::atomic<int64_t> allocated[kDevices];
std::atomic<int64_t> allocated_peak[kDevices];
std::atomic<int64_t> reserved[kDevices];

int64_t count_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    check(d >= 0, "tensor: negative dimension ", d);
    n *= d;
  }
  return n;
}
}  // namespace

const char* device_name(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

void count_allocation(Device device, int64_t bytes) {
  const int d = int(device);
  const int64_t now = allocated[d] += bytes;
  int64_t peak = allocated_peak[d].load(std::memory_order_relaxed);
  while (now > peak && !allocated_peak[d].compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
void count_reservation(Device device, int64_t bytes) { reserved[int(device)] += bytes; }

int64_t allocated_bytes(Device device) { return allocated[int(device)].load(); }
int64_t allocated_peak_bytes(Device device) { return allocated_peak[int(device)].load(); }
void reset_allocation_peak(Device device) { allocated_peak[int(device)] = allocated[int(device)].load(); }
int64_t reserved_bytes(Device device) { return reserved[int(device)].load(); }

int64_t Tensor::numel() const { return count_elements(shape_); }

size_t Tensor::nbytes() const {
  if (dtype_ == DType::affine) return size_t(numel()) * size_t(quant_->bits) / 8;
  return size_t(numel()) * dtype_size(dtype_);
}

Tensor Tensor::affine(const Tensor& codes, int64_t cols, AffineQuant quant, const std::string& name) {
  const int bits = quant.bits, group = quant.group_size;
  check(bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8, name, ": quantized to ", bits,
        " bits (supported: 2, 3, 4, 5, 6, 8)");
  check(group == 32 || group == 64 || group == 128, name, ": quantization group size ", group,
        " (supported: 32, 64, 128)");
  check(codes.dtype() == DType::u32 && codes.rank() == 2, name, ": quantized codes must be 2-D u32, got ",
        dtype_name(codes.dtype()), " ", codes.shape_string());
  const int64_t rows = codes.dim(0);
  check(cols > 0 && cols % group == 0 && codes.dim(1) * 32 == cols * bits, name, ": codes ", codes.shape_string(),
        " do not hold ", cols, " columns of ", bits, "-bit codes in groups of ", group);
  for (const Tensor* p : {&quant.scales, &quant.biases}) {
    check(p->dtype() == DType::f32 || p->dtype() == DType::bf16 || p->dtype() == DType::f16, name,
          ": scales and biases must be f32, bf16 or f16, got ", dtype_name(p->dtype()));
    check(p->rank() == 2 && p->dim(0) == rows && p->dim(1) == cols / group, name, ": scales/biases ",
          p->shape_string(), " should be [", rows, ", ", cols / group, "] for ", cols, " columns in groups of ",
          group);
  }
  check(quant.scales.dtype() == quant.biases.dtype(), name, ": scales are ", dtype_name(quant.scales.dtype()),
        " but biases are ", dtype_name(quant.biases.dtype()));
  Tensor t = codes;
  t.dtype_ = DType::affine;
  t.shape_ = {rows, cols};
  t.quant_ = std::make_shared<const AffineQuant>(std::move(quant));
  return t;
}

const AffineQuant& Tensor::affine_quant() const {
  check(dtype_ == DType::affine && quant_, "affine_quant: a ", dtype_name(dtype_), " tensor is not quantized");
  return *quant_;
}

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const size_t bytes = t.nbytes();
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !p) throw std::bad_alloc();
  count_allocation(Device::cpu, int64_t(rounded));
  t.data_ = p;
  t.owner_ = std::shared_ptr<const void>(p, [rounded](const void* q) {
    std::free(const_cast<void*>(q));
    count_allocation(Device::cpu, -int64_t(rounded));
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
  count_reservation(Device::cpu, int64_t(bytes));
  t.data_ = p;
  t.owner_ = std::shared_ptr<const void>(p, [bytes](const void* q) {
    ::munmap(const_cast<void*>(q), bytes);
    count_reservation(Device::cpu, -int64_t(bytes));
  });
  return t;
}

Tensor Tensor::borrow(void* data, std::vector<int64_t> shape, DType dtype,
                      std::shared_ptr<const void> owner, Device device) {
  Tensor t;
  t.device_ = device;
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
  if (dtype_ == DType::affine) {
    check(!shape.empty() && shape.back() == shape_.back(), "reshape: an affine tensor ", shape_string(),
          " keeps its last dimension");
    std::vector<int64_t> groups = shape;
    groups.back() = quant_->scales.shape().back();
    auto q = std::make_shared<AffineQuant>(*quant_);
    q->scales = q->scales.reshape(groups);
    q->biases = q->biases.reshape(groups);
    t.quant_ = std::move(q);
  }
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  check(rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "slice_rows: [", begin,
        ", ", end, ") out of ", shape_string());
  Tensor t = *this;
  const int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  if (dtype_ == DType::affine) {
    t.data_ = static_cast<char*>(data_) + size_t(begin * row) * size_t(quant_->bits) / 8;
    auto q = std::make_shared<AffineQuant>(*quant_);
    q->scales = q->scales.slice_rows(begin, end);
    q->biases = q->biases.slice_rows(begin, end);
    t.quant_ = std::move(q);
  } else {
    t.data_ = static_cast<char*>(data_) + size_t(begin * row) * dtype_size(dtype_);
  }
  t.shape_[0] = end - begin;
  return t;
}

std::string Tensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

}  // namespace fathom
