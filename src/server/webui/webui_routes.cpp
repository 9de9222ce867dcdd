#include "server/webui/webui_routes.h"

#include "server/webui/assets.h"

namespace fathom::server {

namespace {

// Defense in depth beside the page's own escaping: only the page's files may
// run or style it, it talks only to this server, and no other site may frame it.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const WebAsset* find_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const WebAsset& asset : web_assets())
    if (asset.path == path) return &asset;
  return nullptr;
}

// httplib matches routes as regular expressions: escape the dots of file names.
std::string exact_pattern(std::string_view path) {
  std::string out;
  for (char c : path) {
    if (c == '.') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

bool is_webui_path(const std::string& path) { return find_asset(path) != nullptr; }

void add_webui_routes(httplib::Server& http) {
  auto serve = [](const httplib::Request& req, httplib::Response& res) {
    const WebAsset* asset = find_asset(req.path);
    res.set_header("Content-Security-Policy", kContentSecurityPolicy);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    // Revalidate every load: a restarted server may carry a newer page.
    res.set_header("Cache-Control", "no-cache");
    res.set_content(asset->body.data(), asset->body.size(), std::string(asset->content_type));
  };
  http.Get("/", serve);
  for (const WebAsset& asset : web_assets()) http.Get(exact_pattern(asset.path), serve);
}

}  // namespace fathom::server
