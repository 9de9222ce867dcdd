// fathom generate --model DIR --prompt-ids 5,17,42 -n 16 [--temp 0] [--seed S]
#include <cstdio>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/speculation_options.h"
#include "core/error.h"
#include "engine/generator.h"
#include "io/generation_config.h"
#include "text/jinja/chat_template.h"
#include "text/stop_strings.h"
#include "text/tokenizer/incremental_detokenizer.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom::cli {

Command add_generate_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    std::string ids, prompt, chat;
    std::vector<std::string> stop;
    int64_t max_new_tokens = 16;
    SamplingParams sampling{.temperature = 0.0f};
    bool ignore_eos = false;
    SpeculationOptions speculation;
  };
  auto o = std::make_shared<Options>();
  o->model.add_to(app);
  app.add_option("--prompt-ids", o->ids, "comma-separated token ids");
  app.add_option("--prompt", o->prompt, "prompt text, encoded with the model's tokenizer (special tokens added)");
  app.add_option("--chat", o->chat, "a user message, rendered with the model's chat template");
  app.add_option("--stop", o->stop, "stop string (repeatable); the text ends before it");
  app.add_option("-n,--max-tokens", o->max_new_tokens, "tokens to generate")->capture_default_str();
  app.add_option("--temp,--temperature", o->sampling.temperature, "sampling temperature (0: greedy)")
      ->capture_default_str();
  app.add_option("--top-k", o->sampling.top_k, "keep the k most likely tokens (0: off)");
  app.add_option("--top-p", o->sampling.top_p, "nucleus sampling mass (1: off)");
  app.add_option("--min-p", o->sampling.min_p, "drop tokens below min_p × the top probability");
  app.add_option("--repetition-penalty", o->sampling.repetition_penalty, "penalty for repeated tokens (1: off)");
  app.add_option("--seed", o->sampling.seed, "random seed");
  app.add_flag("--ignore-eos", o->ignore_eos, "do not stop at the model's end-of-sequence ids");
  o->speculation.add_to(app);
  return [o] {
    if (o->model.maybe_describe_kv()) return 0;
    check(int(!o->ids.empty()) + int(!o->prompt.empty()) + int(!o->chat.empty()) == 1,
          "give exactly one of --prompt-ids, --prompt and --chat");
    o->sampling.validate();
    std::optional<Tokenizer> tokenizer;
    if (std::filesystem::exists(std::filesystem::path(o->model.model_dir) / "tokenizer.json"))
      tokenizer = Tokenizer::load(o->model.model_dir);
    check(tokenizer || (o->prompt.empty() && o->chat.empty() && o->stop.empty()),
          "--prompt, --chat and --stop need the model's tokenizer.json");
    GenerationRequest request;
    if (!o->ids.empty()) request.prompt = parse_id_list(o->ids, "--prompt-ids");
    if (!o->prompt.empty()) request.prompt = tokenizer->encode(o->prompt, /*add_special_tokens=*/true);
    if (!o->chat.empty()) {
      const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", o->chat}}};
      const std::string rendered = ChatTemplate::from_model_dir(o->model.model_dir)
                                       .render(messages, nullptr, /*add_generation_prompt=*/true,
                                               nlohmann::ordered_json::object());
      request.prompt = tokenizer->encode(rendered, /*add_special_tokens=*/false);
    }
    MemoryContract contract = o->model.memory_contract();
    o->speculation.add_to_contract(contract, o->model);
    const auto policy = o->model.prefill_policy(contract);
    auto model = o->model.load();
    request.max_new_tokens = o->max_new_tokens;
    request.sampling = o->sampling;
    if (!o->ignore_eos) {
      request.stop_ids = load_generation_config(o->model.model_dir).eos_token_ids;
      for (int64_t id : model->config().eos_token_ids) request.stop_ids.push_back(id);
      if (tokenizer)
        for (int32_t id : tokenizer->eos_ids()) request.stop_ids.push_back(id);
    }
    std::string text;
    std::optional<IncrementalDetokenizer> detokenizer;
    if (tokenizer) detokenizer.emplace(*tokenizer, /*skip_special_tokens=*/true);
    StopStringMatcher stops(o->stop);
    auto on_token = [&](const GeneratedToken& token) {
      if (!detokenizer) return true;
      const auto step = stops.push(detokenizer->push(token.id));
      text += step.emit;
      return !step.stopped;
    };
    const int64_t capacity = int64_t(request.prompt.size()) + std::max<int64_t>(request.max_new_tokens, 1);
    const auto drafter = o->speculation.make_drafter(*model, o->model, capacity);
    const GenerationResult result =
        generate(*model, *policy, request, on_token, o->speculation.with(drafter.get()));
    if (detokenizer) {
      const auto step = stops.push(detokenizer->flush());
      text += step.emit;
      if (!step.stopped) text += stops.flush();
    }
    nlohmann::json out = {{"ids", result.ids}, {"finish_reason", result.finish_reason}};
    if (tokenizer) out["text"] = text;
    if (drafter)
      out["spec"] = {{"drafted", result.spec.drafted},
                     {"accepted", result.spec.accepted},
                     {"target_passes", result.spec.target_passes}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  };
}

}  // namespace fathom::cli
