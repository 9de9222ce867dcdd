// fathom chat --model DIR [--system TEXT] [--prompt TEXT] [sampling, KV and speculation flags]
// A chat in the terminal, as `ollama run` or `llama-cli -cnv` give: each answer
// streams as it is generated, then one line says how fast it was. /reset,
// /system TEXT, /help, /exit; Ctrl-C stops the answer being written (not the
// program); Ctrl-D quits. --prompt answers one message and exits.
//
// Every turn renders the whole conversation with the model's chat template
// and generates from a fresh sequence: the prompt is prefilled again each
// turn (fast for the models this is for; nothing is kept between turns).
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <random>
#include <nlohmann/json.hpp>

#include "cli/chat_input.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/speculation_options.h"
#include "core/error.h"
#include "engine/admission.h"
#include "engine/generator.h"
#include "engine/run_step.h"
#include "engine/sequence_run.h"
#include "io/generation_config.h"
#include "text/jinja/chat_template.h"
#include "text/tokenizer/incremental_detokenizer.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom::cli {

namespace {

struct ChatOptions {
  ModelOptions model;
  SpeculationOptions speculation;
  // The chat page's defaults: varied answers that stay on topic.
  SamplingParams sampling{.temperature = 0.7f, .top_p = 0.95f};
  std::optional<uint64_t> seed;
  std::string system, prompt;
  int64_t max_tokens = 0;  // per answer; 0: the rest of the context
  int64_t ctx_size = 0;    // 0: the model's, or less when memory allows less
  bool ignore_eos = false;
};

// Where the answer's summary goes: stderr, dimmed on a terminal, so that
// stdout carries the answers alone.
void note(const std::string& text) {
  const bool tty = ::isatty(STDERR_FILENO);
  std::fprintf(stderr, tty ? "\033[2m%s\033[0m\n" : "%s\n", text.c_str());
  std::fflush(stderr);
}

std::string fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// The conversation and what answers it.
class Chat {
 public:
  struct Engine {
    const Model& model;
    const PrefillPolicy& policy;
    const Tokenizer& tokenizer;
    const ChatTemplate& chat_template;
    std::vector<int64_t> stop_ids;
    Speculation speculation;
    int64_t context;  // tokens a conversation may reach
  };

  Chat(Engine engine, const ChatOptions& options) : e_(std::move(engine)), o_(options), system_(options.system) {
    seed_ = options.seed.value_or(std::random_device{}());
  }

  void reset() {
    turns_.clear();
    held_ = {};
  }
  void set_system(std::string text) { system_ = std::move(text); }
  const std::string& system() const { return system_; }

  // Streams the answer to `text` to stdout and keeps both in the
  // conversation. Returns false when Ctrl-C stopped it. A conversation that
  // no longer fits the context is an error, and the message is not kept.
  bool answer(const std::string& text) {
    turns_.push_back({"user", text});
    std::vector<int32_t> prompt;
    try {
      prompt = encode();
      const int64_t n = int64_t(prompt.size());
      check(n < e_.context, "the conversation is ", n, " tokens and the context holds ", e_.context,
            ": /reset starts a new one");
    } catch (...) {
      turns_.pop_back();
      throw;
    }
    GenerationRequest request;
    request.prompt = prompt;
    const int64_t room = e_.context - int64_t(prompt.size());
    request.max_new_tokens = o_.max_tokens > 0 ? std::min(o_.max_tokens, room) : room;
    request.sampling = o_.sampling;
    request.sampling.seed = seed_ + answers_++;  // --seed reproduces the whole session
    request.stop_ids = e_.stop_ids;
    request.capacity = e_.context;

    IncrementalDetokenizer detokenizer(e_.tokenizer, /*skip_special_tokens=*/true);
    std::string reply;
    bool interrupted = false;
    auto show = [&reply](const std::string& piece) {
      reply += piece;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
    Interrupts::clear();
    GenerationResult result;
    int64_t reused = 0;
    try {
      // The last turn's cache: only what the template rendered differently is prefilled again.
      SequenceRun run(
          e_.model, e_.policy, request,
          [&](const GeneratedToken& token) {
            if (Interrupts::pending()) {
              interrupted = true;
              return false;
            }
            show(detokenizer.push(token.id));
            return true;
          },
          e_.speculation, &held_);
      SequenceRun* const runs[] = {&run};
      while (!run.finished()) run_step(e_.model, runs, step_tokens(e_.model));
      if (!run.error().empty()) fail(run.error());
      result = run.result();
      reused = run.reused_tokens();
    } catch (...) {
      turns_.pop_back();  // a failed answer leaves the conversation as it was
      std::fputs("\n", stdout);
      throw;
    }
    if (!interrupted) show(detokenizer.flush());
    Interrupts::clear();
    std::fputs("\n", stdout);
    std::fflush(stdout);
    turns_.push_back({"assistant", reply});
    note(summary(result, int64_t(prompt.size()), reused, interrupted));
    return !interrupted;
  }

 private:
  std::vector<int32_t> encode() const {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!system_.empty()) messages.push_back({{"role", "system"}, {"content", system_}});
    for (const auto& [role, content] : turns_) messages.push_back({{"role", role}, {"content", content}});
    const std::string rendered = e_.chat_template.render(messages, nullptr, /*add_generation_prompt=*/true,
                                                         nlohmann::ordered_json::object());
    return e_.tokenizer.encode(rendered, /*add_special_tokens=*/false);
  }

