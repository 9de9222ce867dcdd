# Tokenizers (tokenizer.json): the fathom_text_tokenizer library, its tests and its
# benchmark. Regexes come from PCRE2 and Unicode data from utf8proc (Debian's
# libpcre2-dev and libutf8proc-dev), found with pkg-config.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)

add_library(fathom_text_tokenizer STATIC
  src/text/tokenizer/utf8.cpp
  src/text/tokenizer/unicode.cpp
  src/text/tokenizer/unicode_scripts.cpp
  src/text/tokenizer/regex.cpp
  src/text/tokenizer/byte_level.cpp
  src/text/tokenizer/split.cpp
  src/text/tokenizer/normalizers.cpp
  src/text/tokenizer/precompiled.cpp
  src/text/tokenizer/pre_tokenizers.cpp
  src/text/tokenizer/model.cpp
  src/text/tokenizer/bpe_model.cpp
  src/text/tokenizer/word_models.cpp
  src/text/tokenizer/unigram_model.cpp
  src/text/tokenizer/added_tokens.cpp
  src/text/tokenizer/post_processors.cpp
  src/text/tokenizer/decoders.cpp
  src/text/tokenizer/tokenizer_config.cpp
  src/text/tokenizer/tokenizer.cpp
  src/text/tokenizer/incremental_detokenizer.cpp
)
target_link_libraries(fathom_text_tokenizer
  PUBLIC fathom_core nlohmann_json::nlohmann_json
  PRIVATE PkgConfig::PCRE2 PkgConfig::UTF8PROC)

# The real tokenizers the tests and the benchmark use: scripts/fetch_tokenizers.sh puts them here.
set(FATHOM_TOKENIZER_CACHE_DIR "${CMAKE_SOURCE_DIR}/.cache/tokenizers")

add_executable(tokenizer_bench bench/tokenizer_bench.cpp)
target_link_libraries(tokenizer_bench PRIVATE fathom_text_tokenizer)
target_compile_definitions(tokenizer_bench PRIVATE
  FATHOM_TOKENIZER_CACHE_DIR="${FATHOM_TOKENIZER_CACHE_DIR}"
  FATHOM_TOKENIZER_FIXTURES_DIR="${CMAKE_SOURCE_DIR}/tests/fixtures/tokenizer")

# FATHOM_BUILD_TESTS is declared after this file is included: undefined means on.
if(NOT DEFINED FATHOM_BUILD_TESTS OR FATHOM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
  file(GLOB FATHOM_TOKENIZER_TEST_SOURCES CONFIGURE_DEPENDS
    "${CMAKE_SOURCE_DIR}/tests/text/tokenizer_*_test.cpp")
  # Two tests need more than the library: the chat templates (the Jinja library) and the
  # CLI (the fathom binary). They are executables of their own so tokenizer_tests stays
  # quick to build.
  list(FILTER FATHOM_TOKENIZER_TEST_SOURCES EXCLUDE REGEX "tokenizer_(chat_template|cli)_test\\.cpp$")
  add_executable(tokenizer_tests ${FATHOM_TOKENIZER_TEST_SOURCES})
  target_include_directories(tokenizer_tests PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(tokenizer_tests PRIVATE fathom_text_tokenizer GTest::gtest_main)
  target_compile_definitions(tokenizer_tests PRIVATE
    FATHOM_TOKENIZER_CACHE_DIR="${FATHOM_TOKENIZER_CACHE_DIR}"
    FATHOM_TOKENIZER_FIXTURES_DIR="${CMAKE_SOURCE_DIR}/tests/fixtures/tokenizer")
  gtest_discover_tests(tokenizer_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)

  # fathom_text_jinja and fathom are defined after this file is included; CMake resolves
  # the names when it generates the build.
  add_executable(tokenizer_chat_tests tests/text/tokenizer_chat_template_test.cpp)
  target_include_directories(tokenizer_chat_tests PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(tokenizer_chat_tests PRIVATE fathom_text_tokenizer fathom_text_jinja GTest::gtest_main)
  target_compile_definitions(tokenizer_chat_tests PRIVATE
    FATHOM_TOKENIZER_CACHE_DIR="${FATHOM_TOKENIZER_CACHE_DIR}"
    FATHOM_TOKENIZER_FIXTURES_DIR="${CMAKE_SOURCE_DIR}/tests/fixtures/tokenizer")
  gtest_discover_tests(tokenizer_chat_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)

  add_executable(tokenizer_cli_tests tests/text/tokenizer_cli_test.cpp)
  target_include_directories(tokenizer_cli_tests PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(tokenizer_cli_tests PRIVATE fathom_text_tokenizer GTest::gtest_main)
  target_compile_definitions(tokenizer_cli_tests PRIVATE
    FATHOM_TOKENIZER_CACHE_DIR="${FATHOM_TOKENIZER_CACHE_DIR}"
    FATHOM_TOKENIZER_FIXTURES_DIR="${CMAKE_SOURCE_DIR}/tests/fixtures/tokenizer"
    FATHOM_BINARY="$<TARGET_FILE:fathom>")
  add_dependencies(tokenizer_cli_tests fathom)
  gtest_discover_tests(tokenizer_cli_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
endif()
