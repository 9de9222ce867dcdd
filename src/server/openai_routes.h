#pragma once
// OpenAI routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models.
#include <httplib.h>

#include "server/server_context.h"

namespace fathom::server {

void add_openai_routes(httplib::Server& http, ServerContext& ctx);

}  // namespace fathom::server
