// fathom generate --model DIR --prompt-ids 5,17,42 -n 16 [--temp 0] [--seed S]
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "core/error.h"
#include "engine/generator.h"
#include "io/generation_config.h"

namespace fathom::cli {

Command add_generate_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    std::string ids;
    int64_t max_new_tokens = 16;
    SamplingParams sampling{.temperature = 0.0f};
    bool ignore_eos = false;
  };
  auto o = std::make_shared<Options>();
  o->model.add_to(app);
  app.add_option("--prompt-ids", o->ids, "comma-separated token ids");
  app.add_option("-n,--max-tokens", o->max_new_tokens, "tokens to generate")->capture_default_str();
  app.add_option("--temp,--temperature", o->sampling.temperature, "sampling temperature (0: greedy)")
      ->capture_default_str();
  app.add_option("--top-k", o->sampling.top_k, "keep the k most likely tokens (0: off)");
  app.add_option("--top-p", o->sampling.top_p, "nucleus sampling mass (1: off)");
  app.add_option("--min-p", o->sampling.min_p, "drop tokens below min_p × the top probability");
  app.add_option("--repetition-penalty", o->sampling.repetition_penalty, "penalty for repeated tokens (1: off)");
  app.add_option("--seed", o->sampling.seed, "random seed");
  app.add_flag("--ignore-eos", o->ignore_eos, "do not stop at the model's end-of-sequence ids");
  return [o] {
    if (o->model.maybe_describe_kv()) return 0;
    check(!o->ids.empty(), "--prompt-ids is required");
    o->sampling.validate();
    const std::vector<int32_t> ids = parse_id_list(o->ids, "--prompt-ids");
    auto model = o->model.load();
    GenerationRequest request;
    request.prompt = ids;
    request.max_new_tokens = o->max_new_tokens;
    request.sampling = o->sampling;
    if (!o->ignore_eos) {
      request.stop_ids = load_generation_config(o->model.model_dir).eos_token_ids;
      for (int64_t id : model->config().eos_token_ids) request.stop_ids.push_back(id);
    }
    const GenerationResult result = generate(*model, o->model.prefill_policy(), request);
    nlohmann::json out = {{"ids", result.ids}, {"finish_reason", result.finish_reason}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  };
}

}  // namespace fathom::cli
