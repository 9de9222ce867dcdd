#include "cli/speculation_options.h"

#include "core/error.h"

namespace fathom::cli {

void SpeculationOptions::add_to(CLI::App& app) {
  app.add_option("--spec", spec, "speculative decoding: off, ngram (prompt lookup) or draft (needs --draft-model)")
      ->capture_default_str();
  app.add_option("--draft-model", draft_model, "a draft model folder with the target's vocabulary (implies --spec draft)");
  app.add_option("--draft-tokens", draft_tokens, "most tokens drafted per target step")->capture_default_str();
}

std::unique_ptr<Drafter> SpeculationOptions::make_drafter(const Model& target, const ModelOptions& target_options,
                                                         int64_t capacity) {
  check(spec == "off" || spec == "ngram" || spec == "draft", "--spec: unknown mode \"", spec,
        "\" (off, ngram, draft)");
  check(draft_tokens >= 1 && draft_tokens <= 64, "--draft-tokens must be in 1..64, got ", draft_tokens);
  check(spec != "draft" || !draft_model.empty(), "--spec draft needs --draft-model DIR");
  check(spec != "ngram" || draft_model.empty(), "--spec ngram and --draft-model exclude each other");
  if (!enabled()) return nullptr;
  if (spec == "ngram") return std::make_unique<NgramDrafter>();
  ModelOptions draft_options = target_options;
  draft_options.model_dir = draft_model;
  draft_options.kv_quant = "off";
  draft_options.turbo_kv.clear();
  draft_options.quantized_kv_start.clear();
  draft_options.kv_group_size.reset();
  if (draft_options.dtype == "auto") draft_options.dtype = compute_dtype_name(target.compute_dtype());
  draft_ = draft_options.load();
  check(draft_->config().vocab_size == target.config().vocab_size, "--draft-model: vocabulary of ",
        draft_->config().vocab_size, " tokens, the target has ", target.config().vocab_size);
  return std::make_unique<ModelDrafter>(*draft_, capacity + draft_tokens);
}

}  // namespace fathom::cli
