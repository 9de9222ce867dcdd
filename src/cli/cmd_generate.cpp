// fathom generate --model DIR --prompt-ids 5,17,42 -n 16 [--temp 0] [--seed S]
// fathom generate --model DIR --prompts-file F.jsonl [--stagger K] ...: every
// line's prompt in one continuous batch, prompt i joining at step i·K.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/speculation_options.h"
#include "core/error.h"
#include "engine/generator.h"
#include "engine/run_step.h"
#include "engine/sequence_run.h"
#include "io/generation_config.h"
#include "text/jinja/chat_template.h"
#include "text/stop_strings.h"
#include "text/tokenizer/incremental_detokenizer.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom::cli {
namespace {

// One request's text: its detokenizer and stop strings, and the line it prints.
class TextOutput {
 public:
  TextOutput(const std::optional<Tokenizer>& tokenizer, const std::vector<std::string>& stop) : stops_(stop) {
    if (tokenizer) detokenizer_.emplace(*tokenizer, /*skip_special_tokens=*/true);
  }
  // Takes a generated id; false once a stop string matched.
  bool push(int32_t id) {
    if (!detokenizer_) return true;
    const auto step = stops_.push(detokenizer_->push(id));
    text_ += step.emit;
    return !step.stopped;
  }
  nlohmann::json finish(const GenerationResult& result, bool speculation) {
    if (detokenizer_) {
      const auto step = stops_.push(detokenizer_->flush());
      text_ += step.emit;
      if (!step.stopped) text_ += stops_.flush();
    }
    nlohmann::json out = {{"ids", result.ids}, {"finish_reason", result.finish_reason}};
    if (detokenizer_) out["text"] = text_;
    if (speculation)
      out["spec"] = {{"drafted", result.spec.drafted},
                     {"accepted", result.spec.accepted},
                     {"target_passes", result.spec.target_passes}};
    return out;
  }

