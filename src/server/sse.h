#pragma once
// Server-sent events: a route describes its event grammar as an SseFormatter;
// stream_session() drives a GenerationSession through it on the HTTP thread,
// keeps idle connections probed (SSE comments) so a vanished client is noticed
// while its request still waits in the queue, and cancels on disconnect.
#include <functional>
#include <memory>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "server/generation_session.h"

namespace httplib {
struct Response;
}

namespace fathom::server {

std::string sse_data(const nlohmann::ordered_json& payload);                           // data: {...}\n\n
std::string sse_event(const char* event, const nlohmann::ordered_json& payload);       // event: x\ndata: {...}\n\n
std::string dump_json(const nlohmann::ordered_json& payload);  // invalid UTF-8 replaced, never throws on text

class SseFormatter {
 public:
  virtual ~SseFormatter() = default;
  virtual std::string begin() = 0;
  virtual std::string delta(const Delta& delta) = 0;
  virtual std::string end(const GenerationSession& session) = 0;
};

void stream_session(httplib::Response& res, std::shared_ptr<GenerationSession> session,
                    std::shared_ptr<SseFormatter> formatter);
// Several sessions (the choices of one request, n > 1) in one stream: each
// through its own formatter, interleaved as their tokens come; once all have
// ended, `trailer` (given every session) closes the stream. A failed session
// ends the stream with its formatter's end() and cancels the others.
void stream_sessions(httplib::Response& res, std::vector<std::shared_ptr<GenerationSession>> sessions,
                     std::vector<std::shared_ptr<SseFormatter>> formatters,
                     std::function<std::string(const std::vector<std::shared_ptr<GenerationSession>>&)> trailer);

}  // namespace fathom::server
