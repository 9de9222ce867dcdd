#pragma once
// Speculative decoding: a drafter proposes the next few tokens, one target
// forward verifies them all (the sequence's state runs the step as a
// transaction), and the longest prefix the target itself would have produced
// is kept, plus the target's own next token. Greedy output is the output
// without speculation, token for token; sampled output follows the target's
// distribution (the rejection rule below).
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sampler.h"
#include "model/model.h"

namespace fathom {

struct Draft {
  std::vector<int32_t> tokens;
  // dists[i]: the distribution tokens[i] was drawn from. Empty when the
  // drafter chose each token outright (prompt lookup, a greedy draft model):
  // then each is a point mass.
  std::vector<TokenDistribution> dists;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `max` tokens to follow `history` (the prompt and every token so
  // far); may be empty. A drafter that samples draws with `sampler`, which
  // applies the request's sampling parameters.
  virtual Draft propose(const std::vector<int32_t>& history, int64_t max, Sampler& sampler) = 0;
  // What drafting one token costs relative to one target step (the policy
  // weighs it against the acceptance rate); 0 for prompt lookup.
  virtual double relative_cost() const = 0;
  // The sequence ended: let go of what following it held.
  virtual void finish() {}
  // A drafter of the same kind for another sequence (runs in one batch each
  // need their own: a draft model's state follows one history).
  virtual std::unique_ptr<Drafter> fork() const = 0;
};

// The speculative sampling rule (Leviathan et al. 2023, Chen et al. 2023):
// keep the drafted token with probability min(1, p/q), where p is the
// target's probability of it and q the draft's; otherwise draw from the
// residual max(0, p − q), normalized. The kept token is distributed exactly
// as p. `draft` null: the token was a point mass (q = 1).
struct DraftVerdict {
  bool accepted = false;
  int32_t token = 0;  // the drafted token, or the replacement drawn from the residual
};
DraftVerdict judge_draft(const TokenDistribution& target, const TokenDistribution* draft, int32_t drafted,
                         Sampler& sampler);

// How many tokens to draft next. Models each drafted token as accepted with
// probability α (estimated from recent passes, older ones decaying) and picks
// the length that maximizes the expected tokens per unit of work,
// (1 − α^(k+1)) / (1 − α) / (1 + c·k), c the drafter's relative cost. It uses
// no clock, so a seeded sampled run drafts the same lengths every time and
// gives the same output. When even one draft is not worth it, it drafts one
// token every kProbeEvery passes to keep measuring.
class DraftLengthPolicy {
 public:
  DraftLengthPolicy(int64_t max_tokens, double relative_cost);
  int64_t next();
  void observe(int64_t drafted, int64_t accepted);
  double acceptance() const { return accepted_ / (accepted_ + rejected_); }

  static constexpr int64_t kProbeEvery = 8;
  // What one more verify row costs relative to a step: little where decoding
  // is bandwidth-bound (the weights are read once for all rows), and a fixed
  // estimate rather than a timing so the choice stays deterministic.
  static constexpr double kVerifyRowCost = 0.1;

 private:
  int64_t max_tokens_;
  double cost_;
  double accepted_ = 1.5, rejected_ = 1.0;  // a prior of α = 0.6 worth a few passes
  int64_t passes_ = 0;
};

// Prompt lookup: the tokens that followed the most recent earlier occurrence
// of the history's last n tokens (n from max_ngram down to min_ngram),
// continued periodically when that occurrence is closer than `max` tokens.
class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(int64_t max_ngram = 3, int64_t min_ngram = 1);
  Draft propose(const std::vector<int32_t>& history, int64_t max, Sampler& sampler) override;
  double relative_cost() const override { return 0.0; }
  std::unique_ptr<Drafter> fork() const override { return std::make_unique<NgramDrafter>(*this); }

 private:
  int64_t max_ngram_, min_ngram_;
};

// A smaller model sharing the target's vocabulary drafts from its own state,
// which follows the accepted history (rolled back to the common prefix
// before each draft); greedily, or sampled with the request's parameters.
// ModelDrafter catches up on the history in steps of at most this many tokens.
inline constexpr int64_t kDraftChunkTokens = 64;

class ModelDrafter final : public Drafter {
 public:
  // `capacity`: the longest history it will see plus the longest draft.
  // `relative_cost`: a draft step's cost in target steps (decoding is
  // bandwidth-bound: the ratio of weight bytes).
  ModelDrafter(const Model& draft, int64_t capacity, double relative_cost);
  Draft propose(const std::vector<int32_t>& history, int64_t max, Sampler& sampler) override;
  double relative_cost() const override { return cost_; }
  void finish() override;
  std::unique_ptr<Drafter> fork() const override {
    return std::make_unique<ModelDrafter>(model_, capacity_, cost_);
  }

 private:
  const Model& model_;
  int64_t capacity_;
  double cost_;
  std::unique_ptr<SequenceState> state_;
  std::vector<int32_t> held_;  // the tokens state_ holds
};

// What speculation did in one generation.
struct SpeculationStats {
  int64_t drafted = 0;        // draft tokens verified
  int64_t accepted = 0;       // of those, kept
  int64_t target_passes = 0;  // target steps after the prompt: verify steps and plain decode steps
};

}  // namespace fathom
