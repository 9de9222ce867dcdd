#pragma once
// Structured output: a request's OutputConstraint (response_format, a
// required tool, Anthropic's tool_choice any/tool or output_format) as a
// grammar over the model's tokens. Grammars are cached by what they were made
// from, so a client that sends the same schema again (agent frameworks do, on
// every turn) reuses the compiled grammar and the masks it has already made.
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "grammar/grammar_constraint.h"
#include "server/request_parsing.h"
#include "server/tool_calls.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom::server {

// What a job needs to constrain its sequence.
struct JobConstraint {
  std::shared_ptr<grammar::CompiledGrammar> grammar;  // null: unconstrained
  grammar::ReasoningTokens reasoning;
};

// The grammar text of a constraint: a JSON Schema's grammar, or the tool-call
// format's wrapping around each allowed tool's parameters schema. Throws
// ApiError 400 naming the schema feature that cannot be enforced.
grammar::Grammar output_grammar(const OutputConstraint& output, const ojson& tools, ToolCallFormat format);

class GrammarCache {
 public:
  // Each keeps up to CompiledGrammar::kMaxCachedMasks masks of vocabulary/8
  // bytes (about 10 MB for a 150k vocabulary): at most ~80 MB in all.
  static constexpr size_t kMaxGrammars = 8;
  GrammarCache(const Tokenizer& tokenizer, int64_t vocab_size) : tokenizer_(tokenizer), vocab_size_(vocab_size) {}

  std::shared_ptr<grammar::CompiledGrammar> compile(const OutputConstraint& output, const ojson& tools,
                                                    ToolCallFormat format);
  // The vocabulary's trie, made on first use (a fraction of a second for 150k tokens).
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary();

 private:
  const Tokenizer& tokenizer_;
  const int64_t vocab_size_;
  std::mutex mutex_;
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;
  std::list<std::pair<std::string, std::shared_ptr<grammar::CompiledGrammar>>> recent_;  // most recent first
};

}  // namespace fathom::server
