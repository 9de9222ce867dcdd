#include "server/deferred_response.h"

#include <chrono>

#include "server/bounded_http_server.h"

namespace fathom::server {

void respond_when_done(httplib::Response& res, GenerationSession& session, const std::function<std::string(Delta&)>& body) {
  using namespace std::chrono;
  Delta all;
  auto last_check = steady_clock::now();
  while (!session.step(all, milliseconds(50))) {
    if (steady_clock::now() - last_check < milliseconds(250)) continue;
    last_check = steady_clock::now();
    if (BoundedHttpServer::client_disconnected()) {
      session.cancel();
      BoundedHttpServer::close_connection_after_response();
      // Nobody reads this; the status tells the metrics what happened (nginx's 499).
      throw ApiError(499, "the client closed the connection", "", "invalid_request_error", "client_closed");
    }
  }
  if (auto failure = session.failure()) throw *failure;
  res.set_content(body(all), "application/json");
}

}  // namespace fathom::server
