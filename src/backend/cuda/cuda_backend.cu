// The CUDA backend: context, memory and matmul.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cublas_library.h"
#include "backend/cuda/cuda_factory.h"
#include "core/error.h"

namespace fathom::cuda {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("cuda: ", what, ": ", cudaGetErrorString(status));
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("cuda: ", what, ": cuBLAS status ", int(status));
}

Context::~Context() {
  cudaSetDevice(device);
  if (stream) cudaStreamSynchronize(stream);
  if (pinned) cudaFreeHost(pinned);
  if (graph_start) cudaEventDestroy(graph_start);
  if (graph_end) cudaEventDestroy(graph_end);
  if (cublas) cublas_library().destroy(cublas);
  if (stream) cudaStreamDestroy(stream);
}

namespace {

// Makes `device` current; an error naming the cause where it cannot be used.
void select_device(int device) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0)
    fail("--device cuda:", device, ": no CUDA device is usable here (",
         status == cudaSuccess ? "none found" : cudaGetErrorString(status), ")");
  check(device >= 0 && device < count, "--device cuda:", device, ": this machine has ", count, " CUDA device(s)");
  check_cuda(cudaSetDevice(device), "select the device");
}

}  // namespace

CudaBackend::CudaBackend(int device)
    : ctx_(std::make_shared<Context>()),
      arena_([this](size_t bytes) { return allocate({int64_t((bytes + 3) / 4)}, DType::i32); }) {
  select_device(device);
  ctx_->device = device;
  check_cuda(cudaStreamCreateWithFlags(&ctx_->stream, cudaStreamNonBlocking), "create a stream");
  check_cublas(cublas_library().create(&ctx_->cublas), "create a cuBLAS handle");
  check_cublas(cublas_library().set_stream(ctx_->cublas, ctx_->stream), "bind cuBLAS to the stream");
  // f32 matmuls stay f32 (no TF32): results must match the CPU's to 1e-4.
  check_cublas(cublas_library().set_math_mode(ctx_->cublas, CUBLAS_PEDANTIC_MATH), "set cuBLAS math mode");
  // The stream-ordered pool keeps what it has (by default it hands memory
  // back to the driver at every synchronization, and each step's scratch
  // would be mapped again); the memory contract counts what tensors hold.
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaDeviceGetDefaultMemPool(&pool, device), "get the memory pool");
  uint64_t keep = UINT64_MAX;
  check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "configure the memory pool");
  check_cuda(cudaEventCreate(&ctx_->graph_start), "create a timing event");
  check_cuda(cudaEventCreate(&ctx_->graph_end), "create a timing event");
  ctx_->pinned_bytes = size_t(16) << 20;
  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&ctx_->pinned), ctx_->pinned_bytes), "allocate pinned memory");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "read the device's properties");
  ctx_->name = std::string("cuda:") + std::to_string(device) + "-" + prop.name;
  ctx_->sm_count = prop.multiProcessorCount;
  // cuBLAS gets its workspace from us: captured into a graph, it must not
  // allocate on its own.
  workspace_ = allocate({cuda_memory::kCublasWorkspaceBytes / 4}, DType::i32);
  check_cublas(
      cublas_library().set_workspace(ctx_->cublas, workspace_.raw(), size_t(cuda_memory::kCublasWorkspaceBytes)),
      "set cuBLAS's workspace");
  auto env_is = [](const char* name, const char* value) {
    const char* v = std::getenv(name);
    return v && std::string(v) == value;
  };
  graphs_enabled_ = !env_is("FATHOM_CUDA_GRAPHS", "0");
  gemv_enabled_ = !env_is("FATHOM_CUDA_GEMV", "0");
  sync_ops_ = env_is("FATHOM_CUDA_SYNC_OPS", "1");
  ctx_->overlap_kernels = prop.major >= 9 && !env_is("FATHOM_CUDA_OVERLAP", "0");
}

namespace {

Tensor device_tensor(const std::shared_ptr<Context>& ctx, std::vector<int64_t> shape, DType dtype, bool reservation) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const size_t bytes = size_t(cuda_memory::aligned(n * int64_t(dtype_size(dtype))));
  void* p = nullptr;
  if (bytes) check_cuda(cudaMallocAsync(&p, bytes, ctx->stream), "allocate device memory");
  if (reservation) count_reservation(Device::cuda, int64_t(bytes));
  else count_allocation(Device::cuda, int64_t(bytes));
  std::shared_ptr<const void> owner(p, [ctx, bytes, reservation](const void* q) {
    if (q && ctx->recording) ctx->deferred_frees.push_back(const_cast<void*>(q));
    else if (q) cudaFreeAsync(const_cast<void*>(q), ctx->stream);
    if (reservation) count_reservation(Device::cuda, -int64_t(bytes));
    else count_allocation(Device::cuda, -int64_t(bytes));
  });
  return Tensor::borrow(p, std::move(shape), dtype, std::move(owner), Device::cuda);
}

}  // namespace

