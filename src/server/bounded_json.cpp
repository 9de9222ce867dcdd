#include "server/bounded_json.h"

#include <cstdint>
#include <vector>

namespace fathom::server {

namespace {

using ojson = nlohmann::ordered_json;

struct LimitExceeded {
  std::string reason;
};

}  // namespace

ojson parse_json_bounded(std::string_view text, std::string* error, const JsonLimits& limits) {
  constexpr size_t kArray = SIZE_MAX;  // marks an open array on the stack below
  std::vector<size_t> open;            // per open container: keys so far (objects) or kArray
  size_t keys = 0;
  auto callback = [&](int, ojson::parse_event_t event, ojson&) {
    switch (event) {
      case ojson::parse_event_t::object_start:
      case ojson::parse_event_t::array_start:
        if (int(open.size()) >= limits.max_depth)
          throw LimitExceeded{"JSON nesting deeper than " + std::to_string(limits.max_depth) + " levels"};
        open.push_back(event == ojson::parse_event_t::array_start ? kArray : 0);
        break;
      case ojson::parse_event_t::object_end:
      case ojson::parse_event_t::array_end:
        if (!open.empty()) open.pop_back();
        break;
      case ojson::parse_event_t::key:
        if (!open.empty() && open.back() != kArray && ++open.back() > limits.max_object_keys)
          throw LimitExceeded{"a JSON object with more than " + std::to_string(limits.max_object_keys) + " keys"};
        if (++keys > limits.max_keys)
          throw LimitExceeded{"more than " + std::to_string(limits.max_keys) + " JSON object keys in all"};
        break;
      case ojson::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return ojson::parse(text.begin(), text.end(), callback);
  } catch (const LimitExceeded& e) {
    if (error) *error = e.reason;
  } catch (const nlohmann::json::exception& e) {
    if (error) *error = e.what();
  }
  return ojson(ojson::value_t::discarded);
}

}  // namespace fathom::server
