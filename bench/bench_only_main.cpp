// `fathom bench` alone, for a machine the whole fathom binary is too large to
// carry to (scripts/host_bundle.sh): the same command and options, without the
// word "bench", and nothing else linked.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"fathom bench: measure prefill and decode speed"};
  const fathom::cli::Command run = fathom::cli::add_bench_command(app);
  try {
    app.parse(argc, argv);
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
