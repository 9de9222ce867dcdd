#pragma once
// JSON from clients (and from model output) parsed with bounds: nesting depth
// (everything that walks a JSON value recursively, copies included, must not
// overflow the stack) and object keys (ordered_json finds a key by a linear
// scan, so n keys in one object cost n²/2 comparisons to parse).
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fathom::server {

struct JsonLimits {
  int max_depth = 64;             // arrays and objects nested in one another
  size_t max_object_keys = 1024;  // keys in one object
  size_t max_keys = 65536;        // keys in the whole document
};

// Returns a discarded value when the text is not JSON or breaks a limit; the
// reason then goes to *error (when given).
nlohmann::ordered_json parse_json_bounded(std::string_view text, std::string* error = nullptr,
                                          const JsonLimits& limits = {});

}  // namespace fathom::server