Tensor CudaBackend::allocate(std::vector<int64_t> shape, DType dtype) {
  return device_tensor(ctx_, std::move(shape), dtype, false);
}

Tensor CudaBackend::empty_impl(std::vector<int64_t> shape, DType dtype) {
  if (recorder_) return arena_.tensor(std::move(shape), dtype);
  return allocate(std::move(shape), dtype);
}

Tensor CudaBackend::reserve_impl(std::vector<int64_t> shape, DType dtype) {
  // Device memory is committed when allocated: a KV slab is taken whole.
  return device_tensor(ctx_, std::move(shape), dtype, true);
}

void CudaBackend::copy_to_device(void* dst, const void* host, size_t bytes) {
  Context& c = *ctx_;
  if (bytes == 0) return;
  if (bytes > c.pinned_bytes / 4) {  // large (weights): a direct copy
    check_cuda(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, c.stream), "copy to the device");
    return;
  }
  const size_t at = (c.pinned_head + 255) / 256 * 256;
  if (at + bytes > c.pinned_bytes) {
    // Wrapping: the copies still reading the ring's start must be done.
    check_cuda(cudaStreamSynchronize(c.stream), "wait for the stream");
    c.pinned_head = 0;
    return copy_to_device(dst, host, bytes);
  }
  std::memcpy(c.pinned + at, host, bytes);
  check_cuda(cudaMemcpyAsync(dst, c.pinned + at, bytes, cudaMemcpyHostToDevice, c.stream), "copy to the device");
  c.pinned_head = at + bytes;
}

Tensor CudaBackend::upload_impl(const Tensor& host) {
  if (host.dtype() == DType::affine) {
    // Codes, scales and biases each as they are stored.
    const AffineQuant& q = host.affine_quant();
    const int64_t cols = host.dim(-1), rows = host.numel() / cols, groups = cols / q.group_size;
    const Tensor codes = Tensor::borrow(host.raw(), {rows, cols * q.bits / 32}, DType::u32, nullptr);
    AffineQuant placed{q.bits, q.group_size, upload_impl(q.scales.reshape({rows, groups})),
                       upload_impl(q.biases.reshape({rows, groups}))};
    return Tensor::affine(upload_impl(codes), cols, std::move(placed), "upload").reshape(host.shape());
  }
  if (recorder_) return arena_.upload(host);
  Tensor t = empty_impl(host.shape(), host.dtype());
  copy_to_device(t.raw(), host.raw(), host.nbytes());
  return t;
}

struct CudaBackend::PinnedBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  ~PinnedBuffer() {
    if (data) cudaFreeHost(data);
  }
};

Tensor CudaBackend::pinned_host_tensor(std::vector<int64_t> shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const size_t bytes = std::max<size_t>(size_t(n) * dtype_size(dtype), 1);
  // The smallest free buffer that holds it, so the large ones stay for large
  // downloads; with none, a new buffer, in place of a free smaller one when
  // kPinnedDownloads are kept already.
  std::shared_ptr<PinnedBuffer>*fit = nullptr, *smaller = nullptr;
  for (auto& b : pinned_downloads_) {
    if (b.use_count() != 1) continue;
    if (b->bytes < bytes) smaller = &b;
    else if (!fit || b->bytes < (*fit)->bytes) fit = &b;
  }
  if (!fit) {
    if (pinned_downloads_.size() >= kPinnedDownloads) {
      if (!smaller) return Tensor::empty(std::move(shape), dtype);
      pinned_downloads_.erase(pinned_downloads_.begin() + (smaller - pinned_downloads_.data()));  // freed first
    }
    auto b = std::make_shared<PinnedBuffer>();
    check_cuda(cudaMallocHost(&b->data, bytes), "allocate pinned memory for a download");
    b->bytes = bytes;
    fit = &pinned_downloads_.emplace_back(std::move(b));
  }
  void* data = (*fit)->data;
  return Tensor::borrow(data, std::move(shape), dtype, std::shared_ptr<const void>(*fit, data));
}

