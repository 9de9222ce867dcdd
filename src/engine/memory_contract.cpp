#include "engine/memory_contract.h"

#include <algorithm>
#include <set>

#include "backend/cpu/kernels.h"
#include "backend/cuda/device_memory.h"
#include "core/error.h"
#include "engine/speculative.h"
#include "kv/block_pool.h"
#include "model/model.h"

namespace fathom {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Matrices the loader keeps in f32 whatever the compute dtype (WeightLoader::f32_matrix):
// routers and the small Gated DeltaNet projections, where bf16 rounding flips decisions.
bool kept_in_f32(const std::string& name) {
  for (const char* suffix : {".mlp.gate.weight", ".shared_expert_gate.weight", ".in_proj_ba.weight",
                             ".in_proj_b.weight", ".in_proj_a.weight", ".router.proj.weight"})
    if (ends_with(name, suffix)) return true;
  return false;
}

// The module an MLX-quantized tensor belongs to (its .weight holds U32 codes,
// .scales and .biases lie beside it), or "" for any other tensor.
std::string quantized_module(const std::map<std::string, StoredTensor>& tensors, const std::string& name) {
  for (const char* suffix : {".weight", ".scales", ".biases"})
    if (ends_with(name, suffix)) {
      const std::string module = name.substr(0, name.size() - std::string(suffix).size());
      return tensors.count(module + ".scales") ? module : std::string();
    }
  return std::string();
}

// The code width of a quantized module (32, as U32 values, without a
// quantization block: then the load fails anyway).
int module_bits(const ModelConfig& c, const std::string& module) {
  return c.quantization ? c.quantization->for_module(module).value_or(c.quantization->defaults).bits : 32;
}

int64_t numel(const StoredTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

}  // namespace

MemoryContract::MemoryContract(Inputs inputs) : in_(std::move(inputs)) {
  check(in_.threads > 0, "memory contract: threads must be positive, got ", in_.threads);
  check(in_.sliding_step > 0, "memory contract: sliding step must be positive, got ", in_.sliding_step);
  require_supported_model_type(in_.config.model_type);
  in_.kv_scheme.validate_for(in_.config);
}

MemoryContract MemoryContract::for_model_dir(const std::string& dir, ComputeDType dtype, const KvScheme& scheme,
                                             int threads, WeightResidence residence, Device device) {
  Inputs in;
  in.config = load_model_config(dir);
  require_supported_model_type(in.config.model_type);  // before the weights: the clearer error
  in.tensors = read_safetensors_headers(dir);
  in.dtype = dtype;
  in.kv_scheme = scheme;
  in.threads = threads;
  in.residence = residence;
  in.device = device;
  return MemoryContract(std::move(in));
}

int64_t MemoryContract::weights_bytes() const {
  if (in_.device == Device::cuda) return device_weights_bytes();
  int64_t stored = 0, copies = 0;
  std::map<int, int64_t> file_bytes;
  const ModelConfig& c = in_.config;
  for (const auto& [name, t] : in_.tensors) {
    stored += int64_t(t.nbytes);
    file_bytes[t.file] += int64_t(t.nbytes);
    const int64_t n = numel(t);
    const bool f32 = t.dtype == "F32";
    if (const std::string module = quantized_module(in_.tensors, name); !module.empty()) {
      // Read packed where they lie. The loader widens routers and the small
      // Gated DeltaNet projections to f32 (the logical matrix, from the
      // codes), and regroups the fused one into a packed private copy.
      if (!ends_with(name, ".weight")) {
        if (ends_with(module, ".in_proj_qkvz")) copies += int64_t(t.nbytes);
        continue;
      }
      const int bits = module_bits(c, module);
      const int64_t logical = n * 32 / bits;
      if (kept_in_f32(name) || ends_with(name, ".in_proj_ba.weight")) copies += logical * 4;
      else if (ends_with(name, ".in_proj_qkvz.weight")) copies += int64_t(t.nbytes);
      continue;
    }
    if (t.shape.size() <= 1) {
      // Norm weights and biases: an f32 copy, also when stored in f32
      // (Gemma and Qwen3-Next store w and scale by 1 + w; Gated DeltaNet
      // keeps −exp(A_log)).
      copies += n * 4;
    } else if (ends_with(name, ".conv1d.weight")) {
      if (!f32) copies += n * 4;  // Gated DeltaNet's conv weights run in f32
    } else if (ends_with(name, ".in_proj_qkvz.weight")) {
      // Qwen3-Next's fused projection, regrouped into a private copy at load
      // (in the matmul dtype: bf16 for bf16 compute or bf16 storage).
      copies += n * (in_.dtype == ComputeDType::bf16 || t.dtype == "BF16" ? 2 : 4);
    } else if (ends_with(name, ".in_proj_ba.weight")) {
      copies += n * 4;  // regrouped likewise, kept in f32
    } else if (kept_in_f32(name)) {
      if (!f32) copies += n * 4;
    } else if (name.find("embed_tokens") != std::string::npos &&
               !(c.tie_word_embeddings && name.find("per_layer") == std::string::npos)) {
      // Embedding tables are read as stored (the gather widens any dtype).
    } else if (in_.dtype == ComputeDType::bf16) {
      if (t.dtype != "BF16") copies += n * 2;
    } else if (t.dtype == "F16") {
      copies += n * 4;  // f32 compute widens f16 once; bf16 and f32 stay
    }
  }
  if (in_.residence == WeightResidence::ram) {
    // Each file is copied whole into 2 MiB pages.
    constexpr int64_t kHuge = int64_t(2) << 20;
    stored = 0;
    for (const auto& [_, bytes] : file_bytes) stored += (bytes + kHuge - 1) / kHuge * kHuge;
  }
  return stored + copies;
}

int64_t MemoryContract::device_weights_bytes() const {
  // Each tensor the text model loads, in the form the loader uploads it
  // (WeightLoader::place), in allocations of its own: the tensors under the
  // text model's root (not a vision tower beside it, nor anything else a
  // folder holds) and the output head. Quantized modules go up as stored
  // (codes, scales and biases), except those the loader widens to f32.
  const ModelConfig& c = in_.config;
  const bool bf16 = in_.dtype == ComputeDType::bf16;
  std::string root;
  for (const char* p : {"model.", "model.language_model.", "language_model.model."})
    if (in_.tensors.count(std::string(p) + "embed_tokens.weight")) {
      root = p;
      break;
    }
  // The head: lm_head where the model is untied and has one, else the embedding's matmul copy.
  std::string head = root + "embed_tokens.weight";
  if (!c.tie_word_embeddings)
    for (const char* name : {"lm_head.weight", "language_model.lm_head.weight"})
      if (in_.tensors.count(name)) {
        head = name;
        break;
      }
  int64_t total = 0;
  auto add = [&](int64_t bytes) { total += cuda_memory::aligned(bytes); };
  // A quantized module's tensor: the codes, scales and biases as stored, or
  // (routers, the small Gated DeltaNet projections) the widened f32 matrix.
  auto add_quantized = [&](const std::string& name, const std::string& module, const StoredTensor& t) {
    if (!kept_in_f32(module + ".weight")) return add(int64_t(t.nbytes));
    if (!ends_with(name, ".weight")) return;
    add(numel(t) * 32 / module_bits(c, module) * 4);
  };
  // to_matmul_dtype: bf16 for bf16 compute; f32 compute keeps bf16 and widens the rest.
  auto matmul_bytes = [&](const StoredTensor& t) { return numel(t) * (bf16 || t.dtype == "BF16" ? 2 : 4); };
  auto add_head = [&](const std::string& name) {
    const std::string module = quantized_module(in_.tensors, name);
    if (module.empty()) return add(matmul_bytes(in_.tensors.at(name)));
    for (const char* part : {".weight", ".scales", ".biases"}) add(int64_t(in_.tensors.at(module + part).nbytes));
  };
  for (const auto& [name, t] : in_.tensors) {
    if (name.rfind(root, 0) != 0) continue;  // the head is added below
    if (ends_with(name, ".layer_scalar")) continue;  // read once, kept on the host
    // Gemma 4's routers keep a vector of ones beside their weights.
    if (ends_with(name, ".router.proj.weight")) add(c.hidden_size * 4);
    if (const std::string module = quantized_module(in_.tensors, name); !module.empty()) {
      add_quantized(name, module, t);
      continue;
    }
    const int64_t n = numel(t);
    if (t.shape.size() <= 1 || ends_with(name, ".conv1d.weight") || ends_with(name, ".in_proj_ba.weight") ||
        kept_in_f32(name))
      add(n * 4);  // norms, biases, conv weights, routers and the small projections: f32
    else if (name.find("embed_tokens") != std::string::npos)
      add(int64_t(t.nbytes));  // tables, as stored
    else
      add(matmul_bytes(t));
  }
  if (in_.tensors.count(head)) add_head(head);
  // Each MoE layer whose experts the GPU routes itself (CudaBackend::
  // bind_experts: one format for every expert matrix, plain or 4- and 8-bit
  // codes, widths that are multiples of 8) gets a table of their weight
  // addresses: the three matrices' data, and for codes their scales and biases.
  std::set<int> expert_bits;  // 0: plain
  for (const auto& [name, t] : in_.tensors)
    if ((name.find(".experts") != std::string::npos || name.find(".switch_mlp.") != std::string::npos) &&
        t.shape.size() >= 2 && !ends_with(name, ".scales") && !ends_with(name, ".biases")) {
      const std::string module = quantized_module(in_.tensors, name);
      expert_bits.insert(module.empty() ? 0 : module_bits(c, module));
    }
  const int bits = expert_bits.size() == 1 ? *expert_bits.begin() : -1;
  if (c.num_experts > 0 && (bits == 0 || bits == 4 || bits == 8) && c.hidden_size % 8 == 0 &&
      c.moe_intermediate_size % 8 == 0)
    for (int64_t i = 0; i < c.num_layers; ++i)
      if (c.enable_moe_block || c.is_sparse_moe_layer(i)) add((bits ? 9 : 3) * c.num_experts * int64_t(sizeof(void*)));
  // So does Gemma 4's attention where a layer owns its KV (the values' unit-weight norm).
  if (c.model_type.rfind("gemma4", 0) == 0)
    for (int64_t i = 0; i < c.num_layers; ++i)
      if (c.owns_kv(i)) add(c.head_dim_of(i) * 4);
  return total;
}

int64_t MemoryContract::kv_bytes(int64_t tokens, int64_t chunk) const {
  check(tokens >= 0 && chunk > 0, "memory contract: kv bytes for ", tokens, " tokens in chunks of ", chunk);
  const ModelConfig& c = in_.config;
  const int64_t plain = in_.dtype == ComputeDType::f32 ? 4 : 2;
  const KvScheme& scheme = in_.kv_scheme;
  const int64_t final_bytes = scheme.bytes_at(c, tokens, plain, in_.sliding_step);
  const int64_t start = scheme.quantized_kv_start();
  if (start <= 0 || tokens < start || scheme.kind() == KvScheme::Kind::bf16) return final_bytes;
  // The cache converts at the first step boundary at or past the start: a
  // multiple of the step when prefill chunks are whole steps (decode steps
  // are single tokens and land on the start itself), else within a step of it.
  const int64_t step = effective_chunk(chunk);
  const int64_t boundary = chunk % step == 0 ? (start + step - 1) / step * step : start + step - 1;
  const int64_t n = std::min(tokens, boundary);
  const DType plain_dtype = plain == 4 ? DType::f32 : DType::bf16;
  const int64_t block_bytes = kv_block_bytes(c, plain_dtype);
  int64_t largest_layer = 0, widest_buffer = 0;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (!c.owns_kv(i)) continue;
    const LayerCodec codec = scheme.codec_for_layer(c, i);
    if (codec.kind == LayerCodec::Kind::plain) continue;
    const KvFormat f = codec.format(c.kv_heads_of(i), c.head_dim_of(i), plain_dtype, block_bytes);
    const int64_t blocks = kv_blocks_at(n, f.block_rows, kv_max_blocks(f.block_rows, n, c.window_of(i), in_.sliding_step));
    largest_layer = std::max(largest_layer, blocks * block_bytes);
    widest_buffer = std::max(widest_buffer, 2 * std::min(n, kKvConvertRows) * c.kv_heads_of(i) * c.head_dim_of(i) * 4);
  }
  const int64_t converting = KvScheme::bf16().bytes_at(c, n, plain, in_.sliding_step) + largest_layer + widest_buffer;
  return std::max(final_bytes, converting);
}

