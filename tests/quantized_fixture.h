#pragma once
// A committed tiny model (tests/fixtures/parity/<fixture>) written as an
// MLX-quantized folder by `fathom quantize` (groups of 32), once per process
// and code width, in the temporary directory.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "model/quantize_folder.h"

namespace fathom::testing {

inline std::string quantized_fixture(const std::string& fixture, int bits) {
  namespace fs = std::filesystem;
  static std::map<std::pair<std::string, int>, std::string> made;
  std::string& dir = made[{fixture, bits}];
  if (dir.empty()) {
    dir = (fs::temp_directory_path() /
           ("fathom_" + fixture + "_q" + std::to_string(bits) + "_" + std::to_string(::getpid())))
              .string();
    fs::remove_all(dir);
    quantize_folder((fs::path(FATHOM_FIXTURES_DIR) / "parity" / fixture).string(), dir, {bits, 32, ""});
  }
  return dir;
}

}  // namespace fathom::testing
