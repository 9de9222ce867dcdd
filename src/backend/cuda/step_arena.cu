// The recorded step's arena: bump allocation in chunks that steps reuse.
#include "backend/cuda/step_arena.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace fathom::cuda {

namespace {

size_t aligned(size_t n) { return size_t(cuda_memory::aligned(int64_t(n))); }

}  // namespace

StepArena::Chunk::~Chunk() {
  if (copied) cudaEventDestroy(copied);
  if (pinned) cudaFreeHost(pinned);
}

std::shared_ptr<StepArena::Chunk> StepArena::new_chunk(size_t tensor_bytes, size_t stage_bytes) {
  auto c = std::make_shared<Chunk>();
  c->tensor_bytes = aligned(tensor_bytes);
  c->stage_bytes = aligned(stage_bytes);
  c->device = allocate_(c->tensor_bytes + c->stage_bytes);
  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&c->pinned), c->stage_bytes), "allocate a step's staging memory");
  check_cuda(cudaEventCreateWithFlags(&c->copied, cudaEventDisableTiming), "create an event");
  return c;
}

void StepArena::begin() {
  size_t tensor = 0, stage = 0;
  bool reusable = chunks_.size() == 1;
  for (const auto& c : chunks_) {
    tensor += c->tensor_used;
    stage += c->stage_used;
    reusable = reusable && c.use_count() == 1;  // no tensor of an earlier step still holds it
  }
  want_tensor_ = std::max(want_tensor_, tensor + tensor / 4);
  want_stage_ = std::max(want_stage_, stage + stage / 4);
  if (reusable && chunks_[0]->tensor_bytes >= want_tensor_ && chunks_[0]->stage_bytes >= want_stage_) {
    Chunk& c = *chunks_[0];
    // The mirror is rewritten now: the last step's copy out of it must be done.
    check_cuda(cudaEventSynchronize(c.copied), "wait for a step's staging copy");
    c.tensor_used = c.stage_used = c.stage_flushed = 0;
    return;
  }
  chunks_.clear();
  chunks_.push_back(new_chunk(want_tensor_, want_stage_));
}

StepArena::Chunk& StepArena::room_for(size_t tensor, size_t stage) {
  check(!chunks_.empty(), "cuda: a step's arena was used outside a step");
  Chunk& last = *chunks_.back();
  if (last.tensor_used + tensor <= last.tensor_bytes && last.stage_used + stage <= last.stage_bytes) return last;
  chunks_.push_back(new_chunk(std::max(tensor, want_tensor_), std::max(stage, want_stage_)));
  return *chunks_.back();
}

Tensor StepArena::tensor(std::vector<int64_t> shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const size_t bytes = aligned(size_t(n) * dtype_size(dtype));
  Chunk& c = room_for(bytes, 0);
  void* p = static_cast<char*>(c.device.raw()) + c.tensor_used;
  c.tensor_used += bytes;
  // The tensor holds the chunk (aliasing: it points into it).
  std::shared_ptr<const void> owner(chunks_.back(), p);
  return Tensor::borrow(p, std::move(shape), dtype, std::move(owner), Device::cuda);
}

void* StepArena::stage(const void* host, size_t bytes) {
  const size_t size = aligned(std::max<size_t>(bytes, 1));
  Chunk& c = room_for(0, size);
  std::memcpy(c.pinned + c.stage_used, host, bytes);
  void* device = static_cast<char*>(c.device.raw()) + c.tensor_bytes + c.stage_used;
  c.stage_used += size;
  return device;
}

Tensor StepArena::upload(const Tensor& host) {
  void* p = stage(host.raw(), host.nbytes());
  std::shared_ptr<const void> owner(chunks_.back(), p);
  return Tensor::borrow(p, host.shape(), host.dtype(), std::move(owner), Device::cuda);
}

void StepArena::flush(cudaStream_t stream) {
  for (const auto& c : chunks_) {
    if (c->stage_used == c->stage_flushed) continue;
    const size_t from = c->stage_flushed;
    check_cuda(cudaMemcpyAsync(static_cast<char*>(c->device.raw()) + c->tensor_bytes + from, c->pinned + from,
                               c->stage_used - from, cudaMemcpyHostToDevice, stream),
               "copy a step's staged data");
    check_cuda(cudaEventRecord(c->copied, stream), "record an event");
    c->stage_flushed = c->stage_used;
  }
}

}  // namespace fathom::cuda