int64_t MemoryContract::effective_chunk(int64_t chunk) const {
  const ModelConfig& c = in_.config;
  const bool sliding = std::any_of(c.layer_types.begin(), c.layer_types.end(),
                                   [](LayerKind k) { return k == LayerKind::sliding_attention; });
  return sliding ? std::min(chunk, in_.sliding_step) : chunk;
}

int64_t MemoryContract::transient_bytes(int64_t chunk, int64_t context) const {
  const auto [step, scratch] = transient_parts(chunk, context);
  return step + scratch;
}

int64_t MemoryContract::backend_scratch_bytes(int64_t chunk, int64_t context) const {
  return transient_parts(chunk, context).second;
}

std::pair<int64_t, int64_t> MemoryContract::transient_parts(int64_t chunk, int64_t context) const {
  check(chunk > 0 && context >= 0, "memory contract: transient bytes of a chunk of ", chunk, " at context ", context);
  const ModelConfig& c = in_.config;
  const int64_t t = effective_chunk(chunk);
  int64_t max_q = 0, max_kv = 0, max_hd = 0, max_group = 1, coded = 0;
  bool plain_rows = in_.kv_scheme.quantized_kv_start() > 0;  // some attention reads bf16 rows
  // The most rows a block of any layer's format holds: attention takes the
  // scores of a block of plain rows at once.
  int64_t block_rows = 0;
  const DType plain = in_.dtype == ComputeDType::f32 ? DType::f32 : DType::bf16;
  const int64_t block_bytes = kv_block_bytes(c, plain);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (c.layer_types[i] == LayerKind::linear_attention) continue;
    const int64_t hd = c.head_dim_of(i), kvh = c.kv_heads_of(i);
    max_q = std::max(max_q, c.num_heads * hd);
    max_kv = std::max(max_kv, kvh * hd);
    max_hd = std::max(max_hd, hd);
    max_group = std::max(max_group, c.num_heads / std::max<int64_t>(kvh, 1));
    if (in_.kv_scheme.codec_for_layer(c, c.kv_source_of(i)).kind != LayerCodec::Kind::plain) coded = 1;
    else plain_rows = true;
    block_rows = std::max(block_rows, LayerCodec{}.format(kvh, hd, plain, block_bytes).block_rows);
  }
  const int64_t intermediate = c.intermediate_size * (c.use_double_wide_mlp ? 2 : 1);

  // Floats per token of the step's activations (each architecture allocates
  // a subset of these once per step and reuses them across layers).
  int64_t per_token = 4 * c.hidden_size;                  // residual, normed input, sublayer outputs
  per_token += 2 * max_q + 2 * max_kv;                     // q, attention output, k, v
  if (c.attn_output_gate) per_token += 3 * max_q;          // q with its gate, and the gate
  if (coded && in_.kv_scheme.kind() == KvScheme::Kind::turbo) per_token += max_q;  // rotated q
  per_token += 4 * std::max<int64_t>(max_hd, 1);           // RoPE cos and sin, global and local
  per_token += 2 * intermediate;                           // dense MLP gate and up
  if (c.num_experts > 0) {
    // Router logits; one expert's gathered tokens, gate, up and output (all
    // tokens may pick the same expert); the shared expert and its gate.
    per_token += c.num_experts + 3 * c.hidden_size + 2 * c.moe_intermediate_size;
    per_token += 2 * c.shared_expert_intermediate_size + c.hidden_size + 1;
    // On a GPU, expert_mlps with the routing on the device: each (row,
    // choice) pair's activated and output rows and the plan (at most three
    // ints a pair).
    if (in_.device == Device::cuda)
      per_token += c.num_experts_per_tok * (c.moe_intermediate_size + c.hidden_size + 3) + 1;
  }
  int64_t widest_input = std::max({c.hidden_size, intermediate, c.moe_intermediate_size, max_q,
                                   c.shared_expert_intermediate_size});
  if (c.linear_attention) {
    const auto& la = *c.linear_attention;
    per_token += 2 * la.conv_dim() + 2 * la.value_dim() + 2 * la.num_value_heads;  // qkv, conv, z, core, b, a
    per_token += 2 * la.key_dim() + 2 * la.value_dim() + 2 * la.num_value_heads;   // fused projections
    widest_input = std::max(widest_input, la.value_dim());
  }
  if (c.hidden_size_per_layer_input > 0) {
    const int64_t ple = c.hidden_size_per_layer_input;
    per_token += 2 * c.num_layers * ple + 2 * ple;  // per-layer inputs, their token part, gate and input
    widest_input = std::max(widest_input, c.num_layers * ple);
  }
  int64_t bytes = t * per_token * 4;  // the step's own, freed after it
  int64_t scratch = 0;                 // the backend's, kept between steps
  // The matmuls' inputs rounded to bf16, and widened back for kernels without
  // a bf16 dot product (billed whether or not this CPU has one).
  // With quantized weights the depths are the matrices' own widths (from the
  // headers): plain ones and, in their own GEMV scratch, quantized ones.
  int64_t quantized_depth = 0, plain_depth = widest_input;
  // Whether decode steps take the packed GEMV (else they widen panels too:
  // cpu_quant_matmul.cpp).
  const bool all_gemv = cpu::detect_isa() == cpu::Isa::avx512;
  // On a GPU, steps past the quantized GEMV's rows (4, or 16 for 4- and 8-bit
  // codes in bf16 compute) widen a panel of weight rows at a time
  // (affine_matmul.cu): the largest such panel.
  int64_t widened_panel = 0;
  if (c.quantization) {
    plain_depth = 0;
    for (const auto& [name, stored] : in_.tensors) {
      if (!ends_with(name, ".weight") || stored.shape.size() < 2) continue;
      const std::string module = quantized_module(in_.tensors, name);
      if (module.empty()) {
        plain_depth = std::max(plain_depth, stored.shape.back());
        continue;
      }
      const int bits = module_bits(c, module);
      quantized_depth = std::max(quantized_depth, stored.shape.back() * 32 / bits);
      if (!kept_in_f32(name) && t > cuda_memory::affine_gemv_max_rows(bits, in_.dtype == ComputeDType::bf16))
        widened_panel = std::max(widened_panel, cuda_memory::dequant_panel_bytes(stored.shape[stored.shape.size() - 2],
                                                                                 stored.shape.back() * 32 / bits));
    }
    plain_depth = std::min(plain_depth, widest_input);
    quantized_depth = std::min(quantized_depth, widest_input);
  }
  // One pair of rounded inputs serves both kinds (CpuBackend::round_inputs);
  // f32 compute rounds nothing, but the contract bills the plain pair anyway.
  const int64_t rounded_depth = in_.dtype == ComputeDType::bf16 ? std::max(plain_depth, quantized_depth) : plain_depth;
  // Logits of the last row: the model's, the forward's and the prefill's
  // copies, the caller's, and the final norm's row.
  bytes += 4 * c.vocab_size * 4 + c.hidden_size * 4;
  if (in_.device == Device::cuda) {
    // Each of the step's ~30 tensors is an allocation of its own, rounded up.
    bytes += 32 * cuda_memory::kAllocationAlignment;
    const int64_t panel = cuda_memory::aligned(widened_panel);
    return {bytes, cuda_scratch_bytes(t, context, rounded_depth, max_hd) + panel};
  }
  scratch += t * rounded_depth * (2 + 4);
  if (c.quantization) {
    // Matmuls over quantized weights: x reordered for the packed GEMV (decode
    // and verify rows only) and summed per group; and each thread's scratch
    // (cpu_quant_matmul.cpp).
    const int64_t k = quantized_depth, gemv_rows = 16;
    scratch += std::min(t, gemv_rows) * k * 4 + t * (k / 32) * 4;    // the GEMV's planes; group sums
    if (t > gemv_rows || !all_gemv) {
      int64_t per_thread = 0;
      for (int group : {32, 64, 128}) per_thread = std::max(per_thread, k ? cpu::quant_thread_scratch_bytes(k, group) : 0);
      scratch += in_.threads * per_thread;
    }
  }

  // Each thread's attention tile: gathered queries, results and scores over
  // the whole visible context and a block's partial product (CPU backend,
  // attention_scratch_floats).
  const int64_t tile_rows = std::max<int64_t>(1, 16 / max_group);
  const int64_t nq = std::min(t, tile_rows) * max_group;
  const int64_t keys = context;
  int64_t tile = 2 * nq * max_hd + nq * keys + nq * std::max(block_rows, max_hd);
  // bf16 compute over plain rows, past decode-like steps: the tile's bf16
  // copies (billed whether or not this CPU takes them).
  if (in_.dtype == ComputeDType::bf16 && plain_rows && t > cpu::kDecodeLikeRows)
    tile += (cpu::attention_bf16_tile_elements(nq, max_hd, keys, block_rows) + 1) / 2;
  scratch += in_.threads * tile * 4;
  // Decode-like steps over plain rows split into key segments: each
  // segment's output and log-sum-exps (CpuBackend::attend_decode_segments).
  if (plain_rows && t <= cpu::kDecodeLikeRows && cpu::decode_segments(keys) > 1)
    scratch += t * c.num_heads * cpu::decode_segments(keys) * (max_hd + 1) * 4;
  if (c.linear_attention) {
    // Each thread's chunked delta-rule workspace (chunks of 64 tokens), freed after the call.
    const auto& la = *c.linear_attention;
    const int64_t l = std::min<int64_t>(64, t);
    bytes += in_.threads * (l * (2 * la.key_head_dim + la.value_head_dim + 2 * l + 2) + 2 * la.value_head_dim) * 4;
  }
  return {bytes, scratch};
}

