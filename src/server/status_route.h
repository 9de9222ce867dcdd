#pragma once
// GET /status: fathom's own JSON view of the engine for people and the chat
// page: the model, the context, the KV scheme and the memory contract's terms
// (fixed at start-up), and what the engine is doing now (live).
#include <httplib.h>

#include "server/server_context.h"

namespace fathom::server {

// The body of GET /status.
ojson status_json(const ServerContext& ctx);
void add_status_route(httplib::Server& http, ServerContext& ctx);

}  // namespace fathom::server
