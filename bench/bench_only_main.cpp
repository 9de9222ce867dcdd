// `fathom bench` alone, for a machine the whole fathom binary is too large to
// carry to (scripts/host_bundle.sh, scripts/gpu_bundle.sh): the same command
// and options, without the word "bench". `fathom_bench quantize ...` is
// `fathom quantize ...`, so such a machine can also make the quantized folders
// it measures (bench/compare_llama_cpp.sh). Nothing else is linked.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string_view>

#include "cli/commands.h"

int main(int argc, char** argv) {
  const bool quantize = argc > 1 && std::string_view(argv[1]) == "quantize";
  CLI::App app{quantize ? "fathom quantize: write an MLX-format quantized model"
                        : "fathom bench: measure prefill and decode speed"};
  const fathom::cli::Command run =
      quantize ? fathom::cli::add_quantize_command(app) : fathom::cli::add_bench_command(app);
  try {
    app.parse(argc - quantize, argv + quantize);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
