#pragma once
// Error bodies in each API's shape, and the wrapper every route runs in: it
// turns exceptions into clean 4xx/5xx answers and counts the request.
#include <functional>
#include <string>

#include <httplib.h>

#include "server/request_parsing.h"
#include "server/server_context.h"

namespace fathom::server {

enum class ApiStyle { openai, anthropic };

// OpenAI: {"error": {"message", "type", "param", "code"}};
// Anthropic: {"type": "error", "error": {"type", "message"}}.
void write_error(httplib::Response& res, const ApiError& error, ApiStyle style);
ojson error_body(const ApiError& error, ApiStyle style);

using RouteHandler = std::function<void(const httplib::Request&, httplib::Response&)>;
httplib::Server::Handler guarded(ServerContext& ctx, std::string route, ApiStyle style, RouteHandler handler);

}  // namespace fathom::server
