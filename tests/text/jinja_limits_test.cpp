// Hostile templates and variables: every rendering is bounded by RenderLimits (steps,
// output size, the size of any one value, nesting, deadline, cancellation) and the
// parser by its nesting depth. Each limit fails with a TemplateError of Kind::Limit (or
// Syntax for the parser) that names the limit, quickly and without big allocations.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "text/jinja/chat_template.h"
#include "text/jinja/template.h"

namespace {

using fathom::jinja::RenderOptions;
using fathom::jinja::Template;
using fathom::jinja::TemplateError;
using Clock = std::chrono::steady_clock;

// Renders and returns the error; fails the test if nothing is thrown.
TemplateError render_error(const std::string& source, const RenderOptions& options = {},
                           const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  try {
    const std::string out = Template(source).render(vars, options);
    ADD_FAILURE() << "expected an error from " << source << ", got " << out.size() << " bytes";
  } catch (const TemplateError& e) {
    return e;
  }
  return TemplateError(TemplateError::Kind::Render, "none", {}, "no error");
}

TemplateError parse_error(const std::string& source) {
  try {
    Template t(source);
    ADD_FAILURE() << "expected a syntax error from a template of " << source.size() << " bytes";
  } catch (const TemplateError& e) {
    return e;
  }
  return TemplateError(TemplateError::Kind::Render, "none", {}, "no error");
}

#define EXPECT_LIMIT(error, part)                                                             \
  do {                                                                                        \
    const TemplateError& e_ = (error);                                                        \
    EXPECT_EQ(e_.kind(), TemplateError::Kind::Limit) << e_.what();                            \
    EXPECT_NE(std::string(e_.what()).find(part), std::string::npos) << "message: " << e_.what(); \
  } while (0)

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

TEST(JinjaLimits, NestedLoopsStopAtTheStepBudget) {
  const auto t0 = Clock::now();
  const TemplateError e =
      render_error("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}");
  EXPECT_LIMIT(e, "template rendering exceeded 10000000 steps");
  EXPECT_EQ(e.pos().line, 1);
  EXPECT_LT(seconds_since(t0), 20.0);

  RenderOptions small;
  small.max_steps = 1000;
  EXPECT_LIMIT(render_error("{% for i in range(100000) %}{% endfor %}", small), "exceeded 1000 steps");
  // Within the budget, the same loop renders.
  EXPECT_EQ(Template("{% for i in range(100) %}{% endfor %}ok").render(nlohmann::ordered_json::object(), small), "ok");
}

TEST(JinjaLimits, BulkWorkIsCharged) {
  // One expression, but each evaluation iterates 100000 items: the steps count the items.
  RenderOptions o;
  o.max_steps = 1'000'000;
  EXPECT_LIMIT(render_error("{% set l = range(100000)|list %}{% for i in range(1000) %}{{ l|sum }}{% endfor %}", o),
               "exceeded 1000000 steps");
  // Copying a big string is charged by its size.
  EXPECT_LIMIT(render_error("{% set s = 'a' * 10000000 %}{% for i in range(100000) %}{% if s %}{% endif %}{% endfor %}"),
               "exceeded 10000000 steps");
}

TEST(JinjaLimits, StringRepetitionIsCheckedBeforeAllocating) {
  const TemplateError e = render_error("{{ 'a' * 10**12 }}");
  EXPECT_LIMIT(e, "string repetition (*) of 1000000000000 bytes exceeds the template limit of 16777216 bytes");
  EXPECT_LIMIT(render_error("{{ 10**12 * 'ab' }}"), "string repetition");
  EXPECT_LIMIT(render_error("{{ 'ab' * 9223372036854775807 }}"), "string repetition");
  RenderOptions o;
  o.max_value_bytes = 100;
  EXPECT_LIMIT(render_error("{{ 'a' * 101 }}", o), "exceeds the template limit of 100 bytes");
  EXPECT_EQ(Template("{{ 'a' * 100 }}").render(nlohmann::ordered_json::object(), o), std::string(100, 'a'));
}

TEST(JinjaLimits, ListsAreBounded) {
  EXPECT_LIMIT(render_error("{{ ([1] * 10**9)|length }}"), "list repetition (*)");
  // The strings a list holds count: a few big strings repeated.
  EXPECT_LIMIT(render_error("{% set s = 'a' * 1000000 %}{{ ([s] * 100)|length }}"), "list repetition (*)");
  EXPECT_LIMIT(render_error("{% set s = ['a' * 10000000] %}{{ (s + s)|length }}"), "list concatenation (+)");
  EXPECT_LIMIT(render_error("{{ [1]|batch(10**12, 0)|list }}"), "batch");
  EXPECT_LIMIT(render_error("{{ [1]|slice(10**12)|list }}"), "slice");
}

TEST(JinjaLimits, AmplifyingStringOperationsAreBounded) {
  EXPECT_LIMIT(render_error("{{ range(100000)|join('a' * 1000000) }}"), "a join");
  EXPECT_LIMIT(render_error("{{ ('a' * 1000000).join(['x'] * 100) }}"), "a join");
  EXPECT_LIMIT(render_error("{{ ('a' * 1000000).replace('a', 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb') }}"),
               "a replaced string");
  EXPECT_LIMIT(render_error("{{ ('a' * 100000).replace('', 'b' * 1000) }}"), "a replaced string");
  EXPECT_LIMIT(render_error("{{ 'x'.center(10**12) }}"), "a padded string");
  EXPECT_LIMIT(render_error("{{ 'x'|center(10**12) }}"), "a padded string");
  EXPECT_LIMIT(render_error("{{ 'x'.zfill(10**12) }}"), "a zero-padded string");
  EXPECT_LIMIT(render_error("{{ 'x'|indent(10**12, true) }}"), "an indentation");
  EXPECT_LIMIT(render_error("{{ ('a\\n' * 1000000)|indent(100) }}"), "an indented string");
  EXPECT_LIMIT(render_error("{{ [1]|tojson(indent=10**12) }}"), "a tojson indent");
  EXPECT_LIMIT(render_error("{{ '%2000000000s' % 'x' }}"), "a formatted field");
  EXPECT_LIMIT(render_error("{{ '{:>2000000000}'.format('x') }}"), "a formatted field");
  // A width too long for an int saturates rather than overflowing, then fails the same check.
  EXPECT_LIMIT(render_error("{{ '%99999999999999999999999s' % 'x' }}"), "a formatted field");
  EXPECT_LIMIT(render_error("{{ 'a' * 10000000 ~ 'b' * 10000000 }}"), "string concatenation (~)");
  EXPECT_LIMIT(render_error("{{ 'a' * 10000000 + 'b' * 10000000 }}"), "string concatenation (+)");
  // snprintf would pad or compute these digits before failing.
  EXPECT_EQ(render_error("{{ '%2000000000d' % 1 }}").kind(), TemplateError::Kind::Unsupported);
  EXPECT_EQ(render_error("{{ '{:.2000000000f}'.format(1.5) }}").kind(), TemplateError::Kind::Unsupported);
}

TEST(JinjaLimits, TextFormsOfSharedListsAreBounded) {
  // [l] * 10000 shares l's storage (cheap), but its repr or JSON would be 10000 copies of 1 MB.
  const std::string setup = "{% set l = ['a' * 1000000] %}{% set l2 = [l] * 10000 %}";
  EXPECT_LIMIT(render_error(setup + "{{ l2 }}"), "the text form of a list");
  EXPECT_LIMIT(render_error(setup + "{{ l2|tojson }}"), "the JSON text of a value");
  EXPECT_LIMIT(render_error(setup + "{{ l2|string|length }}"), "the text form of a list");
}

TEST(JinjaLimits, OutputIsBounded) {
  EXPECT_LIMIT(render_error("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"),
               "template output exceeded 16777216 bytes");
  RenderOptions o;
  o.max_output_bytes = 10;
  EXPECT_LIMIT(render_error("{% for i in range(11) %}x{% endfor %}", o), "template output exceeded 10 bytes");
  EXPECT_EQ(Template("{% for i in range(10) %}x{% endfor %}").render(nlohmann::ordered_json::object(), o),
            "xxxxxxxxxx");
  // Captured output (a macro's or {% set %} block's) is bounded too.
  EXPECT_LIMIT(render_error("{% set x %}{% for i in range(100) %}yy{% endfor %}{% endset %}", o),
               "template output exceeded 10 bytes");
}

TEST(JinjaLimits, DeadlineStopsRendering) {
  RenderOptions o;
  o.max_steps = UINT64_MAX;
  o.deadline = Clock::now() + std::chrono::milliseconds(50);
  const auto t0 = Clock::now();
  EXPECT_LIMIT(render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", o),
               "template rendering ran past its deadline");
  EXPECT_LT(seconds_since(t0), 5.0);
  // A deadline already past stops at the first poll.
  o.deadline = Clock::now() - std::chrono::seconds(1);
  EXPECT_LIMIT(render_error("{% for i in range(100000) %}{% endfor %}", o), "deadline");
  // A far deadline does not disturb a normal rendering.
  o.deadline = Clock::now() + std::chrono::hours(1);
  EXPECT_EQ(Template("{{ 1 + 1 }}").render(nlohmann::ordered_json::object(), o), "2");
}

TEST(JinjaLimits, CancellationStopsRendering) {
  std::atomic<bool> client_gone{false};
  RenderOptions o;
  o.max_steps = UINT64_MAX;
  o.cancelled = [&] { return client_gone.load(); };
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    client_gone = true;
  });
  const auto t0 = Clock::now();
  const TemplateError e =
      render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", o);
  canceller.join();
  EXPECT_LIMIT(e, "template rendering was cancelled");
  EXPECT_LT(seconds_since(t0), 5.0);
}

