#pragma once
// A non-streaming answer. The route's HTTP thread waits for generation to end
// and only then writes the status line, so a timeout, an engine failure or a
// shutdown gets its own status instead of a 200. While it waits it watches
// the connection: a client that hangs up cancels its request and frees its
// state, whether the request is queued or running.
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "server/generation_session.h"
#include "server/http_errors.h"

namespace fathom::server {

// `body` turns everything generated into the response JSON. A failed session
// (GenerationSession::failure) is thrown as its ApiError for `guarded` to answer.
void respond_when_done(httplib::Response& res, GenerationSession& session, const std::function<std::string(Delta&)>& body);
// The same for the choices of one request: body gets each session's output, in order.
void respond_when_all_done(httplib::Response& res, std::span<GenerationSession* const> sessions,
                           const std::function<std::string(std::vector<Delta>&)>& body);

}  // namespace fathom::server
