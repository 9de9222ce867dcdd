// Structured output's cost, per tokenizer and schema: the time to compile a
// JSON Schema into a grammar over the vocabulary, and the time to mask one
// row of logits and follow the sampled token (median, p99, max over every
// generated token), while sampling at temperature 1 from random logits under
// the mask; each schema answers twice, the second time with the masks the
// first made (warm). Each output is written as a JSON line ({"schema", "tokenizer", "finished", "text"}) so
// that bench/validate_outputs.mjs can check it against its schema with ajv.
//
//   grammar_masks TOKENIZERS_DIR SCHEMAS_DIR OUT.jsonl [max_tokens=384] [seed=1] [no-warm-up]
//
// Compiling includes the warm-up the server does (CompiledGrammar::warm_up)
// unless no-warm-up is given.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/grammar_constraint.h"
#include "grammar/json_schema_grammar.h"
#include "text/tokenizer/tokenizer.h"

namespace {

using namespace fathom;
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

// A draw at temperature 1 from the finite logits.
int32_t sample(const std::vector<float>& logits, std::mt19937_64& rng) {
  float top = -INFINITY;
  for (float x : logits) top = std::max(top, x);
  double total = 0.0;
  for (float x : logits) total += std::isinf(x) ? 0.0 : std::exp(double(x - top));
  double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isinf(logits[i])) continue;
    u -= std::exp(double(logits[i] - top));
    if (u <= 0.0) return int32_t(i);
  }
  for (size_t i = logits.size(); i-- > 0;)
    if (!std::isinf(logits[i])) return int32_t(i);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s TOKENIZERS_DIR SCHEMAS_DIR OUT.jsonl [max_tokens=384] [seed=1]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path tokenizers = argv[1], schemas_dir = argv[2];
  std::ofstream out(argv[3]);
  const int max_tokens = argc > 4 ? std::atoi(argv[4]) : 384;
  const uint64_t seed = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 1;
  const bool warm_up = !(argc > 6 && std::string(argv[6]) == "no-warm-up");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(schemas_dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());

  for (const char* name : {"qwen3", "llama3_1"}) {
    const Tokenizer tokenizer = Tokenizer::load((tokenizers / name).string());
    auto start = Clock::now();
    const auto vocab = grammar::TokenVocabulary::from_tokenizer(tokenizer, tokenizer.vocab_size());
    const double vocab_ms = ms_since(start);
    const std::vector<int32_t> ends = {*tokenizer.eos_token_id()};
    std::vector<double> compile_ms, first_mask_ms, mask_ms, warm_ms;
    int finished = 0, tokens = 0, answers = 0;
    std::mt19937_64 rng(seed);
    // Logits are windows of one long buffer of normal noise at random offsets
    // (drawing 150k normals per step would dominate the run).
    std::normal_distribution<float> noise(0.0f, 2.0f);
    std::vector<float> pool(size_t(vocab->size()) * 8);
    for (float& x : pool) x = noise(rng);
    std::vector<float> logits(size_t(vocab->size()));
    for (const auto& file : files) {
      std::ifstream in(file);
      const auto schema = nlohmann::ordered_json::parse(in);
      start = Clock::now();
      auto compiled = std::make_shared<grammar::CompiledGrammar>(grammar::json_schema_grammar(schema), vocab);
      if (warm_up) compiled->warm_up();  // as the server compiles
      compile_ms.push_back(ms_since(start));
      // Two answers per schema: the first meets every state cold, the second
      // finds the masks the first made (a server keeps compiled grammars).
      for (int pass = 0; pass < 2; ++pass) {
        grammar::GrammarConstraint constraint(compiled, ends);
        std::vector<int32_t> ids;
        bool done = false;
        for (int step = 0; step < max_tokens && !done; ++step) {
          const size_t offset = std::uniform_int_distribution<size_t>(0, pool.size() - logits.size())(rng);
          std::copy_n(pool.begin() + ptrdiff_t(offset), logits.size(), logits.begin());
          start = Clock::now();
          constraint.mask(logits, max_tokens - step);
          double t = ms_since(start);
          const int32_t id = sample(logits, rng);
          start = Clock::now();
          const bool accepted = id >= 0 && constraint.accept(id);
          t += ms_since(start);  // a token's whole cost: its mask and following it
          if (pass == 0 && step == 0) first_mask_ms.push_back(t);
          else (pass == 0 ? mask_ms : warm_ms).push_back(t);
          if (!accepted) {
            std::fprintf(stderr, "%s %s: no token could follow\n", name, file.filename().c_str());
            return 1;
          }
          if (id == ends[0]) done = true;
          else ids.push_back(id);
          ++tokens;
        }
        finished += done;
        ++answers;
        out << nlohmann::json{{"schema", file.filename().string()}, {"tokenizer", name}, {"finished", done},
                              {"text", tokenizer.decode(ids)}}
                   .dump()
            << "\n";
      }
    }
    std::printf(
        "%-9s vocab %lld tokens, trie %zu nodes built in %.0f ms | %zu schemas: compile median %.2f ms, p99 %.2f, "
        "max %.2f | first mask median %.2f ms, p99 %.2f | mask per token, cold grammar: median %.3f ms, p99 %.3f, "
        "max %.2f | warm grammar: median %.3f ms, p99 %.3f, max %.2f | %d tokens, %d/%d answers finished\n",
        name, (long long)vocab->size(), vocab->nodes().size(), vocab_ms, files.size(), percentile(compile_ms, 0.5),
        percentile(compile_ms, 0.99), percentile(compile_ms, 1.0), percentile(first_mask_ms, 0.5),
        percentile(first_mask_ms, 0.99), percentile(mask_ms, 0.5), percentile(mask_ms, 0.99),
        percentile(mask_ms, 1.0), percentile(warm_ms, 0.5), percentile(warm_ms, 0.99), percentile(warm_ms, 1.0),
        tokens, finished, answers);
  }
  return 0;
}
