#pragma once
// Deterministic chunkings of a fuzz input for the streaming matchers: one byte at
// a time, pieces of 1..16 bytes drawn from a generator seeded by the input, and
// the whole input at once.
#include <cstdint>
#include <string_view>
#include <vector>

namespace fuzz {

inline std::vector<std::vector<std::string_view>> chunkings(std::string_view s) {
  std::vector<std::vector<std::string_view>> out(3);
  for (size_t i = 0; i < s.size(); ++i) out[0].push_back(s.substr(i, 1));
  uint64_t x = 0x9e3779b97f4a7c15ull ^ s.size();
  for (unsigned char c : s) x = (x ^ c) * 0x100000001b3ull;
  for (size_t i = 0; i < s.size();) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const size_t n = 1 + x % 16;
    out[1].push_back(s.substr(i, n));
    i += n;
  }
  out[2].push_back(s);
  return out;
}

}  // namespace fuzz
