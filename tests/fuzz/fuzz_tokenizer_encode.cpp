// A real tokenizer (Qwen3 by default: byte-level BPE after NFC) on fuzzed text:
// decode(encode(text)) == text (NFC(text) under an NFC normalizer; no round-trip
// check under other normalizers), the streamed decode equals the full one, and
// every id names a token. FATHOM_FUZZ_TOKENIZER_DIR picks another folder (e.g.
// .cache/tokenizers/llama3_1: byte-level, no normalizer).
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuzz_common.h"
#include "text/tokenizer/incremental_detokenizer.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/unicode.h"
#include "text/tokenizer/utf8.h"

namespace {

enum class RoundTrip { exact, nfc, none };

std::string tokenizer_dir() {
  const char* dir = std::getenv("FATHOM_FUZZ_TOKENIZER_DIR");
  return dir && *dir ? dir : FATHOM_FUZZ_DEFAULT_TOKENIZER_DIR;
}

// What decode(encode(text)) must give, from tokenizer.json's normalizer.
RoundTrip round_trip() {
  static const RoundTrip rt = [] {
    std::ifstream in(tokenizer_dir() + "/tokenizer.json");
    std::stringstream ss;
    ss << in.rdbuf();
    const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    const auto n = j.is_object() && j.contains("normalizer") ? j["normalizer"] : nlohmann::json();
    if (n.is_null()) return RoundTrip::exact;
    if (n.is_object() && n.value("type", "") == "NFC") return RoundTrip::nfc;
    std::fprintf(stderr, "fuzz_tokenizer_encode: normalizer %s: no round-trip check\n", n.dump().c_str());
    return RoundTrip::none;
  }();
  return rt;
}

const fathom::Tokenizer& tokenizer() {
  static const fathom::Tokenizer tok = [] {
    const std::string path = tokenizer_dir();
    try {
      return fathom::Tokenizer::load(path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fuzz_tokenizer_encode: cannot load %s (run scripts/fetch_tokenizers.sh): %s\n",
                   path.c_str(), e.what());
      std::exit(2);
    }
  }();
  return tok;
}

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    char buf[8];
    std::snprintf(buf, sizeof buf, c >= 0x20 && c < 0x7f && c != '\\' ? "%c" : "\\x%02x", c);
    out += buf;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fathom::Tokenizer& tok = tokenizer();
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (fathom::tok::first_invalid_utf8(text)) {
    try {
      (void)tok.encode(text, false);
      FUZZ_CHECK(false, "encode accepted invalid UTF-8");
    } catch (const fathom::Error&) {
    }
    return 0;
  }
  const std::vector<int32_t> ids = tok.encode(text, false);
  for (int32_t id : ids) (void)tok.id_to_token(id);
  const std::string decoded = tok.decode(ids);
  const RoundTrip rt = round_trip();
  const std::string expected =
      rt == RoundTrip::nfc ? fathom::tok::normalize_unicode(text, fathom::tok::NormalForm::NFC) : text;
  FUZZ_CHECK(rt == RoundTrip::none || decoded == expected, "round trip lost text:\n  in:  %s\n  out: %s", printable(expected).c_str(),
             printable(decoded).c_str());

  fathom::IncrementalDetokenizer stream(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  FUZZ_CHECK(streamed == decoded, "streamed decode differs:\n  full:     %s\n  streamed: %s",
             printable(decoded).c_str(), printable(streamed).c_str());

  // With the post-processor's specials: the same text after them.
  const std::vector<int32_t> with_specials = tok.encode(text, true);
  FUZZ_CHECK(with_specials.size() >= ids.size(), "add_special_tokens dropped ids");
  return 0;
}