Tensor CudaBackend::download_impl(const Tensor& t) {
  if (recorder_) {  // filled once the step has run
    Tensor host = pinned_host_tensor(t.shape(), t.dtype());
    pending_downloads_.emplace_back(host, t.raw());
    return host;
  }
  // An eager step's logits (more rows than a recorded step takes) through a
  // pinned buffer too: a fresh host allocation of tens of MB a step, faulted
  // in page by page and filled through the driver's staging, cost more than
  // the step's matmuls. Larger downloads (a prefill's every logit) take
  // ordinary memory, never held pinned.
  Tensor host = t.nbytes() <= kPinnedDownloadBytes ? pinned_host_tensor(t.shape(), t.dtype())
                                                   : Tensor::empty(t.shape(), t.dtype());
  if (t.nbytes())
    check_cuda(cudaMemcpyAsync(host.raw(), t.raw(), t.nbytes(), cudaMemcpyDeviceToHost, ctx_->stream), "download");
  check_cuda(cudaStreamSynchronize(ctx_->stream), "wait for the stream");
  return host;
}

void CudaBackend::copy_impl(const Tensor& src, Tensor& dst) {
  if (src.nbytes() == 0 || src.raw() == dst.raw()) return;
  device_copy(dst.raw(), src.raw(), src.nbytes());
}

void CudaBackend::device_copy(void* dst, const void* src, size_t bytes) {
  enqueue({1, uint64_t(uintptr_t(dst)), uint64_t(uintptr_t(src)), bytes}, [=](cudaStream_t s) {
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "device-to-device copy");
  });
}

void CudaBackend::run_step(const std::function<void()>& step) {
  if (!graphs_enabled_ || recorder_) return step();
  step_pieces_ = StepPieces{};
  step_pieces_.started = std::chrono::steady_clock::now();
  arena_.begin();
  step_recorder_.begin();
  graphs_.begin_step();
  recorder_ = &step_recorder_;
  ctx_->recording = true;
  auto finish = [this] {
    step_recorder_.drop_closures();
    recorder_ = nullptr;
    ctx_->recording = false;
    for (void* p : ctx_->deferred_frees) cudaFreeAsync(p, ctx_->stream);
    ctx_->deferred_frees.clear();
  };
  double host_seconds = 0.0;
  try {
    step();
    launch_piece();
    if (step_pieces_.launched) check_cuda(cudaEventRecord(ctx_->graph_end, ctx_->stream), "record a timing event");
    host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_pieces_.started).count();
  } catch (...) {
    // Pieces already launched run to their end; what they wrote belongs to
    // rows the failed step claimed.
    pending_downloads_.clear();
    finish();
    throw;
  }
  finish();
  for (auto& [host, src] : pending_downloads_)
    check_cuda(cudaMemcpyAsync(host.raw(), src, host.nbytes(), cudaMemcpyDeviceToHost, ctx_->stream), "download");
  float gpu_ms = -1.0f;
  if (!pending_downloads_.empty()) {
    check_cuda(cudaStreamSynchronize(ctx_->stream), "wait for the stream");
    if (step_pieces_.launched && cudaEventElapsedTime(&gpu_ms, ctx_->graph_start, ctx_->graph_end) != cudaSuccess)
      gpu_ms = -1.0f;
  }
  pending_downloads_.clear();
  const double gpu_seconds = gpu_ms < 0.0f ? -1.0 : gpu_ms * 1e-3;
  if (graphs_.count_step(step_pieces_.lead_seconds, host_seconds, gpu_seconds))
    piece_growth_.sample(host_seconds, gpu_seconds);
}

void CudaBackend::launch_piece() {
  const size_t end = recorder_->size();
  if (end == step_pieces_.start) return;
  arena_.flush(ctx_->stream);  // what the piece's calls staged
  if (step_pieces_.launched == 0) {
    check_cuda(cudaEventRecord(ctx_->graph_start, ctx_->stream), "record a timing event");
    const auto waited = std::chrono::steady_clock::now() - step_pieces_.started;
    step_pieces_.lead_seconds = std::chrono::duration<double>(waited).count();
  }
  const std::span<RecordedCall> calls = recorder_->range(step_pieces_.start, end);
  step_pieces_.start = end;
  step_pieces_.length *= piece_growth_.factor();
  ++step_pieces_.launched;
  if (graphs_enabled_) {
    try {
      graphs_.run(calls, ctx_->stream);
      return;
    } catch (const Error& e) {
      // A step that cannot be captured still runs, and so do later ones.
      std::fprintf(stderr, "fathom: cuda graphs are off from here on: %s\n", e.what());
      graphs_enabled_ = false;
    }
  }
  graphs_.run_eagerly(calls, ctx_->stream);
}

