#pragma once
// OpenAI's Responses API: POST /v1/responses (input items, instructions,
// function tools, text.format, streaming events, previous_response_id from a
// bounded store).
#include <httplib.h>

#include "server/server_context.h"

namespace fathom::server {

void add_responses_routes(httplib::Server& http, ServerContext& ctx);

}  // namespace fathom::server