int64_t MemoryContract::cuda_scratch_bytes(int64_t t, int64_t context, int64_t rounded_depth, int64_t max_hd) const {
  namespace cm = cuda_memory;
  const ModelConfig& c = in_.config;
  // The backend's scratch slots grow to the largest step and stay
  // (CudaBackend::scratch): x rounded to bf16 and widened back; attention's
  // split partials (each query row's heads split over the keys, a tile of
  // keys at least, capped); turbo's rotated queries; host data staged for
  // steps that run unrecorded: token ids, gathered rows and their weights,
  // a view's block table (a block holds a row at least; predict() adds the
  // other sequences' of a step), each row's KvRowRef (32 bytes).
  int64_t bytes = cm::aligned(t * rounded_depth * 6);
  const int64_t rows = t * c.num_heads, splits = (context + cm::kMinSplitKeys - 1) / cm::kMinSplitKeys;
  bytes += cm::aligned(std::max(rows, std::min(rows * splits, cm::kMaxPartialRows)) * (max_hd + 2) * 4);
  const bool turbo = in_.kv_scheme.kind() == KvScheme::Kind::turbo;
  if (turbo) bytes += cm::aligned(rows * max_hd * 4) + c.num_layers * cm::aligned(max_hd * 4);  // and the signs
  const int64_t routed = t * std::max<int64_t>(1, c.num_experts_per_tok);
  bytes += cm::aligned(t * 4) + 2 * cm::aligned(routed * 4) + cm::aligned((context + 1) * 8) + cm::aligned(t * 32);
  return bytes;
}

