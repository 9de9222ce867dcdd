#pragma once
// Each subcommand registers its options on the app and returns the function
// that runs it once parsing succeeded.
#include <CLI/CLI.hpp>
#include <functional>

namespace fathom::cli {

using Command = std::function<int()>;

Command add_logits_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_detokenize_command(CLI::App& app);
Command add_kv_eval_command(CLI::App& app);
Command add_chat_template_command(CLI::App& app);
Command add_serve_command(CLI::App& app);
Command add_fit_command(CLI::App& app);
Command add_chat_command(CLI::App& app);
Command add_quantize_command(CLI::App& app);

}  // namespace fathom::cli
