// A tokenizer built from fuzzed tokenizer.json text, then used.
// Input: <tokenizer.json> \0 <text to encode> [\0 <tokenizer_config.json>].
// Building throws fathom::Error or gives a tokenizer whose encode accepts any valid
// UTF-8, whose ids all name tokens, and whose decode is always valid UTF-8.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz_common.h"
#include "text/tokenizer/incremental_detokenizer.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/utf8.h"

namespace {

std::string_view take_until_nul(std::string_view& rest) {
  const size_t nul = rest.find('\0');
  const std::string_view part = rest.substr(0, nul);
  rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  return part;
}

void check_decode(const fathom::Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (bool skip : {false, true}) {
    const std::string text = tok.decode(ids, skip);
    FUZZ_CHECK(!fathom::tok::first_invalid_utf8(text), "decode gave invalid UTF-8 (%zu ids)", ids.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string_view rest(input);
  const std::string tokenizer_json(take_until_nul(rest));
  const std::string text(take_until_nul(rest));
  const std::string config_json(rest);

  fathom::Tokenizer tok = [&] {
    try {
      return std::optional(fathom::Tokenizer::from_json(tokenizer_json, config_json));
    } catch (const fathom::Error&) {
      return std::optional<fathom::Tokenizer>();
    }
  }().value_or(fathom::Tokenizer::from_json(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]}})"));
  // (The fallback keeps the encode/decode half of the target reachable on every input.)

  (void)tok.vocab_size();
  for (int32_t id : tok.special_ids()) FUZZ_CHECK(tok.is_special(id), "special id %d is not special", id);
  (void)tok.eos_ids();

  const bool valid = !fathom::tok::first_invalid_utf8(text);
  for (bool add_special : {false, true}) {
    std::vector<int32_t> ids;
    try {
      ids = tok.encode(text, add_special);
    } catch (const fathom::Error&) {
      continue;  // invalid UTF-8, or a model that cannot spell this text (no unk token)
    }
    FUZZ_CHECK(valid, "encode accepted invalid UTF-8");
    for (int32_t id : ids) (void)tok.id_to_token(id);  // every id it gives names a token
    check_decode(tok, ids);
    fathom::IncrementalDetokenizer stream(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    FUZZ_CHECK(!fathom::tok::first_invalid_utf8(streamed), "incremental decode gave invalid UTF-8");
  }

  // Arbitrary ids (negative, past the vocabulary) are skipped, never read out of range.
  std::vector<int32_t> raw_ids(text.size() / 4);
  if (!raw_ids.empty()) std::memcpy(raw_ids.data(), text.data(), raw_ids.size() * 4);
  for (size_t i = 0; i < text.size() && i < 64; ++i) raw_ids.push_back(int32_t(uint8_t(text[i])) - 8);
  check_decode(tok, raw_ids);
  fathom::IncrementalDetokenizer stream(tok, true);
  for (int32_t id : raw_ids) (void)stream.push(id);
  (void)stream.flush();
  return 0;
}
