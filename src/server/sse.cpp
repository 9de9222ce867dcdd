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

void stream_sessions(httplib::Response& res, std::vector<std::shared_ptr<GenerationSession>> sessions,
                     std::vector<std::shared_ptr<SseFormatter>> formatters,
                     std::function<std::string(const std::vector<std::shared_ptr<GenerationSession>>&)> trailer) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [sessions, formatters, trailer](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
        auto cancel_all = [&] {
          for (const auto& s : sessions) s->cancel();
        };
        using namespace std::chrono;
        for (const auto& f : formatters)
          if (!write(f->begin())) return cancel_all(), false;
        std::vector<bool> done(sessions.size(), false);
        size_t running = sessions.size();
        auto last_write = steady_clock::now();
        while (running > 0) {
          bool wrote = false;
          for (size_t i = 0; i < sessions.size(); ++i) {
            if (done[i]) continue;
            Delta delta;
            // A short wait each: a choice with no token yet does not hold up the others.
            const bool finished = sessions[i]->step(delta, milliseconds(running > 1 ? 5 : 100));
            if (!delta.empty()) {
              if (!write(formatters[i]->delta(delta))) return cancel_all(), false;
              wrote = true;
            }
            if (!finished) continue;
            done[i] = true;
            --running;
            const bool failed = sessions[i]->failure().has_value();
            if (!write(formatters[i]->end(*sessions[i]))) return cancel_all(), false;
            if (failed) {  // its end() wrote the error and closed the stream
              cancel_all();
              sink.done();
              return true;
            }
            wrote = true;
          }
          if (wrote) {
            last_write = steady_clock::now();
          } else if (steady_clock::now() - last_write > milliseconds(250)) {
            if (!write(": keep-alive\n\n")) return cancel_all(), false;
            last_write = steady_clock::now();
          }
        }
        if (!write(trailer(sessions))) return false;
        sink.done();
        return true;
      });
}

}  // namespace fathom::server
