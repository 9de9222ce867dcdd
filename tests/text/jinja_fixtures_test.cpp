// Every chat-template fixture (made by scripts/make_chat_template_fixtures.py
// with transformers' apply_chat_template) must render byte for byte; cases
// where transformers raised must raise here too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "text/jinja/chat_template.h"

namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = FATHOM_CHAT_TEMPLATE_FIXTURES;
const std::vector<std::string> kPrimary = {"qwen3", "llama3_1", "gemma3"};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

struct FixtureCase {
  std::string template_name;
  std::string case_name;
  fs::path stem;  // .../cases/NN_name
};

std::vector<FixtureCase> list_cases() {
  std::vector<FixtureCase> cases;
  if (!fs::is_directory(kFixtures)) return cases;
  for (const auto& dir : fs::directory_iterator(kFixtures)) {
    if (!dir.is_directory() || !fs::exists(dir.path() / "cases")) continue;
    for (const auto& f : fs::directory_iterator(dir.path() / "cases")) {
      const std::string file = f.path().filename().string();
      const std::string suffix = ".request.json";
      if (file.size() <= suffix.size() || file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string case_name = file.substr(0, file.size() - suffix.size());
      cases.push_back({dir.path().filename().string(), case_name, f.path().parent_path() / case_name});
    }
  }
  std::sort(cases.begin(), cases.end(), [](const FixtureCase& a, const FixtureCase& b) {
    return std::tie(a.template_name, a.case_name) < std::tie(b.template_name, b.case_name);
  });
  return cases;
}

std::time_t fixed_clock() {
  static const std::time_t t = [] {
    const auto info = nlohmann::ordered_json::parse(read_file(kFixtures / "fixtures.json"));
    return std::time_t(info.at("strftime_now_epoch_utc").get<int64_t>());
  }();
  return t;
}

// strftime_now renders local time; the fixtures were made with TZ=UTC.
class UtcEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("TZ", "UTC", 1);
    tzset();
  }
};
const auto* const kUtc = ::testing::AddGlobalTestEnvironment(new UtcEnvironment);

std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  std::ostringstream s;
  s << "first difference at byte " << i << " (got " << got.size() << " bytes, want " << want.size() << ")\n"
    << "  got:  ..." << nlohmann::json(got.substr(from, 120)).dump() << "\n"
    << "  want: ..." << nlohmann::json(want.substr(from, 120)).dump();
  return s.str();
}

class ChatTemplateFixture : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(ChatTemplateFixture, RendersExactly) {
  const FixtureCase& c = GetParam();
  const fathom::ChatTemplate tmpl = fathom::ChatTemplate::from_model_dir((kFixtures / c.template_name).string());
  const auto request = nlohmann::ordered_json::parse(read_file(c.stem.string() + ".request.json"));
  const auto tools = request.value("tools", nlohmann::ordered_json());
  const bool add_generation_prompt = request.value("add_generation_prompt", true);
  const auto kwargs = request.value("chat_template_kwargs", nlohmann::ordered_json::object());
  fathom::jinja::RenderOptions options;
  options.clock = fixed_clock;

  const fs::path expected = c.stem.string() + ".expected.txt";
  if (fs::exists(expected)) {
    std::string got;
    try {
      got = tmpl.render(request.at("messages"), tools, add_generation_prompt, kwargs, options);
    } catch (const std::exception& e) {
      FAIL() << "transformers rendered this case, fathom threw: " << e.what();
    }
    const std::string want = read_file(expected);
    EXPECT_TRUE(got == want) << first_difference(got, want);
    return;
  }
  const auto error = nlohmann::ordered_json::parse(read_file(c.stem.string() + ".expected_error.json"));
  try {
    const std::string got = tmpl.render(request.at("messages"), tools, add_generation_prompt, kwargs, options);
    FAIL() << "transformers raised " << error.dump() << ", fathom rendered " << nlohmann::json(got).dump();
  } catch (const fathom::jinja::TemplateError& e) {
    if (error.value("type", "") == "TemplateError") {  // raise_exception(message)
      EXPECT_EQ(e.kind(), fathom::jinja::TemplateError::Kind::Raised) << e.what();
      EXPECT_EQ(e.detail(), error.value("message", "")) << e.what();
    } else {
      EXPECT_NE(e.kind(), fathom::jinja::TemplateError::Kind::Raised) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transformers, ChatTemplateFixture, ::testing::ValuesIn(list_cases()),
                         [](const ::testing::TestParamInfo<FixtureCase>& info) {
                           std::string name = info.param.template_name + "__" + info.param.case_name;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

TEST(ChatTemplateFixtures, EveryPrimaryTemplateHasTenRenderings) {
  std::map<std::string, int> renderings;
  for (const auto& c : list_cases())
    if (fs::exists(c.stem.string() + ".expected.txt")) ++renderings[c.template_name];
  for (const auto& name : kPrimary) EXPECT_GE(renderings[name], 10) << name;
}

TEST(ChatTemplateFixtures, MadeByTransformers) {
  const auto info = nlohmann::ordered_json::parse(read_file(kFixtures / "fixtures.json"));
  EXPECT_EQ(info.value("transformers", "").rfind("5.", 0), 0u) << info.dump(2);
  for (const auto& name : kPrimary) {
    ASSERT_TRUE(info["templates"].contains(name)) << name;
    EXPECT_NE(info["templates"][name].value("renderer", "").find("apply_chat_template"), std::string::npos) << name;
  }
}

TEST(ChatTemplateFixtures, FromModelDirReadsSpecialTokens) {
  const fathom::ChatTemplate llama = fathom::ChatTemplate::from_model_dir((kFixtures / "llama3_1").string());
  EXPECT_EQ(llama.special_tokens().value("bos_token", ""), "<|begin_of_text|>");
  EXPECT_EQ(llama.special_tokens().value("eos_token", ""), "<|eot_id|>");
  const fathom::ChatTemplate qwen = fathom::ChatTemplate::from_model_dir((kFixtures / "qwen3").string());
  EXPECT_FALSE(qwen.special_tokens().contains("bos_token"));  // null in Qwen3's config: undefined in the template
  EXPECT_EQ(qwen.special_tokens().value("eos_token", ""), "<|im_end|>");
  const fathom::ChatTemplate gemma = fathom::ChatTemplate::from_model_dir((kFixtures / "gemma3").string());
  EXPECT_EQ(gemma.special_tokens().value("boi_token", ""), "<start_of_image>");  // model-specific *_token
}

}  // namespace
