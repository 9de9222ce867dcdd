// OpenAI request bodies: parse_body, then parse_chat_request,
// parse_completion_request, the Responses API's parser, the structured-output
// grammar of what parses, and the /tokenize and /detokenize parsers on every body. Only ApiError may come out, and what
// parses must be JSON that dumps strictly (valid UTF-8 all the way to the template).
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_common.h"
#include "server/request_parsing.h"
#include "server/responses_request.h"
#include "server/structured_output.h"

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
    // A constraint compiles into a grammar or is refused with an ApiError (400) naming it.
    if (chat.output.kind != fathom::server::OutputConstraint::Kind::none) {
      try {
        (void)fathom::server::output_grammar(chat.output, chat.tools, fathom::server::ToolCallFormat::qwen);
      } catch (const ApiError& e) {
        FUZZ_CHECK(e.status == 400, "output_grammar: status %d", e.status);
      } catch (const fathom::Error&) {
      }
    }
    for (const auto& m : chat.messages)
      FUZZ_CHECK(m.is_object() && m.contains("content") && (m["content"].is_string() || m["content"].is_null()),
                 "message content not normalized to a string: %s", m.dump().c_str());
  } catch (const ApiError&) {
  }
  try {  // the Responses API, with the body's own input as the stored history
    const fathom::server::ojson history = json.contains("input") && json["input"].is_array() ? json["input"] : fathom::server::ojson::array();
    const auto responses = fathom::server::parse_responses_request(json, history);
    (void)responses.chat.messages.dump();
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
