#pragma once
// The HTTP server: routes, authentication, limits, and the listening loop.
#include <functional>

#include "server/server_context.h"

namespace fathom::server {

// Binds ctx.options.host:port (port 0: any free port), calls on_listening with
// the bound port, then serves until SIGINT/SIGTERM. Throws if it cannot bind.
void run_http_server(ServerContext& ctx, const std::function<void(int port)>& on_listening);

}  // namespace fathom::server