 private:
  std::optional<IncrementalDetokenizer> detokenizer_;
  StopStringMatcher stops_;
  std::string text_;
};

void print_line(const nlohmann::json& out) {
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// The prompts of a --prompts-file: one JSON object a line, {"ids": [...]} or {"prompt": "..."}.
std::vector<std::vector<int32_t>> read_prompts_file(const std::string& path, const std::optional<Tokenizer>& tokenizer) {
  std::ifstream in(path);
  check(bool(in), "--prompts-file: cannot read ", path);
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    check(j.is_object() && (j.contains("ids") != j.contains("prompt")), "--prompts-file ", path, " line ", number,
          ": expected {\"ids\": [...]} or {\"prompt\": \"...\"}");
    if (j.contains("ids")) {
      check(j["ids"].is_array(), "--prompts-file line ", number, ": \"ids\" is not an array");
      std::vector<int32_t> ids;
      for (const auto& v : j["ids"]) {
        check(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX,
              "--prompts-file line ", number, ": \"ids\" holds ", v.dump(), ", not a token id");
        ids.push_back(v.get<int32_t>());
      }
      prompts.push_back(std::move(ids));
    } else {
      check(j["prompt"].is_string(), "--prompts-file line ", number, ": \"prompt\" is not a string");
      check(tokenizer.has_value(), "--prompts-file line ", number, ": a \"prompt\" needs the model's tokenizer.json");
      prompts.push_back(tokenizer->encode(j["prompt"].get<std::string>(), /*add_special_tokens=*/true));
    }
  }
  check(!prompts.empty(), "--prompts-file ", path, " has no prompts");
  return prompts;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    std::string ids, prompt, chat, prompts_file;
    int64_t stagger = 0;
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
  app.add_option("--prompts-file", o->prompts_file,
                 "JSON lines, {\"ids\": [...]} or {\"prompt\": \"...\"}: all run in one continuous batch; one "
                 "output line each, in order");
  app.add_option("--stagger", o->stagger, "with --prompts-file: prompt i joins at step i·K")->capture_default_str();
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
    check(int(!o->ids.empty()) + int(!o->prompt.empty()) + int(!o->chat.empty()) + int(!o->prompts_file.empty()) == 1,
          "give exactly one of --prompt-ids, --prompt, --chat and --prompts-file");
    check(o->stagger >= 0, "--stagger must be >= 0, got ", o->stagger);
    o->sampling.validate();
    std::optional<Tokenizer> tokenizer;
    if (std::filesystem::exists(std::filesystem::path(o->model.model_dir) / "tokenizer.json"))
      tokenizer = Tokenizer::load(o->model.model_dir);
    check(tokenizer || (o->prompt.empty() && o->chat.empty() && o->stop.empty()),
          "--prompt, --chat and --stop need the model's tokenizer.json");
    std::vector<std::vector<int32_t>> prompts;
    if (!o->ids.empty()) prompts.push_back(parse_id_list(o->ids, "--prompt-ids"));
    if (!o->prompt.empty()) prompts.push_back(tokenizer->encode(o->prompt, /*add_special_tokens=*/true));
    if (!o->chat.empty()) {
      const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", o->chat}}};
      const std::string rendered = ChatTemplate::from_model_dir(o->model.model_dir)
                                       .render(messages, nullptr, /*add_generation_prompt=*/true,
                                               nlohmann::ordered_json::object());
      prompts.push_back(tokenizer->encode(rendered, /*add_special_tokens=*/false));
    }
    if (!o->prompts_file.empty()) prompts = read_prompts_file(o->prompts_file, tokenizer);
    MemoryContract contract = o->model.memory_contract();
    o->speculation.add_to_contract(contract, o->model);
    const auto policy = o->model.prefill_policy(contract);
    auto model = o->model.load();
    GenerationRequest base;
    base.max_new_tokens = o->max_new_tokens;
    base.sampling = o->sampling;
    if (!o->ignore_eos) {
      base.stop_ids = load_generation_config(o->model.model_dir).eos_token_ids;
      for (int64_t id : model->config().eos_token_ids) base.stop_ids.push_back(id);
      if (tokenizer)
        for (int32_t id : tokenizer->eos_ids()) base.stop_ids.push_back(id);
    }
    int64_t longest = 0;
    for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
    const auto drafter = o->speculation.make_drafter(*model, o->model, longest + std::max<int64_t>(o->max_new_tokens, 1));

    // Every prompt is a run; all share each step (one prompt is a batch of one).
    std::vector<TextOutput> outputs;
    std::vector<std::unique_ptr<Drafter>> drafters;
    std::vector<std::unique_ptr<SequenceRun>> runs;
    outputs.reserve(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerationRequest request = base;
      request.prompt = prompts[i];
      outputs.emplace_back(tokenizer, o->stop);
      Speculation speculation = o->speculation.with(nullptr);
      if (drafter) {
        drafters.push_back(drafter->fork());
        speculation.drafter = drafters.back().get();
      }
      TextOutput& text = outputs.back();
      runs.push_back(std::make_unique<SequenceRun>(
          *model, *policy, std::move(request), [&text](const GeneratedToken& t) { return text.push(t.id); },
          speculation));
    }
    std::vector<SequenceRun*> joined;
    for (int64_t step = 0;; ++step) {
      while (joined.size() < runs.size() && int64_t(joined.size()) * o->stagger <= step)
        joined.push_back(runs[joined.size()].get());
      if (!run_step(*model, joined, step_tokens(*model)) && joined.size() == runs.size()) break;
    }
    if (runs.size() == 1 && !runs[0]->error().empty()) fail(runs[0]->error());
    bool failed = false;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!runs[i]->error().empty()) {  // the others' lines still print
        failed = true;
        std::fprintf(stderr, "generate: prompt %zu: %s\n", i + 1, runs[i]->error().c_str());
        print_line({{"error", runs[i]->error()}});
        continue;
      }
      print_line(outputs[i].finish(runs[i]->result(), drafter != nullptr));
    }
    return failed ? 1 : 0;
  };
}

}  // namespace fathom::cli