int64_t MemoryContract::kv_min_block_rows() const {
  const ModelConfig& c = in_.config;
  const DType plain = in_.dtype == ComputeDType::f32 ? DType::f32 : DType::bf16;
  const int64_t block_bytes = kv_block_bytes(c, plain);
  int64_t fewest = 0;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (c.layer_types[i] == LayerKind::linear_attention) continue;
    const int64_t rows = LayerCodec{}.format(c.kv_heads_of(i), c.head_dim_of(i), plain, block_bytes).block_rows;
    fewest = fewest == 0 ? rows : std::min(fewest, rows);
  }
  return std::max<int64_t>(1, fewest);
}

int64_t MemoryContract::runtime_bytes() const {
  if (in_.device == Device::cuda) {
    namespace cm = cuda_memory;
    // What the CUDA backend and the KV pool keep whatever the work: cuBLAS's
    // workspace; the pool's last slab, partly used; and the step arena. A
    // recorded step (decode, ≤ kReplayableStepRows rows) takes its tensors and staged host
    // data (ids, RoPE rows; per layer, its KV write's and its attention's
    // block tables, one per sequence up to the model's longest context, and
    // a 32-byte ref per row) from a chunk sized for the last step with a
    // quarter to spare; a step that overflows it takes a second chunk, and a
    // chunk an earlier step's tensor still holds stays: three chunks at most.
    const ModelConfig& c = in_.config;
    const int64_t rows = Model::kReplayableStepRows, longest = std::max<int64_t>(1, c.max_position_embeddings);
    int64_t max_hd = 1;
    for (int64_t i = 0; i < c.num_layers; ++i) max_hd = std::max(max_hd, c.head_dim_of(i));
    const int64_t step = transient_parts(rows, 1).first;
    const int64_t stage =
        2 * rows * c.num_layers * ((longest / kv_min_block_rows() + 2) * 8 + 32) + rows * (4 + 4 * max_hd * 4);
    const int64_t chunk = cm::aligned(std::max(cm::kArenaTensorBytes, step + step / 4)) +
                          cm::aligned(std::max(cm::kArenaStageBytes, stage + stage / 4));
    return cm::kCublasWorkspaceBytes + kKvSlabBytes + 3 * chunk;
  }
  // The binary, its libraries, the thread pool and the allocator's arenas:
  // `fathom bench` on the tiny parity fixtures (16 + 4 tokens, 1-2 threads)
  // peaks 11.3-11.6 MiB above what the other terms predict (a CUDA build,
  // run on the CPU). Rounded up with room for other processors' kernels
  // (bench/RESULTS.md, "Memory contract"; tests/cli: fit bounds bench's peak).
  return int64_t(13) << 20;
}

