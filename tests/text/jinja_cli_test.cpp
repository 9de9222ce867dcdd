// `fathom chat-template --model DIR --request FILE.json` prints the fixture's
// expected prompt byte for byte. Skipped when the fathom binary is not built or
// does not have the chat-template command yet.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

namespace {

namespace fs = std::filesystem;

#ifdef FATHOM_BINARY
const char* const kBinary = FATHOM_BINARY;
#else
const char* const kBinary = "";
#endif
const fs::path kFixtures = FATHOM_CHAT_TEMPLATE_FIXTURES;

struct CommandResult {
  int status = -1;
  std::string out;
};

CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void skip_without_command() {
  if (!fs::exists(kBinary)) GTEST_SKIP() << "fathom binary not built: " << kBinary;
  if (run_command(std::string(kBinary) + " chat-template --help >/dev/null 2>&1").status != 0)
    GTEST_SKIP() << "this fathom binary has no chat-template command";
}

TEST(ChatTemplateCli, PrintsFixturePromptsExactly) {
  skip_without_command();
  if (IsSkipped()) return;
  int checked = 0;
  for (const char* name : {"qwen3", "llama3_1", "gemma3"}) {
    for (const auto& f : fs::directory_iterator(kFixtures / name / "cases")) {
      const std::string file = f.path().filename().string();
      if (file.find(".request.json") == std::string::npos) continue;
      const std::string stem = f.path().string().substr(0, f.path().string().size() - std::string(".request.json").size());
      if (!fs::exists(stem + ".expected.txt")) continue;
      const CommandResult r = run_command("TZ=UTC '" + std::string(kBinary) + "' chat-template --model '" + (kFixtures / name).string() +
                        "' --request '" + f.path().string() + "' 2>&1");
      EXPECT_EQ(r.status, 0) << file << ": " << r.out;
      EXPECT_EQ(r.out, read_file(stem + ".expected.txt")) << name << "/" << file;
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

TEST(ChatTemplateCli, TemplateErrorsAreCleanErrors) {
  skip_without_command();
  if (IsSkipped()) return;
  const fs::path request = kFixtures / "gemma3" / "cases" / "10_error_roles_not_alternating.request.json";
  const CommandResult r = run_command("'" + std::string(kBinary) + "' chat-template --model '" + (kFixtures / "gemma3").string() +
                    "' --request '" + request.string() + "' 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("Conversation roles must alternate"), std::string::npos) << r.out;
}

}  // namespace
