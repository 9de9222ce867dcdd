// JSON Schemas from clients (response_format, tool parameters) into grammars:
// only UnsupportedSchema or fathom::Error may come out of compiling, and a
// sentence the automaton accepts (a walk steered by the input's bytes) must be
// JSON that nlohmann parses.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuzz_common.h"
#include "grammar/grammar_automaton.h"
#include "grammar/json_schema_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  std::unique_ptr<fathom::grammar::GrammarAutomaton> automaton;
  try {
    const fathom::grammar::Grammar g = fathom::grammar::json_schema_grammar(schema);
    automaton = std::make_unique<fathom::grammar::GrammarAutomaton>(g);
  } catch (const fathom::Error&) {
    return 0;
  }
  // Walk: at each step take the live byte the input's next byte picks, and
  // stop where the text is complete once the input runs out.
  std::string sentence;
  int32_t state = automaton->initial();
  try {
    for (size_t step = 0; step < 4096; ++step) {
      const uint8_t pick = data[step % size];
      if (automaton->accepting(state) && (step >= size || pick % 5 == 0)) break;
      int32_t next = fathom::grammar::GrammarAutomaton::kDead;
      for (int k = 0; k < 256 && next == fathom::grammar::GrammarAutomaton::kDead; ++k) {
        const uint8_t b = uint8_t(pick + k);
        next = automaton->next(state, b);
        if (next != fathom::grammar::GrammarAutomaton::kDead) sentence.push_back(char(b));
      }
      FUZZ_CHECK(next != fathom::grammar::GrammarAutomaton::kDead || automaton->accepting(state),
                 "a live state with no byte to go on and not complete: %s", sentence.c_str());
      if (next == fathom::grammar::GrammarAutomaton::kDead) break;
      state = next;
    }
  } catch (const fathom::Error&) {
    return 0;  // too many states: refused with a message
  }
  if (automaton->accepting(state)) {
    const auto parsed = nlohmann::json::parse(sentence, nullptr, false);
    FUZZ_CHECK(!parsed.is_discarded(), "the grammar accepted text that is not JSON: %s\nschema: %s", sentence.c_str(),
               text.c_str());
  }
  return 0;
}
