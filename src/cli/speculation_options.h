#pragma once
// The speculative-decoding flags of generate and bench: --spec ngram (prompt
// lookup) or --draft-model DIR (a smaller model of the same vocabulary), and
// --draft-tokens K, --draft-length adaptive|fixed.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cli/common_options.h"
#include "engine/generator.h"
#include "engine/speculative.h"

namespace fathom::cli {

struct SpeculationOptions {
  std::string spec = "off";  // off | ngram | draft (implied by --draft-model)
  std::string draft_model;
  int64_t draft_tokens = 4;
  std::string draft_length = "adaptive";  // adaptive | fixed

  void add_to(CLI::App& app);
  bool enabled() const { return spec != "off" || !draft_model.empty(); }
  void validate() const;  // throws naming the bad flag
  // Adds speculation's terms (and the draft model's contract) to the target's.
  void add_to_contract(MemoryContract& contract, const ModelOptions& target) const;
  // The drafter for `target` (loading the draft model with the target's
  // dtype and threads), or null when speculation is off. `capacity`: the
  // longest sequence the target will hold.
  std::unique_ptr<Drafter> make_drafter(const Model& target, const ModelOptions& target_options, int64_t capacity);
  // generate()'s speculation with `drafter` (null: none).
  Speculation with(Drafter* drafter) const { return {drafter, draft_tokens, draft_length == "adaptive"}; }

 private:
  ModelOptions draft_options(const ModelOptions& target) const;
  std::unique_ptr<Model> draft_;  // kept alive for the drafter
};

}  // namespace fathom::cli
