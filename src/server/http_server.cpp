#include "server/http_server.h"

#include <httplib.h>

#include <malloc.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "core/error.h"
#include "core/process_memory.h"
#include "core/tensor.h"
#include "server/anthropic_routes.h"
#include "server/bounded_http_server.h"
#include "server/http_errors.h"
#include "server/openai_routes.h"
#include "server/responses_routes.h"
#include "server/sse.h"
#include "server/status_route.h"
#include "server/token_routes.h"
#include "server/webui/webui_routes.h"

namespace fathom::server {

namespace {

std::atomic<BoundedHttpServer*> g_server{nullptr};

void on_signal(int) {
  // stop() only shuts the listening socket down; it is safe enough from a handler here.
  if (auto* s = g_server.load()) s->stop();
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0;
}

ApiStyle style_of(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiStyle::anthropic : ApiStyle::openai;
}

bool authorized(const httplib::Request& req, const std::string& key) {
  const std::string auth = req.get_header_value("Authorization");
  if (auth.rfind("Bearer ", 0) == 0 && constant_time_equal(auth.substr(7), key)) return true;
  return req.has_header("x-api-key") && constant_time_equal(req.get_header_value("x-api-key"), key);
}

}  // namespace

void run_http_server(ServerContext& ctx, const std::function<void(int port)>& on_listening) {
  // Each HTTP thread that touches a large body would otherwise keep its own
  // malloc arena of that size: cap the arenas (the connection layer also trims
  // after large requests).
  mallopt(M_ARENA_MAX, 4);
  // A step's large working tensors are mapped and unmapped as they come and
  // go, so resident memory follows what is live (the memory contract) instead
  // of the largest steps ever run: fixing the threshold stops glibc raising it
  // after each freed mapping and keeping such tensors in its arenas.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Bodies up to twice the limit are read and answered with a clean 413 by the
  // routes; beyond that the library refuses them without reading.
  const size_t payload_max = ctx.options.max_body_bytes * 2 + 1024;
  ConnectionLimits limits = ctx.options.connections;
  limits.max_body_bytes = payload_max * 2;  // room for chunked framing
  BoundedHttpServer http(limits);
  http.set_payload_max_length(payload_max);

  http.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (ctx.options.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    // The chat page's files hold no secrets; the page asks for the key when the API refuses it.
    if (ctx.options.webui && (req.method == "GET" || req.method == "HEAD") && is_webui_path(req.path))
      return httplib::Server::HandlerResponse::Unhandled;
    if (authorized(req, ctx.options.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    write_error(res,
                ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'",
                         "", "invalid_request_error", "invalid_api_key"),
                style_of(req.path));
    // The body was not read: it must not be taken for the next request.
    BoundedHttpServer::close_connection_after_response();
    ctx.metrics.count_request("unauthorized", 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses the library sets itself (404, 413, 400 on a broken request line) get a JSON body too.
  // Every error closes its connection: the library answers some (413, a broken
  // header) without reading the body, which must not become the next request.
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Connection") != "close") res.set_header("Connection", "close");  // else the library says it
    BoundedHttpServer::close_connection_after_response();
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "error";
    if (res.status == 404) message = "no route for " + req.method + " " + req.path;
    else if (res.status == 413) message = "the request body is too large";
    else if (res.status == 405) message = "method not allowed";
    else message = "HTTP error " + std::to_string(res.status);
    write_error(res, ApiError(res.status, message), style_of(req.path));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    write_error(res, ApiError(500, "internal error", "", "server_error"), style_of(req.path));
  });

  http.Get("/health", [&ctx, &http](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump_json({{"status", "ok"}, {"model", ctx.options.served_model_name},
                               {"queued", ctx.worker.queued()}, {"connections", http.open_connections()},
                               {"refused_connections", http.refused_connections()}}),
                    "application/json");
  });
  http.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    ctx.metrics.count_request("/metrics", 200);
    Metrics::MemoryReading memory;
    memory.budget = ctx.admission.budget();
    memory.predicted = ctx.admission.fixed() + ctx.admission.admitted();
    memory.resident = resident_bytes();
    memory.tensors = allocated_bytes(Device::cpu);
    memory.reserved = reserved_bytes(Device::cpu);
    const KvBlockPool& pool = ctx.model.kv_pool();
    memory.kv_block_bytes = pool.block_bytes();
    memory.kv_blocks_used = pool.used_blocks();
    memory.kv_blocks_free = pool.free_blocks();
    res.set_content(ctx.metrics.render(memory), "text/plain; version=0.0.4");
  });
  add_status_route(http, ctx);
  add_openai_routes(http, ctx);
  add_responses_routes(http, ctx);
  add_anthropic_routes(http, ctx);
  add_token_routes(http, ctx);
  if (ctx.options.webui) add_webui_routes(http);

  int port = ctx.options.port;
  if (port == 0) {
    port = http.bind_to_any_port(ctx.options.host);
    check(port > 0, "serve: cannot bind ", ctx.options.host, " on any port");
  } else {
    check(http.bind_to_port(ctx.options.host, port), "serve: cannot bind ", ctx.options.host, ":", port,
          " (in use, or not an address of this machine)");
  }
  http.widen_accept_backlog();
  std::signal(SIGPIPE, SIG_IGN);
  g_server = &http;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  on_listening(port);
  http.listen_after_bind();
  g_server = nullptr;
}

}  // namespace fathom::server
