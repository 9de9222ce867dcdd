#include "server/deferred_response.h"

#include <algorithm>
#include <chrono>

#include "server/bounded_http_server.h"

namespace fathom::server {

void respond_when_all_done(httplib::Response& res, std::span<GenerationSession* const> sessions,
                           const std::function<std::string(std::vector<Delta>&)>& body) {
  using namespace std::chrono;
  std::vector<Delta> all(sessions.size());
  std::vector<bool> done(sessions.size(), false);
  // Each unfinished session is polled in turn; together they wait about 50 ms a round.
  const auto wait = milliseconds(std::max<int64_t>(1, 50 / int64_t(sessions.size())));
  auto last_check = steady_clock::now();
  for (size_t left = sessions.size(); left > 0;) {
    for (size_t i = 0; i < sessions.size(); ++i)
      if (!done[i] && sessions[i]->step(all[i], wait)) done[i] = true, --left;
    if (left == 0 || steady_clock::now() - last_check < milliseconds(250)) continue;
    last_check = steady_clock::now();
    if (BoundedHttpServer::client_disconnected()) {
      for (GenerationSession* s : sessions) s->cancel();
      BoundedHttpServer::close_connection_after_response();
      // Nobody reads this; the status tells the metrics what happened (nginx's 499).
      throw ApiError(499, "the client closed the connection", "", "invalid_request_error", "client_closed");
    }
  }
  for (const GenerationSession* s : sessions)
    if (auto failure = s->failure()) throw *failure;
  res.set_content(body(all), "application/json");
}

void respond_when_done(httplib::Response& res, GenerationSession& session, const std::function<std::string(Delta&)>& body) {
  GenerationSession* const one[] = {&session};
  respond_when_all_done(res, one, [&body](std::vector<Delta>& all) { return body(all[0]); });
}

}  // namespace fathom::server
