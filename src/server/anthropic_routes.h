#pragma once
// Anthropic routes: POST /v1/messages (and its streaming event grammar).
#include <httplib.h>

#include "server/server_context.h"

namespace fathom::server {

void add_anthropic_routes(httplib::Server& http, ServerContext& ctx);

}  // namespace fathom::server
