#pragma once
// OpenAI's Responses API request (POST /v1/responses) in terms of a chat
// request: input items (messages, function calls and their outputs) become
// chat messages after `instructions`, the flat function tools become chat
// tools, text.format becomes response_format, max_output_tokens max_tokens.
// What a Responses request holds beyond that (the items, for the response
// store; the fields a response echoes) is kept beside it.
#include <optional>
#include <string>

#include "server/request_parsing.h"

namespace fathom::server {

struct ResponsesRequest {
  ChatRequest chat;
  ojson input_items = ojson::array();  // this request's input, as items
  std::optional<std::string> previous_response_id;
  bool store = true;
  ojson echo = ojson::object();  // instructions, tools, tool_choice, text, temperature, top_p, ... as sent
};

// The previous_response_id a body names, if any (checked to be a string).
std::optional<std::string> previous_response_id(const ojson& body);

// `history`: the items of the conversation up to the previous response (its
// input and output items), empty when there is none. Errors are ApiErrors
// naming the Responses API's fields.
ResponsesRequest parse_responses_request(const ojson& body, const ojson& history);

}  // namespace fathom::server
