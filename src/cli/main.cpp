// The fathom binary. Every error reaches the user as one line on stderr and a
// non-zero exit code.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"fathom: LLM inference engine"};
  app.require_subcommand(1);
  std::map<CLI::App*, fathom::cli::Command> commands;
  auto add = [&](const char* name, const char* help, fathom::cli::Command (*make)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands[sub] = make(*sub);
  };
  add("serve", "serve the model over HTTP (OpenAI and Anthropic APIs)", fathom::cli::add_serve_command);
  add("chat", "chat with the model in the terminal (streamed answers; /reset, /system; Ctrl-C stops an answer)",
      fathom::cli::add_chat_command);
  add("logits", "write the logits after every prompt position to a .npy file", fathom::cli::add_logits_command);
  add("generate", "generate tokens and print them as JSON", fathom::cli::add_generate_command);
  add("fit", "say whether a model, context, KV scheme and sequences fit in memory, and where the bytes go",
      fathom::cli::add_fit_command);
  add("bench", "measure prefill and decode speed", fathom::cli::add_bench_command);
  add("kv-eval", "measure KV-cache schemes against bf16 KV (KL divergence, top-1 agreement, bytes)",
      fathom::cli::add_kv_eval_command);
  add("quantize", "write a model's weights as an MLX-format quantized folder (affine, 2 to 8 bits)",
      fathom::cli::add_quantize_command);
  add("chat-template", "render a chat request with the model's chat template", fathom::cli::add_chat_template_command);
  add("tokenize", "encode text with the model's tokenizer", fathom::cli::add_tokenize_command);
  add("detokenize", "decode token ids with the model's tokenizer", fathom::cli::add_detokenize_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string names;
    bool known = false;
    for (const auto& [sub, run] : commands) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || (argc > 1 && sub->get_name() == argv[1]);
    }
    if (argc > 1 && argv[1][0] != '-' && !known) {
      std::fprintf(stderr, "error: unknown command \"%s\" (commands: %s)\n", argv[1], names.c_str());
      return 2;
    }
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.get_exit_code() ? e.get_exit_code() : 2;
  }
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) return run();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 1;
}
