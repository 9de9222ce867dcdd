#pragma once
// The chat page at / (src/server/webui/): GET / and each embedded file.
#include <httplib.h>

#include <string>

namespace fathom::server {

void add_webui_routes(httplib::Server& http);
// The page's own files are public (the page itself asks for the API key
// when the API answers 401); everything else keeps requiring it.
bool is_webui_path(const std::string& path);

}  // namespace fathom::server
