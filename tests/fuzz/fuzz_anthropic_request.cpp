// Anthropic Messages bodies: parse_body + parse_messages_request and
// parse_count_tokens_request. Only ApiError may
// come out, and the normalized messages must dump strictly (valid UTF-8).
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "server/request_parsing.h"

using fathom::server::ApiError;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  try {
    const auto json = fathom::server::parse_body(body);
    const auto request = fathom::server::parse_messages_request(json);
    (void)request.messages.dump();
    (void)request.tools.dump();
    (void)request.chat_template_kwargs.dump();
    FUZZ_CHECK(request.messages.is_array(), "messages is not an array");
  } catch (const ApiError&) {
  }
  try {
    const auto counted = fathom::server::parse_count_tokens_request(fathom::server::parse_body(body));
    (void)counted.messages.dump();
    FUZZ_CHECK(counted.messages.is_array(), "count_tokens messages is not an array");
  } catch (const ApiError&) {
  }
  return 0;
}
