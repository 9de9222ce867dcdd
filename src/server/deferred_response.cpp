#include "server/deferred_response.h"

#include <chrono>

#include "server/sse.h"

namespace fathom::server {

void respond_when_done(httplib::Response& res, std::shared_ptr<GenerationSession> session, ApiStyle style,
                       std::function<std::string(Delta&)> body) {
  res.set_chunked_content_provider(
      "application/json", [session, style, body = std::move(body)](size_t, httplib::DataSink& sink) {
        using namespace std::chrono;
        Delta all;
        auto last_write = steady_clock::now();
        while (!session->step(all, milliseconds(50))) {
          if (steady_clock::now() - last_write < milliseconds(250)) continue;
          if (!sink.write(" ", 1)) {
            session->cancel();
            return false;
          }
          last_write = steady_clock::now();
        }
        std::string text;
        try {
          text = body(all);
        } catch (const ApiError& e) {
          text = dump_json(error_body(e, style));
        }
        if (!sink.write(text.data(), text.size())) return false;
        sink.done();
        return true;
      });
}

}  // namespace fathom::server
