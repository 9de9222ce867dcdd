#pragma once
// Options shared by the model-running subcommands, and their parsing.
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/prefill_policy.h"
#include "model/model.h"

namespace fathom::cli {

struct ModelOptions {
  std::string model_dir;
  std::string dtype = "auto";  // auto: bf16 for bf16/f16 checkpoints, else f32
  std::string device = "cpu";  // cpu, cuda or cuda:N
  int threads = 0;             // 0: every hardware thread
  int64_t prefill_chunk = 0;    // 0: the memory budget's policy picks; N > 0 forces N
  std::string memory_budget;    // --memory-budget SIZE; empty: a fraction of MemAvailable
  // KV-cache scheme flags.
  std::string kv_quant = "off";
  std::optional<int> kv_group_size;
  std::string quantized_kv_start;
  std::string turbo_kv;
  bool describe_kv = false;
  bool weights_in_ram = false;  // WeightResidence::ram instead of mapped

  void add_to(CLI::App& app);
  KvScheme kv_scheme() const;
  // With --describe-kv: prints the scheme's cache key and per-layer storage
  // as JSON and returns true (the command then stops).
  bool maybe_describe_kv() const;
  // --dtype, with auto resolved from config.json.
  ComputeDType compute_dtype() const;
  // --threads, with 0 resolved to every hardware thread.
  int thread_count() const;
  // --memory-budget in bytes, or the default fraction of MemAvailable.
  int64_t budget_bytes() const;
  // The memory contract of this model, dtype, KV scheme and thread count,
  // from config.json and the safetensors headers (no tensor data is read).
  MemoryContract memory_contract() const;
  // --prefill-chunk when given, else the policy over `contract` (which must
  // outlive it) for `budget` (default: budget_bytes()).
  std::unique_ptr<PrefillPolicy> prefill_policy(const MemoryContract& contract,
                                                std::optional<int64_t> budget = {}) const;
  // Sets up the thread pool and loads the model.
  std::unique_ptr<Model> load() const;
};

// The check on every --model: a path that does not exist, or is a file, is
// named as such before anything looks for files inside it (which would blame
// a missing tokenizer.json or config.json instead).
const CLI::Validator& model_folder();

// "5,17,42" → {5, 17, 42}; throws naming the bad element.
std::vector<int32_t> parse_id_list(const std::string& text, const char* flag);

}  // namespace fathom::cli
