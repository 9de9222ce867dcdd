// KV storage through a quantized codec, with a delayed start. Rows are
// quantized on append and widened a block at a time when attention asks.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "core/error.h"
#include "kv/affine_codec.h"
#include "kv/kv_layer.h"
#include "kv/kv_scheme.h"
#include "kv/turbo_codec.h"

namespace fathom {
namespace {

// The quantized half of K or V: packed codes plus per-row parameters.
struct CodedPlane {
  int bits = 0;
  int64_t words = 0;   // per row
  int64_t params = 0;  // per row: affine groups (scale and bias each), or 1 turbo norm
  Tensor codes;        // i32 raw words [kv_heads, capacity, words]
  Tensor scales;       // affine: bf16 [kv_heads, capacity, groups]; turbo: f32 norms [kv_heads, capacity]
  Tensor biases;       // affine only
  int64_t bytes() const { return int64_t(codes.nbytes() + scales.nbytes() + (biases.raw() ? biases.nbytes() : 0)); }
  // Moves rows [count, rows) of every head to the front.
  void drop_front(int64_t kv_heads, int64_t capacity, int64_t rows, int64_t count) {
    for (Tensor* t : {&codes, &scales, &biases})
      if (t->raw()) shift_rows_to_front(*t, kv_heads, capacity, rows, count);
  }
};

class CodecKvLayer final : public KvLayer {
 public:
  CodecKvLayer(int64_t kv_heads, int64_t head_dim, int64_t capacity, const LayerCodec& codec, int64_t start,
               DType plain_dtype, uint64_t seed)
      : kv_heads_(kv_heads), head_dim_(head_dim), capacity_(capacity), codec_(codec), start_(start) {
    check(codec.kind != LayerCodec::Kind::plain, "codec kv layer: needs a quantized codec");
    if (codec.kind == LayerCodec::Kind::turbo) rotation_.emplace(head_dim, seed);
    reader_.ctx = this;
    reader_.read = &CodecKvLayer::read_rows;
    if (start > 0)
      plain_ = std::make_unique<PlainKvLayer>(kv_heads, head_dim, capacity, plain_dtype);
    else
      allocate_planes();
  }

  int64_t length() const override { return plain_ ? plain_->length() : first_ + rows_; }
  int64_t first_position() const override { return plain_ ? plain_->first_position() : first_; }
  int64_t capacity() const override { return capacity_; }

  void append(const Tensor& k, const Tensor& v) override {
    if (plain_) return plain_->append(k, v);
    const int64_t count = k.dim(0);
    check(k.numel() == count * kv_heads_ * head_dim_ && k.shape() == v.shape(), "kv append: k ", k.shape_string(),
          " does not fit ", kv_heads_, " heads of ", head_dim_);
    check(rows_ + count <= capacity_, "kv append: ", rows_, " + ", count, " rows exceed the capacity of ", capacity_);
    for (int64_t t = 0; t < count; ++t)
      for (int64_t h = 0; h < kv_heads_; ++h) {
        const int64_t src = (t * kv_heads_ + h) * head_dim_;
        encode(k_, h, rows_ + t, k.data<float>() + src);
        encode(v_, h, rows_ + t, v.data<float>() + src);
      }
    rows_ += count;
  }

  KvView view() const override {
    if (plain_) return plain_->view();
    KvView view;
    view.reader = &reader_;
    view.kv_heads = kv_heads_;
    view.head_dim = head_dim_;
    view.length = rows_;
    view.first_position = first_;
    return view;
  }

  void attend(Backend& backend, const Tensor& q, const AttentionParams& p, Tensor& out) const override {
    if (plain_) return plain_->attend(backend, q, p, out);
    const KvView view = this->view();
    if (!rotation_) return backend.attention(q, view, p, out);
    // Scores are taken in the rotated space (Rq·Rk = q·k); the output is
    // rotated back once.
    Tensor rq = Tensor::empty(q.shape(), DType::f32);
    std::memcpy(rq.raw(), q.raw(), q.nbytes());
    for (int64_t r = 0; r < q.numel() / head_dim_; ++r) rotation_->apply(rq.data<float>() + r * head_dim_);
    backend.attention(rq, view, p, out);
    for (int64_t r = 0; r < out.numel() / head_dim_; ++r) rotation_->apply_inverse(out.data<float>() + r * head_dim_);
  }

  void trim(int64_t new_length) override {
    if (plain_) return plain_->trim(new_length);
    if (new_length == 0) {
      first_ = rows_ = 0;
      return;
    }
    check(new_length >= first_ && new_length <= length(), "kv trim: new length ", new_length, " outside [", first_,
          ", ", length(), "] (older positions were dropped)");
    rows_ = new_length - first_;
  }

  void drop_front(int64_t count) override {
    if (plain_) return plain_->drop_front(count);
    check(count >= 0 && count <= rows_, "kv drop: ", count, " of ", rows_, " rows");
    if (count == 0) return;
    k_.drop_front(kv_heads_, capacity_, rows_, count);
    v_.drop_front(kv_heads_, capacity_, rows_, count);
    first_ += count;
    rows_ -= count;
  }