  // "42 tokens, 612.3 tok/s · prompt 85 tokens in 0.02 s · context 127/2048 · stopped"
  std::string summary(const GenerationResult& r, int64_t prompt_tokens, int64_t reused, bool interrupted) const {
    const int64_t tokens = int64_t(r.ids.size());
    std::string s = std::to_string(tokens) + (tokens == 1 ? " token" : " tokens");
    // The first token comes out of the prefill; decode time covers the rest.
    if (tokens > 1 && r.decode_seconds > 0) s += ", " + fixed1(double(tokens - 1) / r.decode_seconds) + " tok/s";
    s += " · prompt " + std::to_string(prompt_tokens) + " tokens in " + fixed1(r.prefill_seconds * 1000) + " ms";
    s += " · context " + std::to_string(prompt_tokens + tokens) + "/" + std::to_string(e_.context);
    if (e_.speculation.drafter && r.spec.drafted > 0)
      s += " · drafts kept " + std::to_string(r.spec.accepted) + "/" + std::to_string(r.spec.drafted);
    if (reused > 0) s += " · reused " + std::to_string(reused) + " prompt tokens";
    if (interrupted) s += " · stopped";
    else if (r.finish_reason == "length") s += " · cut at the length limit";
    return s;
  }

  Engine e_;
  const ChatOptions& o_;
  std::string system_;
  std::vector<std::pair<std::string, std::string>> turns_;  // (role, content)
  HeldSequence held_;  // the last answer's sequence, reused by the next turn
  uint64_t seed_ = 0;
  uint64_t answers_ = 0;
};

const char* kHelp =
    "Enter sends. End a line with \\ to go on writing, or wrap lines in \"\"\" ... \"\"\".\n"
    "  /reset         start a new conversation (the system prompt stays)\n"
    "  /system TEXT   set the system prompt (/system alone shows it)\n"
    "  /help          this list\n"
    "  /exit          quit (or Ctrl-D)\n"
    "Ctrl-C stops the answer being written.";

// Runs one slash command; false when it asks to quit.
bool run_command(Chat& chat, const std::string& line) {
  const size_t space = line.find(' ');
  const std::string name = line.substr(0, space);
  std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
  arg.erase(0, arg.find_first_not_of(" \t"));
  if (name == "/exit" || name == "/quit" || name == "/bye") return false;
  if (name == "/reset") {
    chat.reset();
    note("(new conversation)");
  } else if (name == "/system") {
    if (arg.empty()) {
      note(chat.system().empty() ? "(no system prompt)" : "system prompt: " + chat.system());
    } else {
      chat.set_system(arg);
      note("(system prompt set; it applies from the next answer)");
    }
  } else if (name == "/help" || name == "/?") {
    note(kHelp);
  } else {
    note("unknown command " + name + " (/help lists them)");
  }
  return true;
}

int interactive_loop(Chat& chat) {
  const bool tty = ::isatty(STDIN_FILENO);
  ChatInput input(STDIN_FILENO, tty);
  for (;;) {
    const ChatInput::Turn turn = input.next();
    if (turn.status == ChatInput::Status::end) {
      if (tty) std::fputs("\n", stdout);
      return 0;
    }
    if (turn.status == ChatInput::Status::interrupted) {
      std::fputs("\n", stdout);
      note("(Ctrl-C stops an answer; Ctrl-D or /exit quits)");
      continue;
    }
    const std::string& text = turn.text;
    if (text.find_first_not_of(" \t\n") == std::string::npos) continue;
    if (text[0] == '/' && text.find('\n') == std::string::npos) {
      if (!run_command(chat, text)) return 0;
      continue;
    }
    try {
      chat.answer(text);
    } catch (const std::exception& e) {
      // One failed answer does not end the session.
      std::fprintf(stderr, "error: %s\n", e.what());
    }
  }
}

}  // namespace

