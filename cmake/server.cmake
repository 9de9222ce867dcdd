# The HTTP server (`fathom serve`): OpenAI and Anthropic APIs over cpp-httplib.
# Debian's libcpp-httplib-dev ships a compiled library; its pkg-config file
# carries the defines (OpenSSL/zlib/brotli support) the header must see.
find_package(PkgConfig REQUIRED)
pkg_check_modules(CPP_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)

add_library(fathom_server STATIC
  src/server/metrics.cpp
  src/server/bounded_json.cpp
  src/server/bounded_http_server.cpp
  src/server/engine_worker.cpp
  src/server/reasoning.cpp
  src/server/tool_calls.cpp
  src/server/tool_call_stream.cpp
  src/server/structured_output.cpp
  src/server/responses_request.cpp
  src/server/responses_routes.cpp
  src/server/response_store.cpp
  src/server/request_parsing.cpp
  src/server/server_context.cpp
  src/server/generation_session.cpp
  src/server/sse.cpp
  src/server/http_errors.cpp
  src/server/deferred_response.cpp
  src/server/openai_routes.cpp
  src/server/anthropic_routes.cpp
  src/server/status_route.cpp
  src/server/token_routes.cpp
  src/server/http_server.cpp
)
target_include_directories(fathom_server PUBLIC ${CMAKE_CURRENT_LIST_DIR}/../src)
target_link_libraries(fathom_server PUBLIC fathom_core fathom_text fathom_text_jinja fathom_grammar PkgConfig::CPP_HTTPLIB)

set(FATHOM_SERVER_SOURCES src/cli/cmd_serve.cpp)
set(FATHOM_SERVER_LIBS fathom_server)

if(NOT DEFINED FATHOM_BUILD_TESTS OR FATHOM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
  enable_testing()
  add_executable(server_tests
    tests/server/tool_calls_test.cpp
    tests/server/tool_call_stream_test.cpp
    tests/server/reasoning_test.cpp
    tests/server/request_parsing_test.cpp
    tests/server/metrics_test.cpp
    tests/server/bounded_json_test.cpp
    tests/server/responses_test.cpp
  )
  target_include_directories(server_tests PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../tests)
  target_link_libraries(server_tests PRIVATE fathom_server GTest::gtest_main)
  gtest_discover_tests(server_tests DISCOVERY_TIMEOUT 60)
endif()
