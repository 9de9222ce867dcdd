// The Jinja language as transformers renders chat templates: whitespace
// control, expressions with Python semantics, loops and scoping, macros,
// namespaces, filters, tests, methods, undefined values and tojson; then
// errors (with positions), unsupported constructs and generator semantics.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "text/jinja/template.h"

namespace {

using fathom::jinja::Template;
using fathom::jinja::TemplateError;

const char* const kVars = R"JSON({"s": "Hello World", "n": 42, "f": 3.5, "t": true, "no": null, "l": [3, 1, 2], "sl": ["b", "A", "c", "a"], "d": {"b": 1, "a": 2}, "u": "héllo wörld ß", "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": " hi "}, {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1, "y": "é"}}}]}]})JSON";

std::string render(const std::string& source, const std::string& vars_json) {
  return Template(source).render(nlohmann::ordered_json::parse(vars_json));
}

#define EXPECT_RENDER(source, vars, expected)                                          \
  do {                                                                                \
    try {                                                                             \
      EXPECT_EQ(render(source, vars), std::string(expected)) << "template: " << source; \
    } catch (const std::exception& e) {                                               \
      ADD_FAILURE() << "template: " << source << "\n threw: " << e.what();            \
    }                                                                                 \
  } while (0)

// Renders and returns the error; fails the test if nothing is thrown.
TemplateError render_error(const std::string& source, const std::string& vars = "{}") {
  try {
    const std::string out = render(source, vars);
    ADD_FAILURE() << "expected an error from " << source << ", got " << out;
  } catch (const TemplateError& e) {
    return e;
  }
  return TemplateError(TemplateError::Kind::Render, "none", {}, "no error");
}

// Generated expectations: every expected string below is what Jinja2 3.1.6 renders
// with transformers' settings (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols, {% generation %}, transformers' tojson).

TEST(JinjaLanguage, WhitespaceControl) {
  EXPECT_RENDER("a  \n  {% if true %}  \n  x  \n  {% endif %}  \n  b", "{}",
                "a  \n  \n  x  \n  \n  b");
  EXPECT_RENDER("a  \n  {%- if true -%}  \n  x  \n  {%- endif -%}  \n  b", "{}",
                "axb");
  EXPECT_RENDER("a  \n  {%+ if true +%}  \n  x  \n  {% endif %}\nb", "{}",
                "a  \n    \n  x  \nb");
  EXPECT_RENDER("  {{ n }}  \n  {{- n -}}  \n", "{}",
                "  ");
  EXPECT_RENDER("line\n    {# comment #}\nnext", "{}",
                "line\nnext");
  EXPECT_RENDER("x\n{% for i in l %}\n  {{ i }}\n{% endfor %}\ny\n", "{}",
                "x\ny");
  EXPECT_RENDER("x\n  {% for i in l %}\n    {{- i }}\n  {% endfor %}\ny\n\n", "{}",
                "x\ny\n");
  EXPECT_RENDER("{% if true %}\r\nwindows\r\n{% endif %}\r\n", "{}",
                "windows\n");
  EXPECT_RENDER("one trailing newline is dropped\n", "{}",
                "one trailing newline is dropped");
  EXPECT_RENDER("  {% raw %}  {{ not parsed }}  {% endraw %}  \n", "{}",
                "  {{ not parsed }}    ");
  EXPECT_RENDER("{%- raw -%}  x  {%- endraw -%}  y", "{}",
                "xy");
  EXPECT_RENDER(" \t {% if true %}a{% endif %}\n \t{% if true %}b{% endif %} c {% if true %}d{% endif %}", "{}",
                "ab c d");
  EXPECT_RENDER("a {# c #} b {#- c -#} c", "{}",
                "a  bc");
  EXPECT_RENDER("{% generation %}generated {{ n }}{% endgeneration %}", "{}",
                "generated ");
}

TEST(JinjaLanguage, Expressions) {
  EXPECT_RENDER("{{ none }}", kVars,
                "None");
  EXPECT_RENDER("{{ true }}", kVars,
                "True");
  EXPECT_RENDER("{{ false }}", kVars,
                "False");
  EXPECT_RENDER("{{ n }}", kVars,
                "42");
  EXPECT_RENDER("{{ f }}", kVars,
                "3.5");
  EXPECT_RENDER("{{ -f }}", kVars,
                "-3.5");
  EXPECT_RENDER("{{ 1/3 }}", kVars,
                "0.3333333333333333");
  EXPECT_RENDER("{{ 10/4 }}", kVars,
                "2.5");
  EXPECT_RENDER("{{ 2**10 }}", kVars,
                "1024");
  EXPECT_RENDER("{{ 7//2 }}", kVars,
                "3");
  EXPECT_RENDER("{{ -7//2 }}", kVars,
                "-4");
  EXPECT_RENDER("{{ -7%3 }}", kVars,
                "2");
  EXPECT_RENDER("{{ 7.5%2 }}", kVars,
                "1.5");
  EXPECT_RENDER("{{ 3*'ab' }}", kVars,
                "ababab");
  EXPECT_RENDER("{{ [1]*3 }}", kVars,
                "[1, 1, 1]");
  EXPECT_RENDER("{{ 'a' ~ 1 ~ none ~ true }}", kVars,
                "a1NoneTrue");
  EXPECT_RENDER("{{ 1 + 2.0 }}", kVars,
                "3.0");
  EXPECT_RENDER("{{ true + 1 }}", kVars,
                "2");
  EXPECT_RENDER("{{ 1 < 2 < 3 }}", kVars,
                "True");
  EXPECT_RENDER("{{ 1 == 1.0 }}", kVars,
                "True");
  EXPECT_RENDER("{{ [1,2] < [1,3] }}", kVars,
                "True");
  EXPECT_RENDER("{{ 'a' in 'cat' }}", kVars,
                "True");
  EXPECT_RENDER("{{ 2 in l }}", kVars,
                "True");
  EXPECT_RENDER("{{ 'b' in d }}", kVars,
                "True");
  EXPECT_RENDER("{{ 'z' not in d }}", kVars,
                "True");
  EXPECT_RENDER("{{ 0.1 + 0.2 }}", kVars,
                "0.30000000000000004");
  EXPECT_RENDER("{{ 1e16 }}", kVars,
                "1e+16");
  EXPECT_RENDER("{{ 1e15 }}", kVars,
                "1000000000000000.0");
  EXPECT_RENDER("{{ 0.0001 }}", kVars,
                "0.0001");
  EXPECT_RENDER("{{ 0.00001 }}", kVars,
                "1e-05");
  EXPECT_RENDER("{{ 1e-7 }}", kVars,
                "1e-07");
  EXPECT_RENDER("{{ 123456789.0 }}", kVars,
                "123456789.0");
  EXPECT_RENDER("{{ -0.0 }}", kVars,
                "-0.0");
  EXPECT_RENDER("{{ l }}", kVars,
                "[3, 1, 2]");
  EXPECT_RENDER("{{ d }}", kVars,
                "{'b': 1, 'a': 2}");
  EXPECT_RENDER("{{ msgs[2] }}", kVars,
                "{'role': 'assistant', 'content': 'yo', 'tool_calls': [{'function': {'name': 'f', 'arguments': {'x': 1, 'y': 'é'}}}]}");
  EXPECT_RENDER("{{ (1,) }}", kVars,
                "(1,)");
  EXPECT_RENDER("{{ (1, 'a') }}", kVars,
                "(1, 'a')");
  EXPECT_RENDER("{{ range(3) }}", kVars,
                "range(0, 3)");
  EXPECT_RENDER("{{ d.items() }}", kVars,
                "dict_items([('b', 1), ('a', 2)])");
  EXPECT_RENDER("{{ 'a\\'b' }}", kVars,
                "a'b");
  EXPECT_RENDER("{{ [\"it's\", 'say \"hi\"'] }}", kVars,
                "[\"it's\", 'say \"hi\"']");
  EXPECT_RENDER("{{ ['\\x01\\x7f\\u200b\\u00e9\\U0001F600'] }}", kVars,
                "['\\x01\\x7f\\u200bé😀']");
  EXPECT_RENDER("{{ {'x': (1, none)} }}", kVars,
                "{'x': (1, None)}");
  EXPECT_RENDER("{{ 1 if 0 else 2 if 0 else 3 }}", kVars,
                "3");
  EXPECT_RENDER("{{ -n|abs }}", kVars,
                "42");
  EXPECT_RENDER("{{ - 2 ** 2 }}", kVars,
                "4");
  EXPECT_RENDER("{{ 0x1F + 0b101 + 0o17 + 1_000 }}", kVars,
                "1051");
  EXPECT_RENDER("{{ 'a' 'b' \"c\" }}", kVars,
                "abc");
  EXPECT_RENDER("{{ 'tab\\tq\\'bs\\\\oct\\101x\\x41unk\\d' }}", kVars,
                "tab\tq'bs\\octAxAunk\\d");
}

TEST(JinjaLanguage, LoopsAndScoping) {
  EXPECT_RENDER("{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", kVars,
                "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|");
  EXPECT_RENDER("{% for x in l %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }}{{ loop.cycle('a', 'b') }};{% endfor %}", kVars,
                "-3-1a;3-1-2b;1-2-a;");
  EXPECT_RENDER("{% for x in l if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}", kVars,
                "3:1/2 2:2/2 ");
  EXPECT_RENDER("{% for x in [] %}x{% else %}empty{% endfor %}", kVars,
                "empty");
  EXPECT_RENDER("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{% for k, v in d|dictsort %}{{ k }}={{ v }},{% endfor %}", kVars,
                "b=1,a=2,|a=2,b=1,");
  EXPECT_RENDER("{% for c in 'abé' %}{{ c }}.{% endfor %}{% for k in d %}{{ k }}{% endfor %}", kVars,
                "a.b.é.ba");
  EXPECT_RENDER("{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}", kVars,
                "3");
  EXPECT_RENDER("{% for x in l %}{{ loop.changed(x > 1) }} {% endfor %}", kVars,
                "True True True ");
  EXPECT_RENDER("{% for item in [{'c': [{'c': []}, {'c': [{'c': []}]}]}] recursive %}[{{ loop.depth }}{{ loop(item.c) }}]{% endfor %}", kVars,
                "[1[2][2[3]]]");
  EXPECT_RENDER("{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = i + 10 %}{{ x }},{% endfor %}{{ x }}", kVars,
                "010,011,012,0");
  EXPECT_RENDER("{% for i in range(3) %}{% if i == 0 %}{% set y = 5 %}{% endif %}{{ y }},{% endfor %}", kVars,
                "5,,,");
  EXPECT_RENDER("{% for m in msgs[::-1] %}{{ m.role }} {% endfor %}", kVars,
                "assistant user system ");
  EXPECT_RENDER("{% set ns = namespace(total=0, found=false) %}{% for i in l %}{% set ns.total = ns.total + i %}{% if i == 1 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.total }} {{ ns.found }} {{ ns }}", kVars,
                "6 True <Namespace {'total': 6, 'found': True}>");
}

TEST(JinjaLanguage, Statements) {
  EXPECT_RENDER("{% if n > 40 %}big{% elif n > 10 %}mid{% else %}small{% endif %}", kVars,
                "big");
  EXPECT_RENDER("{% if no %}a{% elif missing %}b{% elif '' %}c{% else %}d{% endif %}", kVars,
                "d");
  EXPECT_RENDER("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}", kVars,
                "12(1, 2)");
  EXPECT_RENDER("{% set block %}inner {{ n }}{% endset %}[{{ block }}]", kVars,
                "[inner 42]");
  EXPECT_RENDER("{% set block | upper | trim %}  inner {{ n }}  {% endset %}[{{ block }}]", kVars,
                "[INNER 42]");
  EXPECT_RENDER("{% macro m(a, b=2, c=none) %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m(1, c=4) }}|{{ m() }}", kVars,
                "1-2-None|1-3-None|1-2-4|-2-None");
  EXPECT_RENDER("{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}", kVars,
                "(1, 2){'k': 3}");
  EXPECT_RENDER("{% macro m(x) %}[{{ caller(x) }}]{% endmacro %}{% call(v) m(5) %}got {{ v }}{% endcall %}", kVars,
                "[got 5]");
  EXPECT_RENDER("{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(4) }}", kVars,
                "4321");
  EXPECT_RENDER("{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}", kVars,
                "2");
  EXPECT_RENDER("{% macro m(a, b=a * 2) %}{{ b }}{% endmacro %}{{ m(3) }}", kVars,
                "6");
  EXPECT_RENDER("{% filter upper %}hello {{ s }}{% endfilter %}", kVars,
                "HELLO HELLO WORLD");
  EXPECT_RENDER("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", kVars,
                "3[]");
  EXPECT_RENDER("{% set j = joiner(', ') %}{% for x in l %}{{ j() }}{{ x }}{% endfor %}", kVars,
                "3, 1, 2");
  EXPECT_RENDER("{{ dict(a=1, b='x') }} {{ dict([('k', 1)]) }} {{ range(2, 8, 2)|list }}", kVars,
                "{'a': 1, 'b': 'x'} {'k': 1} [2, 4, 6]");
}

TEST(JinjaLanguage, Filters) {
  EXPECT_RENDER("{{ s|trim }}", kVars,
                "Hello World");
  EXPECT_RENDER("{{ ' x '|trim }}", kVars,
                "x");
  EXPECT_RENDER("{{ 'xxhixx'|trim('x') }}", kVars,
                "hi");
  EXPECT_RENDER("{{ l|length }}", kVars,
                "3");
  EXPECT_RENDER("{{ s|length }}", kVars,
                "11");
  EXPECT_RENDER("{{ d|length }}", kVars,
                "2");
  EXPECT_RENDER("{{ l|first }}", kVars,
                "3");
  EXPECT_RENDER("{{ l|last }}", kVars,
                "2");
  EXPECT_RENDER("{{ l|sort }}", kVars,
                "[1, 2, 3]");
  EXPECT_RENDER("{{ sl|sort }}", kVars,
                "['A', 'a', 'b', 'c']");
  EXPECT_RENDER("{{ sl|sort(case_sensitive=true) }}", kVars,
                "['A', 'a', 'b', 'c']");
  EXPECT_RENDER("{{ sl|sort(reverse=true) }}", kVars,
                "['c', 'b', 'A', 'a']");
  EXPECT_RENDER("{{ sl|unique|list }}", kVars,
                "['b', 'A', 'c']");
  EXPECT_RENDER("{{ l|reverse|list }}", kVars,
                "[2, 1, 3]");
  EXPECT_RENDER("{{ s|reverse }}", kVars,
                "dlroW olleH");
  EXPECT_RENDER("{{ d|dictsort }}", kVars,
                "[('a', 2), ('b', 1)]");
  EXPECT_RENDER("{{ d|dictsort(by='value', reverse=true) }}", kVars,
                "[('a', 2), ('b', 1)]");
  EXPECT_RENDER("{{ d|items|list }}", kVars,
                "[('b', 1), ('a', 2)]");
  EXPECT_RENDER("{{ s|upper }}", kVars,
                "HELLO WORLD");
  EXPECT_RENDER("{{ s|lower }}", kVars,
                "hello world");
  EXPECT_RENDER("{{ 'hello wORLD-x(y'|title }}", kVars,
                "Hello World-X(Y");
  EXPECT_RENDER("{{ 'hELLO'|capitalize }}", kVars,
                "Hello");
  EXPECT_RENDER("{{ n|string ~ '!' }}", kVars,
                "42!");
  EXPECT_RENDER("{{ '42'|int + 1 }}", kVars,
                "43");
  EXPECT_RENDER("{{ '3.7'|int }}", kVars,
                "3");
  EXPECT_RENDER("{{ 'x'|int(7) }}", kVars,
                "7");
  EXPECT_RENDER("{{ '0x1A'|int(0, 16) }}", kVars,
                "26");
  EXPECT_RENDER("{{ '1.5'|float }}", kVars,
                "1.5");
  EXPECT_RENDER("{{ 'x'|float }}", kVars,
                "0.0");
  EXPECT_RENDER("{{ -3|abs }}", kVars,
                "3");
  EXPECT_RENDER("{{ 2.5|round }}", kVars,
                "2.0");
  EXPECT_RENDER("{{ 3.5|round }}", kVars,
                "4.0");
  EXPECT_RENDER("{{ 2.675|round(2) }}", kVars,
                "2.67");
  EXPECT_RENDER("{{ 2.1|round(0, 'ceil') }}", kVars,
                "3.0");
  EXPECT_RENDER("{{ 42|round }}", kVars,
                "42");
  EXPECT_RENDER("{{ l|join(', ') }}", kVars,
                "3, 1, 2");
  EXPECT_RENDER("{{ msgs|map(attribute='role')|join('|') }}", kVars,
                "system|user|assistant");
  EXPECT_RENDER("{{ msgs|map(attribute='missing', default='D')|list }}", kVars,
                "['D', 'D', 'D']");
  EXPECT_RENDER("{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}", kVars,
                "[' hi ']");
  EXPECT_RENDER("{{ msgs|rejectattr('role', 'in', ['user', 'system'])|list|length }}", kVars,
                "1");
  EXPECT_RENDER("{{ msgs|selectattr('tool_calls', 'defined')|map(attribute='tool_calls.0.function.name')|list }}", kVars,
                "['f']");
  EXPECT_RENDER("{{ l|select('odd')|list }}", kVars,
                "[3, 1]");
  EXPECT_RENDER("{{ l|reject('odd')|list }}", kVars,
                "[2]");
  EXPECT_RENDER("{{ sl|map('lower')|unique|list }}", kVars,
                "['b', 'a', 'c']");
  EXPECT_RENDER("{{ l|map('string')|join }}", kVars,
                "312");
  EXPECT_RENDER("{{ l|sum }}", kVars,
                "6");
  EXPECT_RENDER("{{ l|sum(start=10) }}", kVars,
                "16");
  EXPECT_RENDER("{{ l|min }}", kVars,
                "1");
  EXPECT_RENDER("{{ sl|max }}", kVars,
                "c");
  EXPECT_RENDER("{{ none|default('x') }}", kVars,
                "None");
  EXPECT_RENDER("{{ missing|default('x') }}", kVars,
                "x");
  EXPECT_RENDER("{{ ''|default('x', true) }}", kVars,
                "x");
  EXPECT_RENDER("{{ l|batch(2)|list }}", kVars,
                "[[3, 1], [2]]");
  EXPECT_RENDER("{{ l|slice(2)|list }}", kVars,
                "[[3, 1], [2]]");
  EXPECT_RENDER("{{ 'a\\nb'|indent(2) }}", kVars,
                "a\n  b");
  EXPECT_RENDER("{{ 'a\\n\\nb'|indent(2, true, true) }}", kVars,
                "  a\n  \n  b");
  EXPECT_RENDER("{{ 'hi'|center(9) }}", kVars,
                "    hi   ");
  EXPECT_RENDER("{{ 'one two three'|wordcount }}", kVars,
                "3");
  EXPECT_RENDER("{{ 'hello world'|truncate(9, true) }}", kVars,
                "hello world");
  EXPECT_RENDER("{{ 'Hello World and more'|truncate(12) }}", kVars,
                "Hello...");
  EXPECT_RENDER("{{ s|replace('o', '0') }}", kVars,
                "Hell0 W0rld");
  EXPECT_RENDER("{{ s|replace('l', 'L', 1) }}", kVars,
                "HeLlo World");
  EXPECT_RENDER("{{ '%s=%d'|format('a', 1) }}", kVars,
                "a=1");
  EXPECT_RENDER("{{ '<b>'|e }}", kVars,
                "&lt;b&gt;");
  EXPECT_RENDER("{{ '<b>'|safe }}", kVars,
                "<b>");
  EXPECT_RENDER("{{ 'x'|safe + '<b>' }}", kVars,
                "x&lt;b&gt;");
  EXPECT_RENDER("{{ '<a>'|e ~ '<b>' }}", kVars,
                "&lt;a&gt;<b>");
  EXPECT_RENDER("{{ missing|list }}", kVars,
                "[]");
  EXPECT_RENDER("{{ missing|length }}", kVars,
                "0");
}

TEST(JinjaLanguage, Tojson) {
  EXPECT_RENDER("{{ msgs[2]|tojson }}", kVars,
                "{\"role\": \"assistant\", \"content\": \"yo\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1, \"y\": \"é\"}}}]}");
  EXPECT_RENDER("{{ msgs[2]|tojson(indent=2) }}", kVars,
                "{\n  \"role\": \"assistant\",\n  \"content\": \"yo\",\n  \"tool_calls\": [\n    {\n      \"function\": {\n        \"name\": \"f\",\n        \"arguments\": {\n          \"x\": 1,\n          \"y\": \"é\"\n        }\n      }\n    }\n  ]\n}");
  EXPECT_RENDER("{{ msgs[2].tool_calls|tojson(indent=4) }}", kVars,
                "[\n    {\n        \"function\": {\n            \"name\": \"f\",\n            \"arguments\": {\n                \"x\": 1,\n                \"y\": \"é\"\n            }\n        }\n    }\n]");
  EXPECT_RENDER("{{ {'k\"ey': '\\n\\t\\u0001\\u007f\\u2028 é 😀 \\\\'}|tojson }}", kVars,
                "{\"k\\\"ey\": \"\\n\\t\\u0001\x7f" "  é 😀 \\\\\"}");
  EXPECT_RENDER("{{ u|tojson }}", kVars,
                "\"héllo wörld ß\"");
  EXPECT_RENDER("{{ u|tojson(ensure_ascii=true) }}", kVars,
                "\"h\\u00e9llo w\\u00f6rld \\u00df\"");
  EXPECT_RENDER("{{ '😀'|tojson(ensure_ascii=true) }}", kVars,
                "\"\\ud83d\\ude00\"");
  EXPECT_RENDER("{{ {'b': 1, 'a': [1.0, 1e-7, 1e22, none, true]}|tojson(sort_keys=true) }}", kVars,
                "{\"a\": [1.0, 1e-07, 1e+22, null, true], \"b\": 1}");
  EXPECT_RENDER("{{ d|tojson(separators=(',', ':')) }}", kVars,
                "{\"b\":1,\"a\":2}");
  EXPECT_RENDER("{{ [[], {}, [[]]]|tojson(indent=2) }}", kVars,
                "[\n  [],\n  {},\n  [\n    []\n  ]\n]");
  EXPECT_RENDER("{{ {1: 2, true: 3, none: 4, 1.5: 5}|tojson }}", kVars,
                "{\"1\": 3, \"null\": 4, \"1.5\": 5}");
  EXPECT_RENDER("{{ d|tojson(indent='\\t') }}", kVars,
                "{\n\t\"b\": 1,\n\t\"a\": 2\n}");
  EXPECT_RENDER("{{ 3.0|tojson }}", kVars,
                "3.0");
  EXPECT_RENDER("{{ 'x'|tojson }}", kVars,
                "\"x\"");
}

TEST(JinjaLanguage, Tests) {
  EXPECT_RENDER("{{ n is number }}", kVars,
                "True");
  EXPECT_RENDER("{{ f is float }}", kVars,
                "True");
  EXPECT_RENDER("{{ n is integer }}", kVars,
                "True");
  EXPECT_RENDER("{{ t is boolean }}", kVars,
                "True");
  EXPECT_RENDER("{{ t is true }}", kVars,
                "True");
  EXPECT_RENDER("{{ no is none }}", kVars,
                "True");
  EXPECT_RENDER("{{ no is defined }}", kVars,
                "True");
  EXPECT_RENDER("{{ missing is defined }}", kVars,
                "False");
  EXPECT_RENDER("{{ missing is undefined }}", kVars,
                "True");
  EXPECT_RENDER("{{ s is string }}", kVars,
                "True");
  EXPECT_RENDER("{{ d is mapping }}", kVars,
                "True");
  EXPECT_RENDER("{{ l is sequence }}", kVars,
                "True");
  EXPECT_RENDER("{{ d is sequence }}", kVars,
                "True");
  EXPECT_RENDER("{{ s is iterable }}", kVars,
                "True");
  EXPECT_RENDER("{{ n is iterable }}", kVars,
                "False");
  EXPECT_RENDER("{{ (l|select) is iterable }}", kVars,
                "True");
  EXPECT_RENDER("{{ (l|select) is sequence }}", kVars,
                "False");
  EXPECT_RENDER("{{ 4 is divisibleby 2 }}", kVars,
                "True");
  EXPECT_RENDER("{{ 3 is odd }}", kVars,
                "True");
  EXPECT_RENDER("{{ 3 is even }}", kVars,
                "False");
  EXPECT_RENDER("{{ l is sameas l }}", kVars,
                "True");
  EXPECT_RENDER("{{ none is sameas none }}", kVars,
                "True");
  EXPECT_RENDER("{{ 2 is in l }}", kVars,
                "True");
  EXPECT_RENDER("{{ 'a' is eq 'a' }}", kVars,
                "True");
  EXPECT_RENDER("{{ 3 is gt 2 }}", kVars,
                "True");
  EXPECT_RENDER("{{ 3 is ge 4 }}", kVars,
                "False");
  EXPECT_RENDER("{{ 'abc' is lower }}", kVars,
                "True");
  EXPECT_RENDER("{{ 'ABC' is upper }}", kVars,
                "True");
  EXPECT_RENDER("{{ 'trim' is filter }}", kVars,
                "True");
  EXPECT_RENDER("{{ 'odd' is test }}", kVars,
                "True");
  EXPECT_RENDER("{{ range is callable }}", kVars,
                "True");
}

TEST(JinjaLanguage, StringAndContainerMethods) {
  EXPECT_RENDER("{{ s.strip('Hd') }}", kVars,
                "ello Worl");
  EXPECT_RENDER("{{ '  a  '.lstrip() }}", kVars,
                "a  ");
  EXPECT_RENDER("{{ '  a  '.rstrip() }}", kVars,
                "  a");
  EXPECT_RENDER("{{ s.split() }}", kVars,
                "['Hello', 'World']");
  EXPECT_RENDER("{{ s.split('l') }}", kVars,
                "['He', '', 'o Wor', 'd']");
  EXPECT_RENDER("{{ s.split('l', 1) }}", kVars,
                "['He', 'lo World']");
  EXPECT_RENDER("{{ s.rsplit('l', 1) }}", kVars,
                "['Hello Wor', 'd']");
  EXPECT_RENDER("{{ '  a b  c '.split(None, 1) }}", kVars,
                "['a', 'b  c ']");
  EXPECT_RENDER("{{ s.startswith('He') }}", kVars,
                "True");
  EXPECT_RENDER("{{ s.startswith(('x', 'H')) }}", kVars,
                "True");
  EXPECT_RENDER("{{ s.endswith('ld') }}", kVars,
                "True");
  EXPECT_RENDER("{{ s.upper() }}", kVars,
                "HELLO WORLD");
  EXPECT_RENDER("{{ u.upper() }}", kVars,
                "HÉLLO WÖRLD SS");
  EXPECT_RENDER("{{ s.lower() }}", kVars,
                "hello world");
  EXPECT_RENDER("{{ 'hello wOrld'.title() }}", kVars,
                "Hello World");
  EXPECT_RENDER("{{ 'hELLO'.capitalize() }}", kVars,
                "Hello");
  EXPECT_RENDER("{{ s.swapcase() }}", kVars,
                "hELLO wORLD");
  EXPECT_RENDER("{{ s.replace('o', '0', 1) }}", kVars,
                "Hell0 World");
  EXPECT_RENDER("{{ s.find('o') }}", kVars,
                "4");
  EXPECT_RENDER("{{ s.rfind('o') }}", kVars,
                "7");
  EXPECT_RENDER("{{ s.find('zz') }}", kVars,
                "-1");
  EXPECT_RENDER("{{ s.index('W') }}", kVars,
                "6");
  EXPECT_RENDER("{{ s.count('l') }}", kVars,
                "3");
  EXPECT_RENDER("{{ '-'.join(['a', 'b']) }}", kVars,
                "a-b");
  EXPECT_RENDER("{{ s.center(15, '*') }}", kVars,
                "**Hello World**");
  EXPECT_RENDER("{{ s.ljust(13, '.') }}", kVars,
                "Hello World..");
  EXPECT_RENDER("{{ s.rjust(13) }}", kVars,
                "  Hello World");
  EXPECT_RENDER("{{ '42'.zfill(5) }}", kVars,
                "00042");
  EXPECT_RENDER("{{ s.partition(' ') }}", kVars,
                "('Hello', ' ', 'World')");
  EXPECT_RENDER("{{ s.rpartition('o') }}", kVars,
                "('Hello W', 'o', 'rld')");
  EXPECT_RENDER("{{ s.removeprefix('Hell') }}", kVars,
                "o World");
  EXPECT_RENDER("{{ s.removesuffix('rld') }}", kVars,
                "Hello Wo");
  EXPECT_RENDER("{{ 'abc'.isalpha() }}", kVars,
                "True");
  EXPECT_RENDER("{{ '123'.isdigit() }}", kVars,
                "True");
  EXPECT_RENDER("{{ ' '.isspace() }}", kVars,
                "True");
  EXPECT_RENDER("{{ 'a\\nb\\r\\nc'.splitlines() }}", kVars,
                "['a', 'b', 'c']");
  EXPECT_RENDER("{{ '{} {}'.format('a', 1) }}", kVars,
                "a 1");
  EXPECT_RENDER("{{ '{0}-{0}'.format('x') }}", kVars,
                "x-x");
  EXPECT_RENDER("{{ '{name}!'.format(name='n') }}", kVars,
                "n!");
  EXPECT_RENDER("{{ '{:>5}|{:<5}|{:^5}'.format('a', 'b', 'c') }}", kVars,
                "    a|b    |  c  ");
  EXPECT_RENDER("{{ '{:.2f}'.format(3.14159) }}", kVars,
                "3.14");
  EXPECT_RENDER("{{ '%s and %d and %5.2f and %r and %%' % ('a', 3, 2.5, 'q') }}", kVars,
                "a and 3 and  2.50 and 'q' and %");
  EXPECT_RENDER("{{ '%(a)s-%(b)s' % {'a': 1, 'b': 'x'} }}", kVars,
                "1-x");
  EXPECT_RENDER("{{ d.get('a') }}", kVars,
                "2");
  EXPECT_RENDER("{{ d.get('zz') }}", kVars,
                "None");
  EXPECT_RENDER("{{ d.get('zz', 5) }}", kVars,
                "5");
  EXPECT_RENDER("{{ d.keys()|list }}", kVars,
                "['b', 'a']");
  EXPECT_RENDER("{{ d.values()|list }}", kVars,
                "[1, 2]");
  EXPECT_RENDER("{{ s[0] ~ s[-1] ~ s[1:3] ~ s[::-1] ~ s[::2] }}", kVars,
                "HdeldlroW olleHHloWrd");
  EXPECT_RENDER("{{ l[::-1] }}", kVars,
                "[2, 1, 3]");
  EXPECT_RENDER("{{ l[1:] }}", kVars,
                "[1, 2]");
  EXPECT_RENDER("{{ l[5] }}", kVars,
                "");
  EXPECT_RENDER("{{ u[::-1] }}", kVars,
                "ß dlröw olléh");
  EXPECT_RENDER("{{ msgs[1]['content'].strip() }}", kVars,
                "hi");
}

TEST(JinjaLanguage, Undefined) {
  EXPECT_RENDER("{{ missing }}", kVars,
                "");
  EXPECT_RENDER("{{ missing ~ 'x' }}", kVars,
                "x");
  EXPECT_RENDER("{{ missing|length }}", kVars,
                "0");
  EXPECT_RENDER("{{ none.attr }}", kVars,
                "");
  EXPECT_RENDER("{{ (none.attr) is defined }}", kVars,
                "False");
  EXPECT_RENDER("{{ s.attr }}", kVars,
                "");
  EXPECT_RENDER("{{ d.missing is defined }}", kVars,
                "False");
  EXPECT_RENDER("{{ d.missing|default('dflt') }}", kVars,
                "dflt");
  EXPECT_RENDER("{{ l[10] is defined }}", kVars,
                "False");
  EXPECT_RENDER("{{ msgs[0].missing }}", kVars,
                "");
  EXPECT_RENDER("{{ 'x' in missing }}", kVars,
                "False");
  EXPECT_RENDER("{% for x in missing %}no{% else %}empty loop over undefined{% endfor %}", kVars,
                "empty loop over undefined");
  EXPECT_RENDER("{% if missing %}yes{% else %}undefined is false{% endif %}", kVars,
                "undefined is false");
}

// ---- errors name the construct and its line:column --------------------------

TEST(JinjaErrors, SyntaxErrorsHavePositions) {
  TemplateError e = render_error("line one\n{{ x.y( }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Syntax);
  EXPECT_EQ(e.pos().line, 2);
  EXPECT_EQ(e.pos().column, 9);
  EXPECT_NE(std::string(e.what()).find("template:2:9"), std::string::npos) << e.what();

  e = render_error("{% for x in l %}\n  no end");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Syntax);
  EXPECT_NE(e.detail().find("endfor"), std::string::npos) << e.what();

  e = render_error("{% if x %}{% endfor %}");
  EXPECT_NE(e.detail().find("unknown tag 'endfor'"), std::string::npos) << e.what();

  e = render_error("{{ 'unterminated }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Syntax);
  e = render_error("{{ x is not none if x is defined else 1 }}");  // as in Jinja2: a test swallows `if`
  EXPECT_EQ(e.kind(), TemplateError::Kind::Syntax);
  e = render_error("{% break %}");
  EXPECT_NE(e.detail().find("outside of a loop"), std::string::npos) << e.what();
}

TEST(JinjaErrors, UnknownFiltersAndTests) {
  TemplateError e = render_error("ok\n  {{ l|nosuchfilter }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Syntax);
  EXPECT_EQ(e.pos().line, 2);
  EXPECT_EQ(e.pos().column, 8);
  EXPECT_NE(e.detail().find("no filter named 'nosuchfilter'"), std::string::npos);
  e = render_error("{{ 1 is nosuchtest }}");
  EXPECT_NE(e.detail().find("no test named 'nosuchtest'"), std::string::npos);
  // Inside an if, Jinja2 raises only when the filter runs.
  EXPECT_RENDER("{% if false %}{{ x|from_json }}{% endif %}ok", "{}", "ok");
  e = render_error("{% if true %}{{ '1'|from_json }}{% endif %}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Render);
  EXPECT_NE(e.detail().find("transformers"), std::string::npos) << e.what();
}

TEST(JinjaErrors, UnsupportedConstructsAreNamed) {
  TemplateError e = render_error("a\n{{ 'x'|wordwrap }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Unsupported);
  EXPECT_EQ(e.pos().line, 2);
  EXPECT_NE(e.detail().find("wordwrap"), std::string::npos);
  EXPECT_RENDER("{% if false %}{{ 'x'|wordwrap }}{% endif %}fine", "{}", "fine");  // only when it runs

  e = render_error("{% include 'other.jinja' %}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Unsupported);
  EXPECT_NE(e.detail().find("include"), std::string::npos);
  e = render_error("{{ 'x'.expandtabs() }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Unsupported);
  EXPECT_NE(e.detail().find("expandtabs"), std::string::npos);
  e = render_error("{{ 'x'.upper }}");  // Python would print a memory address
  EXPECT_EQ(e.kind(), TemplateError::Kind::Unsupported);
  e = render_error("{{ 9223372036854775807 + 1 }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Unsupported);
  e = render_error("{{ [1]|select }}");  // printing a generator
  EXPECT_EQ(e.kind(), TemplateError::Kind::Unsupported);
  e = render_error("{% do x %}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Syntax);  // not enabled in transformers either
}

TEST(JinjaErrors, RuntimeErrorsHavePositions) {
  TemplateError e = render_error("{{ a }}\n  {{ a.b.c }}", R"({"a": {}})");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Render);
  EXPECT_EQ(e.pos().line, 2);
  EXPECT_EQ(e.pos().column, 9);
  EXPECT_EQ(e.detail(), "'dict object' has no attribute 'b'");

  e = render_error("{{ missing.attr }}");
  EXPECT_EQ(e.detail(), "'missing' is undefined");
  e = render_error("{{ 'a' + 1 }}");
  EXPECT_EQ(e.detail(), "can only concatenate str (not \"int\") to str");
  e = render_error("{{ [1]|select|length }}");
  EXPECT_EQ(e.detail(), "object of type 'generator' has no len()");
  e = render_error("{% set l = [1] %}{{ l.append(2) }}");
  EXPECT_EQ(e.detail(), "access to attribute 'append' of 'list' object is unsafe.");
  e = render_error("{{ 1 // 0 }}");
  EXPECT_NE(e.detail().find("ZeroDivisionError"), std::string::npos);
  e = render_error("{% set x = 5 %}{% set x.y = 1 %}");
  EXPECT_NE(e.detail().find("non-namespace"), std::string::npos);
  e = render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}");
  EXPECT_EQ(e.detail(), "macro 'm' takes not more than 1 argument(s)");
  e = render_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}");
  EXPECT_NE(e.detail().find("recursion"), std::string::npos);
  e = render_error("{{ range(100001)|length }}");
  EXPECT_NE(e.detail().find("MAX_RANGE"), std::string::npos);
}

TEST(JinjaErrors, PythonSemanticsEdges) {
  // Slices are plain Python subscripts in Jinja2: errors, not undefined.
  EXPECT_NE(render_error("{{ d[1:] }}", R"({"d": {}})").detail().find("KeyError"), std::string::npos);
  EXPECT_NE(render_error("{{ none[1:] }}").detail().find("not subscriptable"), std::string::npos);
  // dict()/namespace() ask their argument for .keys, which an undefined value refuses.
  EXPECT_EQ(render_error("{% set ns = namespace(missing, a=1) %}").detail(), "'missing' is undefined");
  // A namespace holding itself cannot be printed (Python would recurse too), and does not leak.
  EXPECT_NE(render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").detail().find("recursion"),
            std::string::npos);
  // Containers deeper than Python could print are refused instead of overflowing the stack.
  EXPECT_NE(render_error("{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}")
                .detail()
                .find("nested deeper"),
            std::string::npos);
  // getattr on numbers: real/imag/... are not modelled, so they fail instead of being undefined.
  EXPECT_EQ(render_error("{{ [1, 2]|selectattr('real')|list }}").kind(), TemplateError::Kind::Unsupported);
  EXPECT_RENDER("{{ [1, 2]|selectattr('nope')|list }}", "{}", "[]");
}

TEST(JinjaErrors, RaiseException) {
  const TemplateError e = render_error("ok\n{{ raise_exception('Roles must alternate: ' ~ n) }}", R"({"n": 3})");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Raised);
  EXPECT_EQ(e.detail(), "Roles must alternate: 3");
  EXPECT_EQ(e.pos().line, 2);
  EXPECT_EQ(e.pos().column, 4);
}

// ---- semantics that need more than a one-line template ----------------------

TEST(JinjaSemantics, GeneratorsAreConsumedOnce) {
  EXPECT_RENDER("{% set g = l|select('odd') %}{{ g|list }}{{ g|list }}", kVars, "[3, 1][]");
  EXPECT_RENDER("{% set g = l|select('odd') %}{{ g|first }}{{ g|list }}", kVars, "3[1]");
  EXPECT_RENDER("{% if l|select('gt', 100) %}a generator is always true{% endif %}", kVars,
                "a generator is always true");
}

TEST(JinjaSemantics, StrftimeNowUsesTheClock) {
  setenv("TZ", "UTC", 1);
  tzset();
  fathom::jinja::RenderOptions options;
  options.clock = [] { return std::time_t(1721997296); };
  EXPECT_EQ(Template("{{ strftime_now('%d %b %Y %H:%M:%S') }}|{{ strftime_now('%z%Z') }}")
                .render(nlohmann::ordered_json::object(), options),
            "26 Jul 2024 12:34:56|");
}

TEST(JinjaSemantics, KeepsJsonKeyOrder) {
  EXPECT_RENDER("{{ x|tojson }} {{ x }}", R"({"x": {"z": 1, "a": {"y": 2, "b": 3}}})",
                "{\"z\": 1, \"a\": {\"y\": 2, \"b\": 3}} {'z': 1, 'a': {'y': 2, 'b': 3}}");
}

TEST(JinjaSemantics, RejectsInvalidUtf8Templates) {
  EXPECT_THROW(Template("{{ x }}\xff"), TemplateError);
}

TEST(JinjaSemantics, RendersConcurrently) {
  const Template t("{% for m in messages %}{{ loop.index }}:{{ m|upper }};{% endfor %}");
  const auto vars = nlohmann::ordered_json::parse(R"({"messages": ["a", "b", "c"]})");
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) ok += t.render(vars) == "1:A;2:B;3:C;";
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 800);
}

}  // namespace
