#include "kv/paged_kv_layer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "backend/turbo_codec.h"
#include "kv/kv_layout.h"

namespace fathom {

PagedKvLayer::PagedKvLayer(std::shared_ptr<KvBlockPool> pool, const KvFormat& format, int64_t capacity,
                           std::optional<int64_t> window, int64_t step, uint64_t rotation_seed)
    : pool_(std::move(pool)),
      format_(format),
      capacity_(capacity),
      window_(window),
      step_(step),
      max_blocks_(kv_max_blocks(format.block_rows, capacity, window, step)),
      rotation_seed_(rotation_seed) {
  check(format.block_rows > 0 && format.bytes() <= pool_->block_bytes(), "kv layer: a block of ", format.block_rows,
        " rows takes ", format.bytes(), " bytes, the pool's blocks have ", pool_->block_bytes());
  check(format.codec != KvFormat::Codec::plain || format.dtype == DType::f32 || format.dtype == DType::bf16,
        "kv cache: storage dtype ", dtype_name(format.dtype), " is not supported (f32, bf16)");
  if (format.codec == KvFormat::Codec::codebook) {
    // Codes index centroids of a unit Gaussian; a rotated row of norm ‖x‖ has
    // coordinates ≈ N(0, ‖x‖²/d), so value = ‖x‖ · centroid / √d.
    const float inv_sqrt_d = 1.0f / std::sqrt(float(format.head_dim));
    auto fill = [&](std::array<float, 16>& table, int bits) {
      const auto& book = lloyd_max_codebook(bits);
      for (size_t c = 0; c < book.centroids.size(); ++c) table[c] = book.centroids[c] * inv_sqrt_d;
    };
    fill(k_table_, format.k_bits);
    fill(v_table_, format.v_bits);
  }
}

PagedKvLayer::~PagedKvLayer() { release_from(0); }

void PagedKvLayer::release_from(size_t block) {
  for (size_t i = block; i < blocks_.size(); ++i) pool_->release(blocks_[i]);
  blocks_.resize(block);
  block_data_.resize(block);
}

void PagedKvLayer::make_private(size_t i) {
  if (!pool_->shared(blocks_[i])) return;
  KvBlock* copy = pool_->acquire();
  const int64_t words = format_.bytes() / 4;
  const Tensor from = Tensor::borrow(blocks_[i]->data, {words}, DType::i32, nullptr, pool_->backend().device());
  Tensor to = Tensor::borrow(copy->data, {words}, DType::i32, nullptr, pool_->backend().device());
  pool_->backend().copy(from, to);
  pool_->release(blocks_[i]);
  blocks_[i] = copy;
  block_data_[i] = copy->data;
}

std::unique_ptr<PagedKvLayer> PagedKvLayer::fork_paged(int64_t capacity) const {
  check(capacity >= length(), "kv fork: capacity ", capacity, " below the ", length(), " tokens held");
  auto copy = std::make_unique<PagedKvLayer>(pool_, format_, capacity, window_, step_, rotation_seed_);
  for (KvBlock* block : blocks_) pool_->retain(block);
  copy->blocks_ = blocks_;
  copy->block_data_ = block_data_;
  copy->first_ = first_;
  copy->rows_ = rows_;
  return copy;
}

std::unique_ptr<KvLayer> PagedKvLayer::fork(int64_t capacity) const { return fork_paged(capacity); }

void PagedKvLayer::start_at(int64_t position) {
  check(rows_ == 0 && position >= 0, "kv layer: only an empty layer can start at ", position);
  first_ = position;
}

void PagedKvLayer::append(const Tensor& k, const Tensor& v) {
  const int64_t heads = format_.kv_heads, d = format_.head_dim;
  check(k.dtype() == DType::f32 && k.rank() == 3 && k.shape() == v.shape() && k.numel() == k.dim(0) * heads * d,
        "kv append: k ", k.shape_string(), " v ", v.shape_string(), " do not fit ", heads, " heads of ", d);
  claim(k.dim(0));  // may move the ring's rows: the new ones are the last
  if (k.dim(0) > 0) pool_->backend().kv_write(view(), rows_ - k.dim(0), k, v);
}

void PagedKvLayer::claim(int64_t count) {
  const int64_t b = format_.block_rows;
  check(count >= 0 && length() + count <= capacity_, "kv append: ", length(), " + ", count,
        " tokens exceed the capacity of ", capacity_);
  // The step's first query (at the current length) sees back to here.
  const int64_t needed = window_ ? length() - *window_ + 1 : 0;
  // Rows go after the last one held: a block shared with a fork is copied first.
  if (count > 0 && rows_ % b != 0) make_private(blocks_.size() - 1);
  // Blocks for every new row first (a sliding layer's oldest block is
  // behind every query's window, kv_max_blocks sizing the ring so for the
  // steps it was made for, and takes new rows), so that the caller writes
  // them in one go: a prefill chunk is one kernel, not one per block.
  while (int64_t(blocks_.size()) * b < rows_ + count) {
    if (int64_t(blocks_.size()) == max_blocks_) {
      check(window_ && first_ + b <= needed, "sliding kv layer: a step of ", count, " tokens at ", length(),
            " would overwrite positions its window still needs");
      blocks_.push_back(blocks_.front());
      block_data_.push_back(block_data_.front());
      blocks_.erase(blocks_.begin());
      block_data_.erase(block_data_.begin());
      if (pool_->shared(blocks_.back())) {  // a fork still reads it: take a fresh one
        pool_->release(blocks_.back());
        blocks_.back() = pool_->acquire();
        block_data_.back() = blocks_.back()->data;
      }
      first_ += b;
      rows_ -= b;
    } else {
      blocks_.push_back(pool_->acquire());
      block_data_.push_back(blocks_.back()->data);
    }
  }
  rows_ += count;
}

KvView PagedKvLayer::view() const {
  KvView view;
  view.format = format_;
  view.blocks = block_data_.data();
  view.length = rows_;
  view.first_position = first_;
  view.k_table = k_table_;
  view.v_table = v_table_;
  view.rotation_seed = rotation_seed_;
  return view;
}

void PagedKvLayer::trim(int64_t new_length) {
  if (new_length == 0) {
    release_from(0);
    first_ = rows_ = 0;
    return;
  }
  // A sliding layer's next query needs the window - 1 positions before it.
  const int64_t lowest = window_ && first_ > 0 ? first_ + *window_ - 1 : first_;
  check(new_length >= lowest && new_length <= length(), "kv trim: new length ", new_length, " outside [", lowest,
        ", ", length(), "] (older positions were dropped)");
  rows_ = new_length - first_;
  const int64_t b = format_.block_rows;
  release_from(size_t((rows_ + b - 1) / b));
}

void PagedKvLayer::read_rows(int64_t row, Tensor& k, Tensor& v) const {
  pool_->backend().kv_read(view(), row, k, v);
}

}  // namespace fathom
