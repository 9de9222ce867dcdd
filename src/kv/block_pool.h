#pragma once
// One pool of fixed-size KV blocks for every sequence of a model. All layers
// and formats take blocks of the same byte size (a coded format fits more
// rows into one), so a block freed by any layer serves any other and nothing
// fragments. A block is reference counted: the layer that fills it owns it,
// and a full block may be shared (a cached prefix) but is then never written.
// Blocks live on the backend's device; layers write and read them through it.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"

namespace fathom {

struct KvBlock {
  std::byte* data = nullptr;
  int refs = 0;
};

// Blocks are carved a slab at a time. On the CPU a slab is reserved address
// space whose pages count only once written; a GPU allocates it whole, and
// the pool keeps its slabs.
inline constexpr int64_t kKvSlabBytes = int64_t(16) << 20;

class KvBlockPool {
 public:
  KvBlockPool(int64_t block_bytes, std::shared_ptr<Backend> backend);
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;

  int64_t block_bytes() const { return block_bytes_; }
  Backend& backend() const { return *backend_; }
  // A block with one reference and unspecified contents.
  KvBlock* acquire();
  // Another holder of a (full) block.
  void retain(KvBlock* block);
  // Drops one reference; the last one returns the block to the free list
  // and its pages to the kernel.
  void release(KvBlock* block);
  // Whether someone else holds the block too (then it must not be written).
  bool shared(const KvBlock* block) const;

  // Blocks someone holds, and blocks the pool keeps for reuse (address
  // space only: their pages were given back).
  int64_t used_blocks() const;
  int64_t free_blocks() const;

 private:
  int64_t block_bytes_;
  std::shared_ptr<Backend> backend_;
  mutable std::mutex mutex_;
  std::vector<Tensor> slabs_;  // reserved address space, committed as blocks are first written
  std::deque<KvBlock> blocks_;  // every block ever carved (stable addresses)
  std::vector<KvBlock*> free_;  // LIFO: the most recently freed block is the warmest
  int64_t used_ = 0;
};

}  // namespace fathom
