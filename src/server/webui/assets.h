#pragma once
// The chat page's files, compiled into the binary (webui.cmake generates the
// definition of web_assets() from the files in this folder).
#include <span>
#include <string_view>

namespace fathom::server {

struct WebAsset {
  std::string_view path;          // "/app.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
};

std::span<const WebAsset> web_assets();

}  // namespace fathom::server
