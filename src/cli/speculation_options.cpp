#include "cli/speculation_options.h"

#include "core/error.h"

namespace fathom::cli {

void SpeculationOptions::add_to(CLI::App& app) {
  app.add_option("--spec", spec, "speculative decoding: off, ngram (prompt lookup) or draft (needs --draft-model)")
      ->capture_default_str();
  app.add_option("--draft-model", draft_model, "a draft model folder with the target's vocabulary (implies --spec draft)");
  app.add_option("--draft-tokens", draft_tokens, "most tokens drafted per target step")->capture_default_str();
  app.add_option("--draft-length", draft_length,
                 "adaptive: draft fewer tokens while recent acceptance is low; fixed: always --draft-tokens")
      ->capture_default_str();
}

void SpeculationOptions::validate() const {
  check(spec == "off" || spec == "ngram" || spec == "draft", "--spec: unknown mode \"", spec,
        "\" (off, ngram, draft)");
  check(draft_tokens >= 1 && draft_tokens <= 64, "--draft-tokens must be in 1..64, got ", draft_tokens);
  check(draft_length == "adaptive" || draft_length == "fixed", "--draft-length: unknown policy \"", draft_length,
        "\" (adaptive, fixed)");
  check(spec != "draft" || !draft_model.empty(), "--spec draft needs --draft-model DIR");
  check(spec != "ngram" || draft_model.empty(), "--spec ngram and --draft-model exclude each other");
}

ModelOptions SpeculationOptions::draft_options(const ModelOptions& target) const {
  // The target's dtype and threads; plain KV (the draft's cache is small).
  ModelOptions o = target;
  o.model_dir = draft_model;
  o.kv_quant = "off";
  o.turbo_kv.clear();
  o.quantized_kv_start.clear();
  o.kv_group_size.reset();
  o.dtype = compute_dtype_name(target.compute_dtype());
  return o;
}

void SpeculationOptions::add_to_contract(MemoryContract& contract, const ModelOptions& target) const {
  validate();
  if (!enabled()) return;
  std::shared_ptr<const MemoryContract> draft;
  if (!draft_model.empty()) draft = std::make_shared<MemoryContract>(draft_options(target).memory_contract());
  contract.set_speculation(draft_tokens, std::move(draft));
}

std::unique_ptr<Drafter> SpeculationOptions::make_drafter(const Model& target, const ModelOptions& target_options,
                                                         int64_t capacity) {
  validate();
  if (!enabled()) return nullptr;
  if (spec == "ngram") return std::make_unique<NgramDrafter>();
  draft_ = draft_options(target_options).load();
  check(draft_->config().vocab_size == target.config().vocab_size, "--draft-model: vocabulary of ",
        draft_->config().vocab_size, " tokens, the target has ", target.config().vocab_size);
  // Decoding reads every weight once a step: the byte ratio prices a draft step.
  const double relative_cost = double(draft_->weight_bytes()) / double(std::max<int64_t>(1, target.weight_bytes()));
  return std::make_unique<ModelDrafter>(*draft_, capacity + draft_tokens, relative_cost);
}

}  // namespace fathom::cli
