#include "text/tokenizer/byte_level.h"

#include "text/tokenizer/utf8.h"

namespace fathom::tok {

namespace {

struct Tables {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> to_byte;  // every mapped character is below U+0200
  Tables() {
    to_byte.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = printable(b) ? char32_t(b) : char32_t(256 + next++);
      append_utf8(to_unicode[b], c);
      to_byte[c] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::array<std::string, 256>& byte_to_unicode() { return tables().to_unicode; }

int unicode_to_byte(char32_t c) { return c < 512 ? tables().to_byte[c] : -1; }

std::string bytes_to_byte_level(std::string_view bytes) {
  const auto& map = tables().to_unicode;
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out.append(map[b]);
  return out;
}

}  // namespace fathom::tok
