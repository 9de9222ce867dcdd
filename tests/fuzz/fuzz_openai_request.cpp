// OpenAI request bodies: parse_body, then parse_chat_request,
// parse_completion_request and the /tokenize and /detokenize parsers on every body. Only ApiError may come out, and what
// parses must be JSON that dumps strictly (valid UTF-8 all the way to the template).
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "server/request_parsing.h"

using fathom::server::ApiError;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  fathom::server::ojson json;
  try {
    json = fathom::server::parse_body(body);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status == 400 || e.status == 413, "parse_body: status %d", e.status);
    return 0;
  }
  try {
    const auto chat = fathom::server::parse_chat_request(json);
    (void)chat.messages.dump();  // strict: throws on invalid UTF-8
    (void)chat.tools.dump();
    (void)chat.chat_template_kwargs.dump();
    FUZZ_CHECK(chat.messages.is_array(), "messages is not an array");
    for (const auto& m : chat.messages)
      FUZZ_CHECK(m.is_object() && m.contains("content") && (m["content"].is_string() || m["content"].is_null()),
                 "message content not normalized to a string: %s", m.dump().c_str());
  } catch (const ApiError&) {
  }
  try {
    const auto completion = fathom::server::parse_completion_request(json);
    (void)completion;
  } catch (const ApiError&) {
  }
  try {
    const auto tokenize = fathom::server::parse_tokenize_request(json);
    FUZZ_CHECK(tokenize.chat.has_value() || tokenize.text.size() <= body.size(), "tokenize text longer than the body");
  } catch (const ApiError&) {
  }
  try {
    constexpr int64_t kVocab = 1000;
    for (int32_t id : fathom::server::parse_detokenize_request(json, kVocab))
      FUZZ_CHECK(id >= 0 && id < kVocab, "detokenize let id %d through", id);
  } catch (const ApiError&) {
  }
  return 0;
}
