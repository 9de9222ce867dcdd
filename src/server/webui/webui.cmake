# The chat page (src/server/webui/), compiled into fathom_server: its files
# become byte arrays in a generated source, so `fathom serve` needs nothing
# installed beside the binary and fetches nothing at run time.
set(FATHOM_WEBUI_FILES index.html style.css app.js api.js markdown.js message_view.js status_panel.js)
set(_webui_dir ${CMAKE_CURRENT_LIST_DIR})
set(_webui_out ${CMAKE_CURRENT_BINARY_DIR}/generated/webui_assets.cpp)
list(TRANSFORM FATHOM_WEBUI_FILES PREPEND "${_webui_dir}/" OUTPUT_VARIABLE _webui_paths)
string(REPLACE ";" "," _webui_names "${FATHOM_WEBUI_FILES}")
add_custom_command(OUTPUT ${_webui_out}
  COMMAND ${CMAKE_COMMAND} -DDIR=${_webui_dir} -DOUT=${_webui_out} -DFILES=${_webui_names}
          -P ${_webui_dir}/embed_assets.cmake
  DEPENDS ${_webui_paths} ${_webui_dir}/embed_assets.cmake
  COMMENT "Embedding the chat page (src/server/webui)"
  VERBATIM)
target_sources(fathom_server PRIVATE ${_webui_out} ${_webui_dir}/webui_routes.cpp)
