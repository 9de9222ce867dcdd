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
  int threads = 0;             // 0: every hardware thread
  int64_t prefill_chunk = FixedPrefillPolicy::kDefaultChunk;
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
  // Sets up the thread pool and loads the model.
  std::unique_ptr<Model> load() const;
  FixedPrefillPolicy prefill_policy() const { return FixedPrefillPolicy(prefill_chunk); }
};

// "5,17,42" → {5, 17, 42}; throws naming the bad element.
std::vector<int32_t> parse_id_list(const std::string& text, const char* flag);

}  // namespace fathom::cli
