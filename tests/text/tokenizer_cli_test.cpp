// fathom tokenize / detokenize on real tokenizers of the sweep: an empty id list decodes
// to "" (Hugging Face decodes [] to ""), an empty text encodes to no ids, and malformed
// lists are still errors naming the flag.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "text/tokenizer_test_util.h"

namespace fathom {
namespace {

std::pair<int, std::string> run(const std::string& args) {
  FILE* pipe = ::popen((std::string(FATHOM_BINARY) + " " + args + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, out};
}

nlohmann::json last_json_line(const std::string& out) {
  const size_t end = out.find_last_not_of('\n');
  const size_t start = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end + 1));
}

TEST(TokenizerCli, EmptyIdListDecodesToEmptyText) {
  for (const char* name : {"llama2", "deepseek_v3"}) {
    const std::string model = testing::tokenizer_dir(name);
    auto [code, out] = run("detokenize --model " + model + " --ids ''");
    ASSERT_EQ(code, 0) << name << ": " << out;
    EXPECT_EQ(last_json_line(out), (nlohmann::json{{"text", ""}})) << out;
    auto [skip_code, skip_out] = run("detokenize --model " + model + " --skip-special --ids ''");
    ASSERT_EQ(skip_code, 0) << skip_out;
    EXPECT_EQ(last_json_line(skip_out), (nlohmann::json{{"text", ""}})) << skip_out;
  }
}

TEST(TokenizerCli, EmptyTextAndRoundTrip) {
  const std::string model = testing::tokenizer_dir("deepseek_v3");
  auto [code, out] = run("tokenize --model " + model + " --text ''");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(last_json_line(out), (nlohmann::json{{"ids", nlohmann::json::array()}})) << out;
  auto [ecode, eout] = run("tokenize --model " + model + " --text 'Hello, world!'");
  ASSERT_EQ(ecode, 0) << eout;
  EXPECT_EQ(last_json_line(eout)["ids"], (nlohmann::json{19923, 14, 2058, 3}));
  auto [dcode, dout] = run("detokenize --model " + model + " --ids 19923,14,2058,3");
  ASSERT_EQ(dcode, 0) << dout;
  EXPECT_EQ(last_json_line(dout)["text"], "Hello, world!");
}

TEST(TokenizerCli, MalformedIdListsAreStillErrors) {
  const std::string model = testing::tokenizer_dir("llama2");
  for (const char* ids : {"1,,2", "1,", "x", "1,2,99999999"}) {
    auto [code, out] = run("detokenize --model " + model + " --ids '" + ids + "'");
    EXPECT_NE(code, 0) << ids << ": " << out;
    EXPECT_NE(out.find(std::string(ids) == "1,2,99999999" ? "99999999" : "--ids"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace fathom
