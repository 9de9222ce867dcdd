#include "server/http_errors.h"

#include <algorithm>

#include "core/error.h"
#include "server/sse.h"

namespace fathom::server {

namespace {
std::string anthropic_type(const ApiError& e) {
  switch (e.status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 504: return "timeout_error";
    default: return e.status >= 500 ? "api_error" : "invalid_request_error";
  }
}
}  // namespace

void write_error(httplib::Response& res, const ApiError& e, ApiStyle style) {
  res.status = e.status;
  res.set_content(dump_json(error_body(e, style)), "application/json");
}

ojson error_body(const ApiError& e, ApiStyle style) {
  ojson body;
  if (style == ApiStyle::anthropic) {
    body = {{"type", "error"}, {"error", {{"type", anthropic_type(e)}, {"message", e.what()}}}};
  } else {
    body = {{"error",
             {{"message", e.what()},
              {"type", e.type},
              {"param", e.param.empty() ? ojson(nullptr) : ojson(e.param)},
              {"code", e.code.empty() ? ojson(nullptr) : ojson(e.code)}}}};
  }
  return body;
}

namespace {
// The id a response carries (OpenAI: x-request-id; Anthropic: request-id): the
// client's own x-request-id when it sent a plain one, so logs on both sides
// meet, else a fresh one.
std::string request_id_for(const httplib::Request& req) {
  const std::string given = req.get_header_value("x-request-id");
  const bool plain = !given.empty() && given.size() <= 128 &&
                     std::all_of(given.begin(), given.end(), [](char c) { return c > ' ' && c < 127; });
  return plain ? given : random_id("req_");
}
}  // namespace

httplib::Server::Handler guarded(ServerContext& ctx, std::string route, ApiStyle style, RouteHandler handler) {
  return [&ctx, route = std::move(route), style, handler = std::move(handler)](const httplib::Request& req,
                                                                               httplib::Response& res) {
    res.set_header(style == ApiStyle::anthropic ? "request-id" : "x-request-id", request_id_for(req));
    try {
      if (req.body.size() > ctx.options.max_body_bytes)
        throw ApiError(413,
                       "the request body has " + std::to_string(req.body.size()) + " bytes; the limit is " +
                           std::to_string(ctx.options.max_body_bytes),
                       "", "invalid_request_error", "request_too_large");
      handler(req, res);
    } catch (const ApiError& e) {
      write_error(res, e, style);
    } catch (const fathom::Error& e) {
      write_error(res, ApiError(400, e.what()), style);
    } catch (const std::bad_alloc&) {
      write_error(res, ApiError(503, "out of memory", "", "server_error"), style);
    } catch (const std::exception& e) {
      write_error(res, ApiError(500, e.what(), "", "server_error"), style);
    }
    ctx.metrics.count_request(route, res.status == -1 ? 200 : res.status);
  };
}

}  // namespace fathom::server