void* CudaBackend::scratch(int slot, size_t bytes) {
  Tensor& t = buffers_[slot];
  if (!t.defined() || t.nbytes() < bytes) {
    t = Tensor();
    t = allocate({int64_t((bytes + 3) / 4)}, DType::i32);
  }
  return t.raw();
}

void* CudaBackend::stage(int slot, const void* host, size_t bytes) {
  if (recorder_) return arena_.stage(host, bytes);
  void* p = scratch(slot, bytes);
  copy_to_device(p, host, bytes);
  return p;
}

// --- Matmul ---

namespace {

__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

// y[M, N] = x[M, K] · w[N, K]ᵀ (+ bias), f32 sums, in 32×32 tiles: for the
// combinations cuBLAS has no type for (f32 activations with bf16 weights).
template <typename W>
__global__ void matmul_tiled(const float* x, const W* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K) {
  await_previous_kernel();
  __shared__ float xs[32][33], ws[32][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t m0 = int64_t(blockIdx.y) * 32, n0 = int64_t(blockIdx.x) * 32;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t k0 = 0; k0 < K; k0 += 32) {
    for (int r = ty; r < 32; r += 8) {
      const int64_t k = k0 + tx;
      xs[r][tx] = (m0 + r < M && k < K) ? x[(m0 + r) * K + k] : 0.0f;
      ws[r][tx] = (n0 + r < N && k < K) ? widen(w[(n0 + r) * K + k]) : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < 32; ++kk)
      for (int i = 0; i < 4; ++i) acc[i] += xs[ty + 8 * i][kk] * ws[tx][kk];
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + ty + 8 * i, n = n0 + tx;
    if (m < M && n < N) y[m * N + n] = acc[i] + (bias ? bias[n] : 0.0f);
  }
}

__global__ void round_to_bf16(const float* x, int64_t n, __nv_bfloat16* out, float* rounded) {
  await_previous_kernel();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const __nv_bfloat16 b = __float2bfloat16_rn(x[i]);
    if (out) out[i] = b;
    if (rounded) rounded[i] = __bfloat162float(b);
  }
}

// round_to_bf16 four values a thread (16-byte loads, 8-byte stores), where
// the pointers allow: a prefill chunk's x is tens of MB, each value a thread
// left the memory system half idle.
__global__ void round_to_bf16_x4(const float4* x, int64_t n4, uint2* out, float4* rounded) {
  await_previous_kernel();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x) {
    const float4 v = x[i];
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    if (out) out[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    if (rounded) rounded[i] = make_float4(__low2float(lo), __high2float(lo), __low2float(hi), __high2float(hi));
  }
}

__global__ void add_bias(float* y, const float* bias, int64_t M, int64_t N) {
  await_previous_kernel();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < M * N; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += bias[i % N];
}

int blocks_for(int64_t n, int threads = 256) { return int(std::min<int64_t>((n + threads - 1) / threads, 65535)); }

}  // namespace

void CudaBackend::matmul_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool bf16_inputs) {
  const MatmulTarget target{&w, bias, &y};
  matmul_shared_impl(x, {&target, 1}, bf16_inputs);
}