TEST(JinjaLimits, RecursionIsBounded) {
  EXPECT_NE(std::string(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").what())
                .find("maximum recursion depth exceeded"),
            std::string::npos);
  // Deep expressions inside deep recursion: the evaluation depth limit bounds the native stack.
  const std::string deep = "n" + repeat(" + 0", 300);  // 300 levels to evaluate, a flat loop to parse
  RenderOptions o;
  o.max_depth = 500;
  EXPECT_LIMIT(render_error("{% macro f(n) %}{{ f(" + deep + " + 1) }}{% endmacro %}{{ f(0) }}", o),
               "template rendering nested deeper than 500 levels");
  // Nested statements deep inside recursion hit the same bound.
  const std::string ifs = repeat("{% if true %}", 100) + "{{ f(n + 1) }}" + repeat("{% endif %}", 100);
  EXPECT_LIMIT(render_error("{% macro f(n) %}" + ifs + "{% endmacro %}{{ f(0) }}"),
               "template rendering nested deeper than 2000 levels");
}

TEST(JinjaLimits, ParserNestingIsBounded) {
  const size_t n = 100000;
  EXPECT_NE(std::string(parse_error("{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}").what())
                .find("expression nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("{{ " + std::string(n, '[') + std::string(n, ']') + " }}").what())
                .find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("{{ " + repeat("{'a': ", n) + "1" + std::string(n, '}') + " }}").what())
                .find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("{{ " + repeat("not ", n) + "1 }}").what()).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("{{ " + repeat("-", n) + "1 }}").what()).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error(repeat("{% if true %}", n) + repeat("{% endif %}", n)).what())
                .find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("{% for " + std::string(n, '(') + "a" + std::string(n, ')') + " in x %}{% endfor %}")
                            .what())
                .find("assignment target nested too deeply"),
            std::string::npos);
  // Left-deep chains are parsed by loops but nest the tree (and its evaluation) as deeply.
  EXPECT_NE(std::string(parse_error("{{ 1" + repeat(" + 1", n) + " }}").what()).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("{{ 1" + repeat(" * 1", n) + " }}").what()).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("{{ x" + repeat("|e", n) + " }}").what()).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("{{ x" + repeat(".a", n) + " }}").what()).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("{{ x" + repeat("[0]", n) + " }}").what()).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("{{ x" + repeat(" or x", n) + " }}").what()).find("nested too deeply"),
            std::string::npos);
  // Moderate nesting still parses and renders.
  EXPECT_EQ(Template("{{ 1" + repeat(" + 1", 200) + " }}").render(nlohmann::ordered_json::object()), "201");
  EXPECT_EQ(Template("{{ " + std::string(100, '(') + "1" + std::string(100, ')') + " }}")
                .render(nlohmann::ordered_json::object()),
            "1");
  EXPECT_EQ(Template(repeat("{% if true %}", 100) + "x" + repeat("{% endif %}", 100)).render(nlohmann::ordered_json::object()),
            "x");
}

