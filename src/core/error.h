#pragma once
// Errors inside fathom are exceptions whose message names the operation and the
// offending value; the CLI and HTTP edges turn them into clean errors.
#include <stdexcept>
#include <sstream>
#include <string>
#include <type_traits>
#include <string_view>

namespace fathom {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename T>
inline std::string to_message_part(const T& v) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    return std::string(std::string_view(v));
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    std::ostringstream s;
    s << v;
    return s.str();
  }
}

// check(cond, "matmul: K mismatch ", a, " vs ", b) — builds the message only on failure.
template <typename... Parts>
inline void check(bool ok, const Parts&... parts) {
  if (ok) return;
  std::string msg;
  ((msg += to_message_part(parts)), ...);
  throw Error(msg);
}


template <typename... Parts>
[[noreturn]] inline void fail(const Parts&... parts) {
  std::string msg;
  ((msg += to_message_part(parts)), ...);
  throw Error(msg);
}

}  // namespace fathom
