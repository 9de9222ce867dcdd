// fathom fit --model DIR [--ctx N] [--sequences S] [--memory-budget SIZE] [--json] ...
// Whether a model, a context, a KV scheme and a number of sequences fit in
// memory (with --device cuda, the GPU's), from config.json and the
// safetensors headers alone; the longest context and the most sequences that
// do, and where every byte goes.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/speculation_options.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "engine/memory_budget.h"

namespace fathom::cli {
namespace {

void print_table(const FitAnswer& a, const MemoryContract& contract, const std::string& device,
                 const std::string& budget_source) {
  const MemoryBreakdown& b = a.breakdown;
  auto row = [](const char* what, int64_t bytes, const std::string& note) {
    std::printf("  %-10s %14lld  %10s  %s\n", what, (long long)bytes, format_bytes(bytes).c_str(), note.c_str());
  };
  std::printf("%s on %s, %s compute, KV %s, %lld sequence%s of %lld tokens, prefill chunk %lld\n",
              contract.config().model_type.c_str(), device.c_str(), compute_dtype_name(contract.dtype()),
              contract.kv_scheme().cache_key().c_str(), (long long)b.sequences, b.sequences == 1 ? "" : "s",
              (long long)b.context, (long long)b.prefill_chunk);
  std::printf("  %-10s %14s  %10s\n", "term", "bytes", "");
  row("weights", b.weights, "as loaded: stored tensors plus f32 norms/routers and dtype conversions");
  row("kv", b.kv, "KV and recurrent state of every sequence at its peak");
  row("transient", b.transient, "one step: activations, logits, attention tiles");
  row("runtime", b.runtime,
      contract.device() == Device::cuda ? "the CUDA backend's own: cuBLAS workspace, step arena, a KV slab"
                                        : "the process itself (measured once)");
  if (contract.draft_tokens() > 0)
    row("spec", b.speculation, "speculative decoding: draft model, recurrent step states, verify rows, draft cache");
  row("total", b.total(), "");
  row("budget", a.budget, budget_source);
  std::printf("%s: %s\n", a.fits ? "fits" : "does not fit",
              a.fits ? ("headroom " + format_bytes(a.budget - b.total())).c_str()
                     : ("short by " + format_bytes(b.total() - a.budget)).c_str());
  std::printf("longest context that fits for %lld sequence%s: %lld tokens (model maximum %lld)\n",
              (long long)b.sequences, b.sequences == 1 ? "" : "s", (long long)a.max_context,
              (long long)contract.config().max_position_embeddings);
  std::printf("most sequences of %lld tokens that fit: %lld\n", (long long)b.context, (long long)a.max_sequences);
}

}  // namespace

Command add_fit_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    SpeculationOptions speculation;
    int64_t ctx = 0;
    int64_t sequences = 1;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  o->model.add_to(app);
  o->speculation.add_to(app);
  app.add_option("--ctx", o->ctx, "tokens per sequence (default: the model's max_position_embeddings)");
  app.add_option("--sequences", o->sequences, "sequences held at once")->capture_default_str();
  app.add_flag("--json", o->json, "print one JSON object instead of the table");
  return [o] {
    if (o->model.maybe_describe_kv()) return 0;
    check(o->sequences > 0, "--sequences must be positive, got ", o->sequences);
    check(o->ctx >= 0, "--ctx must be positive, got ", o->ctx);
    MemoryContract contract = o->model.memory_contract();
    o->speculation.add_to_contract(contract, o->model);
    const int64_t limit = contract.config().max_position_embeddings;
    const int64_t ctx = o->ctx > 0 ? o->ctx : limit;
    check(ctx <= limit, "--ctx ", ctx, " is longer than the model's max_position_embeddings (", limit, ")");
    check(o->model.prefill_chunk >= 0, "--prefill-chunk must be positive, got ", o->model.prefill_chunk);
    const int64_t budget = o->model.budget_bytes();
    const std::string budget_source =
        o->model.memory_budget.empty()
            ? "default: " + default_budget_source(o->model.device)
            : "--memory-budget " + o->model.memory_budget;
    const FitAnswer a = fit_memory(contract, ctx, o->sequences, budget, o->model.prefill_chunk);
    if (!o->json) {
      print_table(a, contract, o->model.device, budget_source);
      return 0;
    }
    const MemoryBreakdown& b = a.breakdown;
    nlohmann::json out = {
        {"model", o->model.model_dir},
        {"model_type", contract.config().model_type},
        {"device", o->model.device},
        {"dtype", compute_dtype_name(contract.dtype())},
        {"threads", o->model.thread_count()},
        {"ctx", b.context},
        {"sequences", b.sequences},
        {"weights_bytes", b.weights},
        {"kv_bytes", b.kv},
        {"transient_bytes", b.transient},
        {"runtime_bytes", b.runtime},
        {"speculation_bytes", b.speculation},
        {"total_bytes", b.total()},
        {"budget_bytes", a.budget},
        {"budget_source", budget_source},
        {"fits", a.fits},
        {"max_context", a.max_context},
        {"max_sequences", a.max_sequences},
        {"prefill_chunk", b.prefill_chunk},
        {"kv", contract.kv_scheme().describe(contract.config())},
    };
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  };
}

}  // namespace fathom::cli
