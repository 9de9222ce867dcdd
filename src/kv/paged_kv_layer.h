#pragma once
// A layer's rows in blocks from the pool, in one format (plain or coded).
// Rows are encoded as they are appended (the pool's backend writes them);
// attention reads the blocks in place.
// A sliding layer holds at most `max_blocks` blocks and reuses its oldest
// one, whose rows the window has passed, for the next rows.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kv/kv_layer.h"

namespace fathom {

class PagedKvLayer final : public KvLayer {
 public:
  // window: a sliding layer's, which keeps what steps of at most `step` tokens need.
  PagedKvLayer(std::shared_ptr<KvBlockPool> pool, const KvFormat& format, int64_t capacity,
               std::optional<int64_t> window, int64_t step, uint64_t rotation_seed);
  ~PagedKvLayer() override;
  PagedKvLayer(const PagedKvLayer&) = delete;
  PagedKvLayer& operator=(const PagedKvLayer&) = delete;

  int64_t length() const override { return first_ + rows_; }
  int64_t first_position() const override { return first_; }
  int64_t capacity() const override { return capacity_; }
  void claim(int64_t count) override;
  void append(const Tensor& k, const Tensor& v) override;
  void trim(int64_t new_length) override;
  int64_t bytes() const override { return int64_t(blocks_.size()) * pool_->block_bytes(); }
  KvView view() const override;
  std::unique_ptr<KvLayer> fork(int64_t capacity) const override;
  std::unique_ptr<PagedKvLayer> fork_paged(int64_t capacity) const;

  const KvFormat& format() const { return format_; }
  // An empty layer starts at `position` (a converted sliding layer continues
  // from where the layer it replaces had dropped its rows).
  void start_at(int64_t position);
  // Held rows [row, row + k.dim(0)) widened to f32 k, v [count, kv_heads,
  // head_dim] (what a delayed quantization start converts).
  void read_rows(int64_t row, Tensor& k, Tensor& v) const;

 private:
  void release_from(size_t block);
  // Gives block i a private copy of its rows before they are written.
  void make_private(size_t i);

  std::shared_ptr<KvBlockPool> pool_;
  KvFormat format_;
  int64_t capacity_;
  std::optional<int64_t> window_;
  int64_t step_, max_blocks_;
  uint64_t rotation_seed_;
  std::array<float, 16> k_table_{}, v_table_{};  // codebook formats
  std::vector<KvBlock*> blocks_;
  std::vector<std::byte*> block_data_;  // the block table attention reads
  int64_t first_ = 0;  // position of row 0 (of blocks_[0]'s first row)
  int64_t rows_ = 0;
};

}  // namespace fathom
