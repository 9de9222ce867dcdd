#include "core/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace fathom {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int64_t parse_byte_size(const std::string& text, const std::string& what) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  size_t j = i;
  while (j < text.size() && text[j] == ' ') ++j;
  const std::string unit = lower(text.substr(j));
  const bool digits = number.find_first_of("0123456789") != std::string::npos;
  char* end = nullptr;
  const double value = digits ? std::strtod(number.c_str(), &end) : 0.0;
  check(digits && end == number.c_str() + number.size(), what, ": \"", text,
        "\" is not a size (a number with an optional unit: 12GiB, 800MB, 1.5GB, 1048576)");
  double scale = 0.0;
  if (unit.empty() || unit == "b") scale = 1.0;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "tb") scale = 1e12;
  else if (unit == "k" || unit == "kib") scale = 1024.0;
  else if (unit == "m" || unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  check(scale > 0.0, what, ": unknown unit \"", text.substr(j), "\" in \"", text,
        "\" (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, K, M, G, T)");
  const double bytes = std::floor(value * scale);
  check(bytes >= 1.0, what, ": \"", text, "\" is less than one byte");
  check(bytes <= std::ldexp(1.0, 62), what, ": \"", text, "\" is too large");
  return int64_t(bytes);
}

std::string format_bytes(int64_t bytes) {
  char buf[48];
  const double b = double(bytes);
  if (bytes < 0) return "-" + format_bytes(-bytes);
  if (b >= double(int64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(int64_t(1) << 30));
  else if (b >= double(1 << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  else if (b >= double(1 << 10)) std::snprintf(buf, sizeof buf, "%.1f KiB", b / double(1 << 10));
  else std::snprintf(buf, sizeof buf, "%lld B", (long long)bytes);
  return buf;
}

}  // namespace fathom
