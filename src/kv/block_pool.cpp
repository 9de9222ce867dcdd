#include "kv/block_pool.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace fathom {
KvBlockPool::KvBlockPool(int64_t block_bytes, std::shared_ptr<Backend> backend)
    : block_bytes_(block_bytes), backend_(std::move(backend)) {
  check(backend_ != nullptr, "kv block pool: no backend");
  check(block_bytes > 0 && block_bytes % 64 == 0, "kv block pool: block size ", block_bytes,
        " must be a positive multiple of 64 bytes");
}

KvBlock* KvBlockPool::acquire() {
  std::lock_guard lock(mutex_);
  if (free_.empty()) {
    const int64_t count = std::max<int64_t>(1, kKvSlabBytes / block_bytes_);
    slabs_.push_back(backend_->reserve({count * block_bytes_ / 4}, DType::i32));
    auto* base = static_cast<std::byte*>(slabs_.back().raw());
    // Pushed in reverse so the slab fills from its start.
    for (int64_t i = count - 1; i >= 0; --i) {
      blocks_.push_back(KvBlock{base + i * block_bytes_, 0});
      free_.push_back(&blocks_.back());
    }
  }
  KvBlock* block = free_.back();
  free_.pop_back();
  block->refs = 1;
  ++used_;
  return block;
}

void KvBlockPool::retain(KvBlock* block) {
  std::lock_guard lock(mutex_);
  check(block->refs > 0, "kv block pool: retaining a free block");
  ++block->refs;
}

void KvBlockPool::release(KvBlock* block) {
  std::lock_guard lock(mutex_);
  check(block->refs > 0, "kv block pool: releasing a free block");
  if (--block->refs > 0) return;
  // Resident memory follows the blocks in use, as the memory contract counts it.
  backend_->release_pages(block->data, block_bytes_);
  free_.push_back(block);
  --used_;
}

bool KvBlockPool::shared(const KvBlock* block) const {
  std::lock_guard lock(mutex_);
  return block->refs > 1;
}

int64_t KvBlockPool::used_blocks() const {
  std::lock_guard lock(mutex_);
  return used_;
}

int64_t KvBlockPool::free_blocks() const {
  std::lock_guard lock(mutex_);
  return int64_t(free_.size());
}

}  // namespace fathom
