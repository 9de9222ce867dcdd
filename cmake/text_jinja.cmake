# Chat templates: a Jinja2 interpreter (src/text/jinja) and its tests.
add_library(fathom_text_jinja STATIC
  src/text/jinja/unicode.cpp
  src/text/jinja/unicode_tables.cpp
  src/text/jinja/budget.cpp
  src/text/jinja/value.cpp
  src/text/jinja/pyformat.cpp
  src/text/jinja/lexer.cpp
  src/text/jinja/parser.cpp
  src/text/jinja/eval.cpp
  src/text/jinja/render.cpp
  src/text/jinja/ops.cpp
  src/text/jinja/methods.cpp
  src/text/jinja/filters.cpp
  src/text/jinja/tests.cpp
  src/text/jinja/globals.cpp
  src/text/jinja/template.cpp
  src/text/jinja/chat_template.cpp
)
target_include_directories(fathom_text_jinja PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(fathom_text_jinja PUBLIC fathom_core nlohmann_json::nlohmann_json)

# Declared here too because this file is included before the top level declares it.
option(FATHOM_BUILD_TESTS "Build the tests" ON)
if(FATHOM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
  file(GLOB FATHOM_JINJA_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/text/jinja_*_test.cpp)
  add_executable(jinja_tests ${FATHOM_JINJA_TEST_SOURCES})
  target_include_directories(jinja_tests PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(jinja_tests PRIVATE fathom_text_jinja GTest::gtest_main)
  target_compile_definitions(jinja_tests PRIVATE
    FATHOM_CHAT_TEMPLATE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures/chat_template")
  gtest_discover_tests(jinja_tests DISCOVERY_TIMEOUT 60)
endif()
