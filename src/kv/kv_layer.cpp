#include "kv/kv_layer.h"

#include <cstring>

#include "core/error.h"

namespace fathom {

PlainKvLayer::PlainKvLayer(int64_t kv_heads, int64_t head_dim, int64_t capacity, DType dtype)
    : kv_heads_(kv_heads), head_dim_(head_dim), capacity_(capacity), dtype_(dtype) {
  check(dtype == DType::f32 || dtype == DType::bf16, "kv cache: storage dtype ", dtype_name(dtype),
        " is not supported (f32, bf16)");
  check(capacity > 0, "kv cache: capacity must be positive, got ", capacity);
  // Reserved, not allocated: pages are committed as rows are appended.
  k_ = Tensor::reserve({kv_heads, capacity, head_dim}, dtype);
  v_ = Tensor::reserve({kv_heads, capacity, head_dim}, dtype);
}

void PlainKvLayer::append(const Tensor& k, const Tensor& v) {
  const int64_t count = k.dim(0);
  check(k.dtype() == DType::f32 && k.shape() == v.shape() && k.numel() == count * kv_heads_ * head_dim_,
        "kv append: k ", k.shape_string(), " v ", v.shape_string(), " do not fit ", kv_heads_, " heads of ",
        head_dim_);
  check(rows_ + count <= capacity_, "kv append: ", rows_, " + ", count, " rows exceed the capacity of ", capacity_);
  for (int64_t t = 0; t < count; ++t)
    for (int64_t h = 0; h < kv_heads_; ++h) {
      const int64_t src = (t * kv_heads_ + h) * head_dim_;
      const int64_t dst = (h * capacity_ + rows_ + t) * head_dim_;
      store(k.data<float>() + src, k_, dst);
      store(v.data<float>() + src, v_, dst);
    }
  rows_ += count;
}

KvView PlainKvLayer::view() const {
  KvView view;
  view.k = k_.raw();
  view.v = v_.raw();
  view.dtype = dtype_;
  view.kv_heads = kv_heads_;
  view.head_dim = head_dim_;
  view.length = rows_;
  view.head_stride = capacity_ * head_dim_;
  view.first_position = first_;
  return view;
}

void PlainKvLayer::attend(Backend& backend, const Tensor& q, const AttentionParams& p, Tensor& out) const {
  backend.attention(q, view(), p, out);
}

void PlainKvLayer::trim(int64_t new_length) {
  if (new_length == 0) {
    first_ = rows_ = 0;
    return;
  }
  check(new_length >= first_ && new_length <= length(), "kv trim: new length ", new_length, " outside [", first_,
        ", ", length(), "] (older positions were dropped)");
  rows_ = new_length - first_;
}

void shift_rows_to_front(Tensor& t, int64_t heads, int64_t capacity, int64_t rows, int64_t count) {
  const size_t row_bytes = t.nbytes() / size_t(heads * capacity);
  for (int64_t h = 0; h < heads; ++h) {
    char* base = static_cast<char*>(t.raw()) + size_t(h * capacity) * row_bytes;
    std::memmove(base, base + size_t(count) * row_bytes, size_t(rows - count) * row_bytes);
  }
}

void PlainKvLayer::drop_front(int64_t count) {
  check(count >= 0 && count <= rows_, "kv drop: ", count, " of ", rows_, " rows");
  if (count == 0) return;
  shift_rows_to_front(k_, kv_heads_, capacity_, rows_, count);
  shift_rows_to_front(v_, kv_heads_, capacity_, rows_, count);
  first_ += count;
  rows_ -= count;
}

void PlainKvLayer::store(const float* src, Tensor& dst, int64_t offset) {
  if (dtype_ == DType::f32) {
    std::memcpy(dst.data<float>() + offset, src, size_t(head_dim_) * 4);
  } else {
    bf16_t* d = dst.data<bf16_t>() + offset;
    for (int64_t i = 0; i < head_dim_; ++i) d[i] = f32_to_bf16(src[i]);
  }
}

std::unique_ptr<KvLayer> make_plain_kv_layer(int64_t kv_heads, int64_t head_dim, int64_t capacity, DType dtype) {
  return std::make_unique<PlainKvLayer>(kv_heads, head_dim, capacity, dtype);
}

}  // namespace fathom