TEST(JinjaLimits, DeepVariablesAreRefusedNotOverflowed) {
  const size_t n = 100000;
  auto vars = nlohmann::ordered_json::object();
  vars["x"] = nlohmann::ordered_json::parse(std::string(n, '[') + std::string(n, ']'));  // moved, not copied
  try {
    Template("{{ x }}").render(vars);
    ADD_FAILURE() << "a 100000-deep variable rendered";
  } catch (const fathom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 500 levels"), std::string::npos) << e.what();
  }
  // The same through ChatTemplate, as the server calls it.
  auto messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "user"}});
  messages[0]["content"] = std::move(vars["x"]);
  try {
    fathom::ChatTemplate("{{ messages }}").render(messages, nullptr, true, nlohmann::ordered_json::object());
    ADD_FAILURE() << "a 100000-deep message rendered";
  } catch (const fathom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 500 levels"), std::string::npos) << e.what();
  }
  // Up to the nesting limit, values convert and tojson round-trips them.
  const auto ok = nlohmann::ordered_json::parse(std::string(400, '[') + std::string(400, ']'));
  EXPECT_EQ(Template("{{ x|tojson }}").render(nlohmann::ordered_json{{"x", ok}}), ok.dump());
  // A template cannot build deeper ones either.
  EXPECT_NE(std::string(render_error("{% set ns = namespace(v=1) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}"
                                     "{% endfor %}")
                            .what())
                .find("nested deeper than 500 levels"),
            std::string::npos);
}

