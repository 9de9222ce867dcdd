// The real tokenizers' own chat templates end to end: every conversation of the fixtures
// (system prompts, tools, tool calls and results, content parts; made by
// scripts/make_tokenizer_fixtures.py with transformers' apply_chat_template) renders byte
// for byte, and the rendering encodes to transformers' ids. Cases transformers raised on
// must raise here too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

#include "text/jinja/chat_template.h"
#include "text/tokenizer_test_util.h"

namespace fathom {
namespace {

using nlohmann::ordered_json;
using testing::show;

// strftime_now as the fixtures pinned it (make_chat_template_fixtures.py: 2024-07-26
// 12:34:56 in TZ=UTC).
std::time_t fixed_clock() { return std::time_t(1721997296); }

class UtcEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("TZ", "UTC", 1);
    tzset();
  }
};
const auto* const kUtc = ::testing::AddGlobalTestEnvironment(new UtcEnvironment);

// The fixture as ordered JSON: key order reaches the prompt (tojson of tool schemas,
// Python's repr of content parts), and testing::fixture() sorts keys.
ordered_json ordered_fixture(const std::string& name) {
  const auto path = std::filesystem::path(FATHOM_TOKENIZER_FIXTURES_DIR) / (name + ".json");
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return ordered_json::parse(s.str());
}

std::vector<std::string> tokenizers_with_chat() {
  std::vector<std::string> names;
  for (const char* n : testing::kSweepTokenizers) names.emplace_back(n);
  return names;
}

class TokenizerChat : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerChat, RendersAndEncodesLikeTransformers) {
  const std::string& name = GetParam();
  const ordered_json fx = ordered_fixture(name);
  if (!fx.contains("chat")) {
    // No template in tokenizer_config.json: the fixture says so and there is nothing to render.
    EXPECT_EQ(fx["meta"]["chat_cases"].get<int>(), 0) << name;
    return;
  }
  const Tokenizer* tok = testing::real_tokenizer(name);
  ASSERT_NE(tok, nullptr);
  const ChatTemplate tmpl = ChatTemplate::from_model_dir(testing::tokenizer_dir(name));
  jinja::RenderOptions options;
  options.clock = fixed_clock;
  int rendered = 0;
  for (const auto& c : fx["chat"]) {
    const ordered_json& req = c["request"];
    const std::string case_name = c["name"];
    const auto tools = req.value("tools", ordered_json());
    const auto kwargs = req.value("chat_template_kwargs", ordered_json::object());
    if (c.contains("rendered")) {
      std::string got;
      try {
        got = tmpl.render(req.at("messages"), tools, req.value("add_generation_prompt", true), kwargs, options);
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " " << case_name << ": transformers rendered it, fathom threw: " << e.what();
        continue;
      }
      const std::string want = c["rendered"];
      EXPECT_EQ(got, want) << name << " " << case_name;
      // Where transformers' tokenizer class replaces tokenizer.json's pipeline its ids are
      // not the reference (testing::reference_is_raw_tokenizers); the fixture tests cover them.
      if (!testing::reference_is_raw_tokenizers(name)) {
        EXPECT_EQ(tok->encode(got, false), c["ids"].get<std::vector<int32_t>>()) << name << " " << case_name << " " << show(got);
      }
      ++rendered;
      continue;
    }
    const std::string type = c["error"]["type"], message = c["error"]["message"];
    try {
      const std::string got = tmpl.render(req.at("messages"), tools, req.value("add_generation_prompt", true), kwargs,
                                          options);
      ADD_FAILURE() << name << " " << case_name << ": transformers raised " << type << ", fathom rendered " << show(got);
    } catch (const jinja::TemplateError& e) {
      if (type == "TemplateError") {  // raise_exception(message)
        EXPECT_EQ(e.kind(), jinja::TemplateError::Kind::Raised) << e.what();
        EXPECT_EQ(e.detail(), message) << name << " " << case_name;
      } else {
        EXPECT_NE(e.kind(), jinja::TemplateError::Kind::Raised) << e.what();
      }
    }
  }
  EXPECT_GE(rendered, 4) << name << ": too few renderings to say the template works";
}

INSTANTIATE_TEST_SUITE_P(Sweep, TokenizerChat, ::testing::ValuesIn(tokenizers_with_chat()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fathom
