#pragma once
// A non-streaming answer that still notices a client hanging up. The JSON body
// is sent chunked once generation ends; until then a space (whitespace JSON
// parsers skip) goes out every 250 ms, and the first write that fails cancels
// the request and frees its state, whether it is queued or running.
#include <functional>
#include <memory>
#include <string>

#include "server/generation_session.h"
#include "server/http_errors.h"

namespace fathom::server {

// `body` turns everything generated into the response JSON; an ApiError it
// throws becomes an error body in `style` (the status is already 200 by then).
void respond_when_done(httplib::Response& res, std::shared_ptr<GenerationSession> session, ApiStyle style,
                       std::function<std::string(Delta&)> body);

}  // namespace fathom::server
