#pragma once
// Counting and converting tokens without generating: POST /tokenize and
// /detokenize (as llama.cpp's and vLLM's servers have them) and Anthropic's
// POST /v1/messages/count_tokens.
#include <httplib.h>

#include "server/server_context.h"

namespace fathom::server {

void add_token_routes(httplib::Server& http, ServerContext& ctx);

}  // namespace fathom::server
