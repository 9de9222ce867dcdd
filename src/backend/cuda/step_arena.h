#pragma once
// Where a recorded step's tensors and host data live. A graph is replayed
// with the addresses it was captured with, so every step of the same shape
// must get the same ones: the arena hands out memory by bumping offsets from
// the start of its chunk at each step. Host data an op sends to the device
// (token ids, block tables, RoPE tables) is written into a pinned mirror of
// the chunk's staging region and copied up before the graph piece that
// reads it runs (one transfer per piece). A tensor that outlives its step keeps its chunk alive, and the next
// step starts a fresh chunk rather than overwrite it.
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cuda/device_memory.h"
#include "core/tensor.h"

namespace fathom::cuda {

class StepArena {
 public:
  // `allocate(bytes)` gives device memory that stays until its tensor's
  // owner lets go (the backend's counted allocator).
  using DeviceAllocator = std::function<Tensor(size_t bytes)>;
  explicit StepArena(DeviceAllocator allocate) : allocate_(std::move(allocate)) {}

  // Starts a step: offsets back to zero in a chunk nothing else holds, sized
  // for what the last step used.
  void begin();
  // A step's tensor: device memory in the chunk.
  Tensor tensor(std::vector<int64_t> shape, DType dtype);
  // host bytes for the device: copied into the pinned mirror now, on the
  // device after flush(). Returns their device address.
  void* stage(const void* host, size_t bytes);
  // A step's tensor holding a host tensor's contents (staged as above).
  Tensor upload(const Tensor& host);
  // Enqueues the copy of the bytes staged since the last flush to the device.
  void flush(cudaStream_t stream);

 private:
  struct Chunk {
    Tensor device;                 // [tensors region | staging region]
    char* pinned = nullptr;        // host mirror of the staging region
    cudaEvent_t copied = nullptr;  // the last flush's copy has read the mirror
    size_t tensor_bytes = 0, stage_bytes = 0;
    size_t tensor_used = 0, stage_used = 0, stage_flushed = 0;
    ~Chunk();
  };
  std::shared_ptr<Chunk> new_chunk(size_t tensor_bytes, size_t stage_bytes);
  // A chunk with room for `tensor` + `stage` more bytes (a second chunk when the current one is full).
  Chunk& room_for(size_t tensor, size_t stage);

  DeviceAllocator allocate_;
  std::vector<std::shared_ptr<Chunk>> chunks_;  // this step's; the last one takes new allocations
  size_t want_tensor_ = size_t(cuda_memory::kArenaTensorBytes), want_stage_ = size_t(cuda_memory::kArenaStageBytes);
};

}  // namespace fathom::cuda
