#include "server/sse.h"

#include <httplib.h>

namespace fathom::server {

std::string dump_json(const nlohmann::ordered_json& payload) {
  return payload.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string sse_data(const nlohmann::ordered_json& payload) { return "data: " + dump_json(payload) + "\n\n"; }

std::string sse_event(const char* event, const nlohmann::ordered_json& payload) {
  return std::string("event: ") + event + "\n" + sse_data(payload);
}

void stream_session(httplib::Response& res, std::shared_ptr<GenerationSession> session,
                    std::shared_ptr<SseFormatter> formatter) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [session, formatter](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
        using namespace std::chrono;
        if (!write(formatter->begin())) {
          session->cancel();
          return false;
        }
        auto last_write = steady_clock::now();
        for (;;) {
          Delta delta;
          const bool done = session->step(delta, milliseconds(100));
          if (!delta.empty()) {
            if (!write(formatter->delta(delta))) {
              session->cancel();
              return false;
            }
            last_write = steady_clock::now();
          }
          if (done) break;
          // A comment line, ignored by SSE clients: the write fails once the client is gone.
          if (steady_clock::now() - last_write > milliseconds(250)) {
            if (!write(": keep-alive\n\n")) {
              session->cancel();
              return false;
            }
            last_write = steady_clock::now();
          }
        }
        if (!write(formatter->end(*session))) return false;
        sink.done();
        return true;
      });
}

}  // namespace fathom::server
