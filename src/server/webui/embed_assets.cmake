# Writes OUT, a C++ source that holds each file of FILES (names in DIR,
# separated by commas) as bytes with its URL path and content type, for
# server/webui/assets.h. Run by the build (webui.cmake) whenever a file changes:
#   cmake -DDIR=src/server/webui -DOUT=webui_assets.cpp -DFILES=index.html,app.js -P embed_assets.cmake
string(REPLACE "," ";" files "${FILES}")
set(arrays "")
set(table "")
set(i 0)
foreach(name IN LISTS files)
  if(name MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(name MATCHES "\\.css$")
    set(type "text/css; charset=utf-8")
  elseif(name MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  elseif(name MATCHES "\\.svg$")
    set(type "image/svg+xml")
  else()
    message(FATAL_ERROR "embed_assets: no content type for ${name}")
  endif()
  file(READ "${DIR}/${name}" hex HEX)
  string(LENGTH "${hex}" digits)
  math(EXPR size "${digits} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  # A trailing 0 keeps an empty file a valid array; `size` leaves it out.
  string(APPEND arrays "const unsigned char asset_${i}[] = {${bytes}0};\n")
  string(APPEND table "    {\"/${name}\", \"${type}\", {reinterpret_cast<const char*>(asset_${i}), ${size}}},\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE "${OUT}.tmp"
  "// Generated from src/server/webui/ by embed_assets.cmake; do not edit.\n"
  "#include \"server/webui/assets.h\"\n\n"
  "namespace fathom::server {\nnamespace {\n${arrays}}  // namespace\n\n"
  "std::span<const WebAsset> web_assets() {\n  static const WebAsset assets[] = {\n${table}  };\n  return assets;\n}\n\n"
  "}  // namespace fathom::server\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