void CudaBackend::matmul_shared_impl(const Tensor& x, std::span<const MatmulTarget> targets, bool bf16_inputs) {
  const int64_t M = x.dim(0), K = x.dim(1);
  if (M == 0) return;
  const auto by_gemv = [&](const MatmulTarget& t) { return bf16_inputs && gemv_enabled_ && gemv_suits(M, K, *t.w); };
  const auto affine = [](const MatmulTarget& t) { return t.w->dtype() == DType::affine; };
  const auto by_affine_gemv = [&](const MatmulTarget& t) {
    return affine(t) && M <= cuda_memory::affine_gemv_max_rows(t.w->affine_quant().bits, bf16_inputs);
  };
  std::vector<GemvOutput> gemv;
  std::vector<const MatmulTarget*> packed;  // quantized weights read by the GEMV
  bool rounded_x = false, f32_weights = false;  // what the cuBLAS targets need of x
  for (const MatmulTarget& t : targets) {
    if (by_gemv(t)) gemv.push_back({t.w, t.bias ? t.bias->data<float>() : nullptr, t.y->data<float>()});
    else if (by_affine_gemv(t)) packed.push_back(&t);
    else {
      rounded_x = bf16_inputs;
      f32_weights = f32_weights || t.w->dtype() == DType::f32;
    }
  }
  // bf16 compute rounds x once: bf16 products, f32 sums (cuBLAS with f32
  // compute); the GEMVs round their rows themselves.
  __nv_bfloat16* xb = nullptr;
  float* x_rounded = nullptr;
  if (rounded_x) {
    // x rounded but kept in f32 only for f32 weights.
    xb = static_cast<__nv_bfloat16*>(scratch(kRoundedX, size_t(M * K) * 2 + size_t(M * K) * 4));
    if (f32_weights) x_rounded = reinterpret_cast<float*>(xb + ((M * K + 1) / 2) * 2);
    if ((M * K) % 4 == 0 && aligned16(x.data<float>()) && aligned16(xb) && aligned16(x_rounded))
      launch("matmul: round x to bf16", round_to_bf16_x4, blocks_for(M * K / 4), 256, 0,
             reinterpret_cast<const float4*>(x.data<float>()), M * K / 4, reinterpret_cast<uint2*>(xb),
             reinterpret_cast<float4*>(x_rounded));
    else
      launch("matmul: round x to bf16", round_to_bf16, blocks_for(M * K), 256, 0, x.data<float>(), M * K, xb,
             x_rounded);
  }
  if (!gemv.empty()) gemv_bf16(x.data<float>(), K, gemv);
  const bool planes_only = !packed.empty() && affine_gemv(x, packed, bf16_inputs);
  ctx_->release_before_wait = planes_only && gemv.empty() && packed.size() == targets.size();
  for (const MatmulTarget& t : targets) {
    if (by_gemv(t) || by_affine_gemv(t)) continue;
    const int64_t N = t.w->dim(0);
    float* y = t.y->data<float>();
    const float* bias = t.bias ? t.bias->data<float>() : nullptr;
    const bool w_bf16 = t.w->dtype() == DType::bf16;
    if (affine(t)) {
      affine_panels(t, M, K, bf16_inputs ? static_cast<const void*>(xb) : x.data<float>(), bf16_inputs);
    } else if (bf16_inputs || !w_bf16) {
      // bf16 products (both inputs bf16) or exact f32 ones (f32 weights).
      const void* xs = w_bf16 ? static_cast<const void*>(xb) : bf16_inputs ? x_rounded : x.data<float>();
      gemm(t.w->raw(), xs, w_bf16 ? CUDA_R_16BF : CUDA_R_32F, M, N, K, y, N, false);
    } else {
      const dim3 grid(unsigned((N + 31) / 32), unsigned((M + 31) / 32)), block(32, 8);
      launch("matmul: f32 activations × bf16 weights", matmul_tiled<__nv_bfloat16>, grid, block, 0, x.data<float>(),
             static_cast<const __nv_bfloat16*>(t.w->raw()), bias, y, M, N, K);
      continue;
    }
    if (bias) launch("matmul: bias", add_bias, blocks_for(M * N), 256, 0, y, bias, M, N);
  }
}

void CudaBackend::gemm(const void* w, const void* xs, cudaDataType type, int64_t M, int64_t N, int64_t K, float* y,
                       int64_t ldy, bool accumulate) {
  // Column-major view: yᵀ [N, M] = w [N, K] (stored as K×N) transposed × xᵀ [K, M].
  const cublasComputeType_t compute = type == CUDA_R_16BF ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
  enqueue({2, uint64_t(uintptr_t(w)), uint64_t(uintptr_t(xs)), uint64_t(uintptr_t(y)), uint64_t(M), uint64_t(N),
           uint64_t(K), uint64_t(type), uint64_t(ldy), uint64_t(accumulate)},
          [=, h = ctx_->cublas](cudaStream_t) {
            const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
            check_cublas(cublas_library().gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &one, w, type,
                                                  int(K), xs, type, int(K), &beta, y, CUDA_R_32F, int(ldy), compute,
                                                  CUBLAS_GEMM_DEFAULT),
                         "matmul");
          });
}

}  // namespace fathom::cuda

namespace fathom {

std::shared_ptr<Backend> make_cuda_backend(int device) { return std::make_shared<cuda::CudaBackend>(device); }

int64_t cuda_free_bytes(int device) {
  cuda::select_device(device);
  size_t free = 0, total = 0;
  cuda::check_cuda(cudaMemGetInfo(&free, &total), "read the device's free memory");
  return int64_t(free);
}

}  // namespace fathom