  void end_step() override {
    if (!plain_ || plain_->length() < start_ || plain_->length() == 0) return;
    // Convert what the plain layer holds, then free it.
    const int64_t n = plain_->length() - plain_->first_position();
    allocate_planes();
    std::vector<float> rows(static_cast<size_t>(n * head_dim_));
    for (int which = 0; which < 2; ++which)
      for (int64_t h = 0; h < kv_heads_; ++h) {
        plain_rows(which == 1, h, n, rows.data());
        for (int64_t j = 0; j < n; ++j) encode(which ? v_ : k_, h, j, rows.data() + j * head_dim_);
      }
    first_ = plain_->first_position();
    rows_ = n;
    plain_.reset();
  }

  int64_t bytes() const override { return plain_ ? plain_->bytes() : k_.bytes() + v_.bytes(); }
  int64_t conversion_at() const override { return plain_ ? std::max<int64_t>(start_, 1) : INT64_MAX; }

 private:
  CodedPlane make_plane(int bits) const {
    CodedPlane plane;
    plane.bits = bits;
    plane.words = packed_code_words(head_dim_, bits);
    plane.codes = Tensor::reserve({kv_heads_, capacity_, plane.words}, DType::i32);
    if (codec_.kind == LayerCodec::Kind::affine) {
      plane.params = head_dim_ / codec_.group_size;
      plane.scales = Tensor::reserve({kv_heads_, capacity_, plane.params}, DType::bf16);
      plane.biases = Tensor::reserve({kv_heads_, capacity_, plane.params}, DType::bf16);
    } else {
      plane.params = 1;
      plane.scales = Tensor::reserve({kv_heads_, capacity_}, DType::f32);
    }
    return plane;
  }

  void allocate_planes() {
    const bool affine = codec_.kind == LayerCodec::Kind::affine;
    k_ = make_plane(affine ? codec_.bits : codec_.k_bits);
    v_ = make_plane(affine ? codec_.bits : codec_.v_bits);
  }

  AffineLayout affine_layout() const { return {codec_.bits, codec_.group_size, head_dim_}; }

  void encode(CodedPlane& plane, int64_t h, int64_t pos, const float* x) const {
    const int64_t row = h * capacity_ + pos;
    uint32_t* codes = reinterpret_cast<uint32_t*>(plane.codes.data<int32_t>()) + row * plane.words;
    if (codec_.kind == LayerCodec::Kind::affine) {
      affine_quantize_row(x, affine_layout(), codes, plane.scales.data<bf16_t>() + row * plane.params,
                          plane.biases.data<bf16_t>() + row * plane.params);
    } else {
      std::vector<float> rotated(x, x + head_dim_);
      rotation_->apply(rotated.data());
      turbo_quantize_row(rotated.data(), head_dim_, lloyd_max_codebook(plane.bits), codes,
                         plane.scales.data<float>() + row);
    }
  }

  void decode(const CodedPlane& plane, int64_t h, int64_t pos, float* out) const {
    const int64_t row = h * capacity_ + pos;
    const uint32_t* codes = reinterpret_cast<const uint32_t*>(plane.codes.data<int32_t>()) + row * plane.words;
    if (codec_.kind == LayerCodec::Kind::affine)
      affine_dequantize_row(codes, plane.scales.data<bf16_t>() + row * plane.params,
                            plane.biases.data<bf16_t>() + row * plane.params, affine_layout(), out);
    else
      turbo_dequantize_row(codes, plane.scales.data<float>()[row], head_dim_, lloyd_max_codebook(plane.bits), out);
  }

  static void read_rows(const void* ctx, bool values, int64_t head, int64_t first, int64_t count, float* dst) {
    const auto* self = static_cast<const CodecKvLayer*>(ctx);
    const CodedPlane& plane = values ? self->v_ : self->k_;
    for (int64_t j = 0; j < count; ++j) self->decode(plane, head, first + j, dst + j * self->head_dim_);
  }

  // Rows [0, n) of one head of the plain layer, widened to f32.
  void plain_rows(bool values, int64_t h, int64_t n, float* dst) const {
    const KvView view = plain_->view();
    const size_t elem = dtype_size(view.dtype);
    const char* base = static_cast<const char*>(values ? view.v : view.k) + size_t(h * view.head_stride) * elem;
    for (int64_t i = 0; i < n * head_dim_; ++i)
      dst[i] = view.dtype == DType::f32 ? reinterpret_cast<const float*>(base)[i]
                                        : bf16_to_f32(reinterpret_cast<const bf16_t*>(base)[i]);
  }

  int64_t kv_heads_, head_dim_, capacity_;
  LayerCodec codec_;
  int64_t start_;
  std::unique_ptr<PlainKvLayer> plain_;  // until conversion
  CodedPlane k_, v_;
  int64_t first_ = 0;  // position of row 0
  int64_t rows_ = 0;
  std::optional<HadamardRotation> rotation_;
  KvRowReader reader_;
};

}  // namespace

std::unique_ptr<KvLayer> make_codec_kv_layer(int64_t kv_heads, int64_t head_dim, int64_t capacity,
                                             const LayerCodec& codec, int64_t start, DType plain_dtype,
                                             uint64_t rotation_seed) {
  return std::make_unique<CodecKvLayer>(kv_heads, head_dim, capacity, codec, start, plain_dtype, rotation_seed);
}

}  // namespace fathom