Command add_chat_command(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  o->model.add_to(app);
  app.add_option("--system", o->system, "system prompt");
  app.add_option("--prompt", o->prompt, "answer this one message, then exit (no interactive chat)");
  app.add_option("-n,--max-tokens", o->max_tokens, "most tokens per answer (0: the rest of the context)")
      ->capture_default_str();
  app.add_option("--ctx-size", o->ctx_size, "tokens a conversation may reach (0: the model's, or what memory allows)")
      ->capture_default_str();
  app.add_option("--temp,--temperature", o->sampling.temperature, "sampling temperature (0: greedy)")
      ->capture_default_str();
  app.add_option("--top-k", o->sampling.top_k, "keep the k most likely tokens (0: off)");
  app.add_option("--top-p", o->sampling.top_p, "nucleus sampling mass (1: off)")->capture_default_str();
  app.add_option("--min-p", o->sampling.min_p, "drop tokens below min_p × the top probability");
  app.add_option("--repetition-penalty", o->sampling.repetition_penalty, "penalty for repeated tokens (1: off)");
  app.add_option("--seed", o->seed, "random seed (default: a new one each run)");
  app.add_flag("--ignore-eos", o->ignore_eos, "do not stop at the model's end-of-sequence ids (answers run to -n)");
  o->speculation.add_to(app);
  return [o] {
    if (o->model.maybe_describe_kv()) return 0;
    o->sampling.validate();
    check(o->max_tokens >= 0, "--max-tokens must be >= 0, got ", o->max_tokens);
    check(o->ctx_size >= 0, "--ctx-size must be >= 0, got ", o->ctx_size);
    const std::string& dir = o->model.model_dir;
    Tokenizer tokenizer = Tokenizer::load(dir);
    ChatTemplate chat_template = ChatTemplate::from_model_dir(dir);

    // The context: --ctx-size or the model's, and no more than the memory
    // budget holds beside the model (the contract, as the server admits).
    MemoryContract contract = o->model.memory_contract();
    o->speculation.add_to_contract(contract, o->model);
    const auto policy = o->model.prefill_policy(contract);
    const int64_t budget = o->model.budget_bytes();
    const int64_t fixed = contract.weights_bytes() + contract.speculation_fixed_bytes() + contract.runtime_bytes();
    check(fixed < budget, "chat: the weights (", fixed, " bytes with the runtime) do not fit the memory budget of ",
          budget, " bytes");
    const int64_t window = contract.config().max_position_embeddings;
    check(o->ctx_size <= window, "--ctx-size ", o->ctx_size, " is beyond the model's ", window, " positions");
    MemoryAdmission admission(contract, *policy, budget, fixed);
    const int64_t context = admission.longest_sequence(o->ctx_size > 0 ? o->ctx_size : window);
    check(context > 1, "chat: the memory budget of ", budget, " bytes leaves no room for a conversation");

    auto model = o->model.load();
    std::vector<int64_t> stop_ids;
    if (!o->ignore_eos) {
      stop_ids = load_generation_config(dir).eos_token_ids;
      for (int64_t id : model->config().eos_token_ids) stop_ids.push_back(id);
      for (int32_t id : tokenizer.eos_ids()) stop_ids.push_back(id);
    }
    const auto drafter = o->speculation.make_drafter(*model, o->model, context);
    Chat chat({*model, *policy, tokenizer, chat_template, stop_ids, o->speculation.with(drafter.get()), context}, *o);

    Interrupts::install();
    if (!o->prompt.empty()) return chat.answer(o->prompt) ? 0 : 130;
    if (::isatty(STDIN_FILENO))
      note("fathom chat: " + dir + " (" + model->config().model_type + ", " +
           compute_dtype_name(model->compute_dtype()) + " on " + model->backend_name() + "), context " +
           std::to_string(context) + " tokens, KV " + model->kv_scheme().cache_key() + "\n" + kHelp);
    return interactive_loop(chat);
  };
}

}  // namespace fathom::cli
