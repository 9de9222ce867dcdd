#include "server/structured_output.h"

#include "grammar/json_schema_grammar.h"

namespace fathom::server {

namespace {

using grammar::Element;
using grammar::Grammar;
using grammar::JsonSchemaCompiler;
using grammar::Sequence;

// One call of `tool` in the format the chat template taught the model: Qwen's
// <tool_call>{"name", "arguments"}</tool_call> or Llama 3.1's bare
// {"name", "parameters"}.
Element tool_call(Grammar& g, const ojson& tool, ToolCallFormat format, const std::string& param) {
  const ojson& fn = tool["function"];
  static const ojson kAnyObject = {{"type", "object"}};
  const ojson& schema = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"] : kAnyObject;
  JsonSchemaCompiler compiler(g, schema);
  const std::string name = fn["name"].get<std::string>();
  const Element ws = compiler.whitespace();
  const Element arguments = [&] {
    try {
      return compiler.value(schema, "#");
    } catch (const grammar::UnsupportedSchema& e) {
      throw ApiError(400, "tool '" + name + "': " + e.what(), param, "invalid_request_error", "unsupported_schema");
    }
  }();
  Sequence call;
  auto add = [&](const Sequence& s) { call.insert(call.end(), s.begin(), s.end()); };
  if (format == ToolCallFormat::qwen) add(g.literal("<tool_call>\n"));
  add({g.byte('{'), ws});
  add(compiler.string_literal("name"));
  add({ws, g.byte(':'), ws});
  add(compiler.string_literal(name));
  add({ws, g.byte(','), ws});
  add(compiler.string_literal(format == ToolCallFormat::qwen ? "arguments" : "parameters"));
  add({ws, g.byte(':'), ws, arguments, ws, g.byte('}')});
  if (format == ToolCallFormat::qwen) add(g.literal("\n</tool_call>"));
  return g.choice({std::move(call)}, "tool_call");
}

}  // namespace

Grammar output_grammar(const OutputConstraint& output, const ojson& tools, ToolCallFormat format) {
  using Kind = OutputConstraint::Kind;
  if (output.kind == Kind::json_schema || output.kind == Kind::json_object) {
    const ojson schema = output.kind == Kind::json_object ? ojson{{"type", "object"}} : output.schema;
    try {
      return grammar::json_schema_grammar(schema);
    } catch (const grammar::UnsupportedSchema& e) {
      throw ApiError(400, e.what(), output.param, "invalid_request_error", "unsupported_schema");
    }
  }
  check(output.kind == Kind::tool_call, "output grammar: no constraint");
  if (format == ToolCallFormat::none)
    throw ApiError(400, "this model's chat template has no tool-call format, so a tool call cannot be required",
                   output.param, "invalid_request_error", "tools_not_supported");
  Grammar g;
  std::vector<Sequence> calls;
  for (const ojson& tool : tools)
    if (output.tool_name.empty() || tool["function"]["name"] == output.tool_name)
      calls.push_back({tool_call(g, tool, format, output.param)});
  check(!calls.empty(), "output grammar: no tool named ", output.tool_name);
  const Element one = g.choice(std::move(calls), "tool_calls");
  const Element lead = g.choice({{}, {g.byte('\n')}}, "lead");
  const uint32_t root = g.add_rule("root");
  if (format == ToolCallFormat::qwen) {
    // Qwen's template lets a turn make several calls, one block after another.
    g.add_alternative(root, {lead, one, g.repeat({g.byte('\n'), one}, 0, 7)});
  } else {
    g.add_alternative(root, {lead, one});
  }
  g.set_root(root);
  return g;
}

std::shared_ptr<const grammar::TokenVocabulary> GrammarCache::vocabulary() {
  std::lock_guard lock(mutex_);
  if (!vocabulary_) vocabulary_ = grammar::TokenVocabulary::from_tokenizer(tokenizer_, vocab_size_);
  return vocabulary_;
}

std::shared_ptr<grammar::CompiledGrammar> GrammarCache::compile(const OutputConstraint& output, const ojson& tools,
                                                                 ToolCallFormat format) {
  std::string key = std::to_string(int(output.kind)) + "|" + std::to_string(int(format)) + "|" + output.tool_name + "|";
  key += output.kind == OutputConstraint::Kind::tool_call ? tools.dump() : output.schema.dump();
  {
    std::lock_guard lock(mutex_);
    for (auto it = recent_.begin(); it != recent_.end(); ++it) {
      if (it->first != key) continue;
      recent_.splice(recent_.begin(), recent_, it);
      return recent_.front().second;
    }
  }
  const Grammar g = output_grammar(output, tools, format);
  std::shared_ptr<grammar::CompiledGrammar> compiled;
  try {
    compiled = std::make_shared<grammar::CompiledGrammar>(g, vocabulary());
    const auto lock = compiled->lock();
    compiled->warm_up();
  } catch (const Error& e) {  // a grammar the automaton refuses (a $ref that recurses without input)
    throw ApiError(400, e.what(), output.param, "invalid_request_error", "unsupported_schema");
  }
  std::lock_guard lock(mutex_);
  recent_.emplace_front(std::move(key), compiled);
  if (recent_.size() > kMaxGrammars) recent_.pop_back();
  return compiled;
}

}  // namespace fathom::server