void MemoryContract::set_speculation(int64_t draft_tokens, std::shared_ptr<const MemoryContract> draft) {
  check(draft_tokens >= 0, "memory contract: ", draft_tokens, " draft tokens");
  check(!draft || draft->config().vocab_size == in_.config.vocab_size, "memory contract: the draft model's vocabulary");
  draft_tokens_ = draft_tokens;
  draft_ = std::move(draft);
}

int64_t MemoryContract::speculation_fixed_bytes() const { return draft_ ? draft_->weights_bytes() : 0; }

int64_t MemoryContract::recurrent_state_bytes(int64_t step_rows) const {
  const ModelConfig& c = in_.config;
  if (!c.linear_attention) return 0;
  const auto& la = *c.linear_attention;
  const int64_t matrix = la.num_value_heads * la.key_head_dim * la.value_head_dim * 4;
  const int64_t window = la.conv_dim() * (la.conv_kernel - 1) * 4;
  int64_t per_layer = matrix + window;
  // An open speculative step keeps the matrix after each of its positions but
  // the last, the conv window it started from and its positions' conv inputs
  // (RecurrentState::begin_step).
  if (step_rows > 0) per_layer += (step_rows - 1) * matrix + window + step_rows * la.conv_dim() * 4;
  const int64_t layers = std::count(c.layer_types.begin(), c.layer_types.end(), LayerKind::linear_attention);
  return layers * per_layer;
}