TEST(JinjaLimits, ChainsThroughObjectsDoNotOverflowTheStack) {
  // Namespaces, loops and bound methods can hold each other: a chain of them nests like
  // containers do, so it stops at the nesting limit instead of growing until printing or
  // freeing it overflows the stack.
  const char* const chains[] = {
      "{% set ns = namespace(v=none) %}{% for i in range(100000) %}{% set ns.v = namespace(x=[ns.v]) %}{% endfor %}",
      "{% set ns = namespace(v=none) %}{% for i in range(100000) %}{% set ns.v = [ns.v].count %}{% endfor %}",
      "{% set ns = namespace(v=none) %}{% for i in range(100000) %}{% for l in [ns.v] %}{% set ns.v = loop %}"
      "{% endfor %}{% endfor %}",
  };
  for (const char* chain : chains) {
    EXPECT_NE(std::string(render_error(chain).what()).find("nested deeper than 500 levels"), std::string::npos)
        << chain;
  }
  // A namespace that holds itself prints as an error, not a crash.
  EXPECT_NE(std::string(render_error("{% set ns = namespace(v=1) %}{% set ns.v = [ns] %}{{ ns }}").what())
                .find("maximum recursion depth"),
            std::string::npos);
}

TEST(JinjaLimits, RealTemplatesRenderWellWithinTheDefaults) {
  // Qwen3's template with 200 turns of 20 KB each (4 MB of prompt) and a tool.
  const std::filesystem::path dir = std::filesystem::path(FATHOM_CHAT_TEMPLATE_FIXTURES) / "qwen3";
  const fathom::ChatTemplate tmpl = fathom::ChatTemplate::from_model_dir(dir.string());
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  const std::string content = repeat("The quick brown fox jumps over the lazy dog. ", 450);
  for (int i = 0; i < 200; ++i)
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", content}});
  nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}])");
  const auto t0 = Clock::now();
  const std::string out = tmpl.render(messages, tools, true, nlohmann::ordered_json::object());
  EXPECT_GT(out.size(), content.size() * 200);
  EXPECT_LT(seconds_since(t0), 10.0);
}

}  // namespace
