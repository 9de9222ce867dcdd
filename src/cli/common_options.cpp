#include "cli/common_options.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "backend/backend.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "engine/memory_budget.h"
#include "core/thread_pool.h"
#include "io/model_config.h"

namespace fathom::cli {

const CLI::Validator& model_folder() {
  static const CLI::Validator check(
      [](std::string& path) -> std::string {
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) return "model folder " + path + " not found (no such folder)";
        if (!std::filesystem::is_directory(path, ec)) return path + " is a file, not a model folder";
        return {};
      },
      "DIR");
  return check;
}

void ModelOptions::add_to(CLI::App& app) {
  app.add_option("--model", model_dir, "Hugging Face model folder")->required()->check(model_folder());
  app.add_option("--dtype", dtype, "compute dtype: auto, f32 or bf16")->capture_default_str();
  app.add_option("--device", device, "where the model runs: cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--threads", threads, "worker threads (0: all cores)")->capture_default_str();
  app.add_option("--prefill-chunk", prefill_chunk,
                 "tokens per prefill chunk (default: the largest up to 512 that the memory budget allows)");
  app.add_option("--memory-budget", memory_budget,
                 "memory the model may use, e.g. 12GiB, 800MB, 1.5GB (default: 90% of MemAvailable; with "
                 "--device cuda, of the GPU's free memory)");
  app.add_option("--kv-quant", kv_quant, "KV cache: off, 2, 3, 4, 6, 8 (affine bits) or config (kv_config.json)")
      ->capture_default_str();
  app.add_option("--kv-group-size", kv_group_size, "affine KV group size along head_dim: 32, 64 or 128 (default 64)");
  app.add_option("--quantized-kv-start", quantized_kv_start,
                 "keep the first N tokens in bf16 (default 5000 for --kv-quant N, 0 for config and turbo)");
  app.add_option("--turbo-kv", turbo_kv, "TurboQuant KV bits for keys and values, e.g. 3,4");
  app.add_flag("--describe-kv", describe_kv, "print the KV scheme's cache key and per-layer storage, then stop");
  app.add_flag("--weights-in-ram", weights_in_ram,
               "copy the weights into private memory on 2 MiB pages instead of mapping the files: faster decode, "
               "slower load, and the memory is not shared with other processes or the page cache");
}

KvScheme ModelOptions::kv_scheme() const {
  return KvScheme::from_flags(kv_quant, kv_group_size, quantized_kv_start, turbo_kv, model_dir);
}

bool ModelOptions::maybe_describe_kv() const {
  if (!describe_kv) return false;
  const ModelConfig config = load_model_config(model_dir);
  const KvScheme scheme = kv_scheme();
  nlohmann::json out = scheme.describe(config);
  const int64_t tokens = std::min<int64_t>(config.max_position_embeddings, 4096);
  // Plain rows are stored in the compute dtype: f32 compute keeps f32 KV.
  const int64_t plain_bytes = compute_dtype() == ComputeDType::f32 ? 4 : 2;
  out["bytes_at"] = {{"tokens", tokens}, {"bytes", scheme.bytes_at(config, tokens, plain_bytes)},
                     {"plain_dtype", plain_bytes == 4 ? "f32" : "bf16"}};
  std::printf("%s\n", out.dump(2).c_str());
  return true;
}

ComputeDType ModelOptions::compute_dtype() const {
  if (dtype != "auto") return parse_compute_dtype(dtype);
  const ModelConfig config = load_model_config(model_dir);
  const bool half = config.weights_dtype == "bfloat16" || config.weights_dtype == "float16";
  return half ? ComputeDType::bf16 : ComputeDType::f32;
}

int ModelOptions::thread_count() const {
  check(threads >= 0, "--threads must be >= 0, got ", threads);
  return threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
}

int64_t ModelOptions::budget_bytes() const {
  return memory_budget.empty() ? default_memory_budget(device) : parse_byte_size(memory_budget, "--memory-budget");
}

MemoryContract ModelOptions::memory_contract() const {
  return MemoryContract::for_model_dir(model_dir, compute_dtype(), kv_scheme(), thread_count(),
                                       weights_in_ram ? WeightResidence::ram : WeightResidence::mapped,
                                       parse_device(device).kind);
}

std::unique_ptr<PrefillPolicy> ModelOptions::prefill_policy(const MemoryContract& contract,
                                                           std::optional<int64_t> budget) const {
  check(prefill_chunk >= 0, "--prefill-chunk must be positive, got ", prefill_chunk);
  if (prefill_chunk > 0) return std::make_unique<FixedPrefillPolicy>(prefill_chunk);
  return std::make_unique<BudgetPrefillPolicy>(contract, budget.value_or(budget_bytes()));
}

std::unique_ptr<Model> ModelOptions::load() const {
  check(prefill_chunk >= 0, "--prefill-chunk must be positive, got ", prefill_chunk);
  ThreadPool::set_global_threads(thread_count());
  LoadOptions options;
  options.kv_scheme = kv_scheme();
  options.weight_residence = weights_in_ram ? WeightResidence::ram : WeightResidence::mapped;
  options.dtype = compute_dtype();
  options.device = device;
  return load_model(model_dir, options);
}

std::vector<int32_t> parse_id_list(const std::string& text, const char* flag) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  check(!text.empty(), flag, ": empty id list");
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string part = text.substr(pos, end - pos);
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(used == part.size() && used > 0 && value >= INT32_MIN && value <= INT32_MAX, flag,
          ": \"", part, "\" is not a token id");
    ids.push_back(int32_t(value));
    pos = end + 1;
  }
  return ids;
}

}  // namespace fathom::cli