int64_t MemoryContract::speculation_sequence_bytes(int64_t tokens, int64_t chunk) const {
  if (draft_tokens_ == 0) return 0;
  const int64_t rows = draft_tokens_ + 1, vocab = in_.config.vocab_size;
  // The verify step returns every row's logits (and the model holds its
  // own); each draft keeps the distribution it was drawn from, and a
  // rejection builds the residual and a dense copy of q: 12 bytes a
  // candidate (id and probability), 8 per vocabulary entry.
  const int64_t verify = transient_bytes(rows, tokens) + 2 * (rows - 1) * vocab * 4 + (rows + 1) * vocab * 12 +
                         vocab * 8;
  // The verify step, the draft's steps and the prefill chunks run one at a
  // time: the largest of their working memories is what the sequence needs.
  int64_t largest_step = verify, bytes = recurrent_state_bytes(rows) - recurrent_state_bytes();
  if (draft_) {
    // The draft model follows the sequence plus its drafts, fed in chunks of
    // at most ModelDrafter's, then one token a step. It runs on its own
    // backend, whose scratch (grown for its largest step) stays beside the
    // target's: that part is billed on top.
    const int64_t draft_len = tokens + draft_tokens_;
    const int64_t draft_chunk = std::min<int64_t>(kDraftChunkTokens, draft_len);
    bytes += draft_->kv_bytes(draft_len, draft_chunk) + draft_->backend_scratch_bytes(draft_chunk, draft_len);
    largest_step = std::max(largest_step, draft_->transient_bytes(draft_chunk, draft_len));
  }
  return bytes + std::max<int64_t>(0, largest_step - transient_bytes(chunk, tokens));
}

MemoryBreakdown MemoryContract::predict(int64_t context, int64_t sequences, int64_t chunk) const {
  check(context > 0, "memory contract: context must be positive, got ", context);
  check(sequences > 0, "memory contract: sequences must be positive, got ", sequences);
  check(chunk > 0, "memory contract: prefill chunk must be positive, got ", chunk);
  MemoryBreakdown b;
  b.context = context;
  b.sequences = sequences;
  b.prefill_chunk = chunk;
  b.weights = weights_bytes();
  b.kv = sequences * kv_bytes(context, chunk);
  b.transient = transient_bytes(std::min(chunk, context), context);
  // A step of every sequence stages all their block tables together on a
  // GPU (transient_bytes holds one; admission bills one per sequence).
  if (in_.device == Device::cuda) b.transient += (sequences - 1) * (context + 1) * 8;
  b.runtime = runtime_bytes();
  b.speculation = speculation_fixed_bytes() + sequences * speculation_sequence_bytes(context, chunk);
  return b;
}

}  // namespace fathom
