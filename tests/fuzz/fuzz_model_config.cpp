// config.json and generation_config.json text: fathom::Error or a config, nothing else.
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "io/generation_config.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    (void)fathom::parse_model_config_text(bytes);
  } catch (const fathom::Error&) {
  }
  try {
    (void)fathom::parse_generation_config_text(bytes);
  } catch (const fathom::Error&) {
  }
  return 0;
}
