#pragma once
// One request's generation, a step at a time, so that many can share each
// forward step (engine/run_step.h): prefill chunks, then decode steps — one
// row, or with speculation the pending token and its drafts verified as a
// transaction on the sequence's state. The run plans its part of the next
// step, then absorbs the logits that part produced: samples, judges drafts,
// emits tokens, and finishes at a stop id, max_new_tokens, or when on_token
// says stop.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine/prefill_policy.h"
#include "engine/sampler.h"
#include "engine/speculative.h"
#include "model/model.h"

namespace fathom {

// A sequence's state and the tokens it holds, passed from a finished run to
// the next one of the same conversation, which then prefills only what
// differs from them.
struct HeldSequence {
  std::unique_ptr<SequenceState> state;
  std::vector<int32_t> tokens;  // what `state` holds, in order
};

// Tokens a run of this request may hold: the prompt and its new tokens (or
// request.capacity when larger).
int64_t sequence_capacity(const GenerationRequest& request);

class SequenceRun {
 public:
  using OnToken = std::function<bool(const GeneratedToken&)>;
  // Checks the request (a bad one throws naming the field); the state is
  // allocated here. `speculation.drafter` is used by this run alone.
  // `held` (optional): a previous run's sequence. Its state is reused when it
  // can hold this request: trimmed back to the longest common prefix of its
  // tokens and the prompt (or started over where layers cannot go back:
  // recurrent state, dropped window rows), so only the rest is prefilled.
  // When the run ends without an error, its sequence goes back into *held.
  SequenceRun(const Model& model, const PrefillPolicy& policy, GenerationRequest request, OnToken on_token = {},
              Speculation speculation = {}, HeldSequence* held = nullptr);
  ~SequenceRun();
  SequenceRun(const SequenceRun&) = delete;
  SequenceRun& operator=(const SequenceRun&) = delete;

  bool finished() const { return phase_ == Phase::finished; }
  bool prefilling() const { return phase_ == Phase::prefill; }
  // Its part of the next step. A prefill chunk takes at most `budget` tokens
  // (none when the budget is 0); a decode row or verify span always runs.
  // Null when it has nothing to run.
  std::optional<SequenceStep> plan(int64_t budget);
  // What the part it planned got back: rows [first_row, first_row + n) of
  // out.logits, n as that SequenceStep asked, or pick `pick` of out.picks.
  void absorb(const StepOutput& out, int64_t first_row, int64_t pick);
  // Samples the next token of a decode row or a prompt's last chunk before
  // absorb() takes it, from this run's row and sampler alone: safe beside
  // other runs' sample_ahead on other threads, so a step's rows are sampled
  // at once. Verify spans, picks and constrained runs (whose masks follow
  // what absorb emits) are left to absorb; so is a row whose sampling
  // throws, which absorb then reports.
  void sample_ahead(const Tensor& logits, int64_t first_row) noexcept;
  // Ends the run now (cancelled, timed out, or its step failed): the state is
  // dropped and the result is final with this finish reason (and error).
  void stop(const std::string& finish_reason, const std::string& error = {});

  const GenerationResult& result() const { return result_; }
  // Prompt tokens that came from the held sequence instead of a prefill.
  int64_t reused_tokens() const { return reused_; }
  const std::string& error() const { return error_; }
  int64_t state_bytes() const { return state_ ? state_->bytes() : 0; }
  // The sequence's state (null once the run has ended).
  const SequenceState* state() const { return state_.get(); }
  // While prefilling: the state, which holds the prompt's first prefilled_tokens() tokens.
  const SequenceState* prefill_state() const { return prefilling() ? state_.get() : nullptr; }
  int64_t prefilled_tokens() const { return prefilled_; }
  const std::vector<int32_t>& prompt() const { return request_.prompt; }

 private:
  enum class Phase { prefill, decode, finished };
  std::span<const float> row(const Tensor& logits, int64_t r);
  // Pick `at` of the step, checked.
  int32_t picked(const StepOutput& out, int64_t at) const;
  // The row next_ came from (empty for a pick), with next_ set: the pick,
  // sample_ahead's draw, or one now.
  std::span<const float> sampled_row(const StepOutput& out, int64_t first_row, int64_t pick);
  bool emit(int32_t id, std::span<const float> logits);  // false when generation ends with it
  void cut_drafts_to_constraint();
  void absorb_prefill(const StepOutput& out, int64_t first_row, int64_t pick);
  void absorb_verify(const StepOutput& out, int64_t first_row, int64_t pick);
  void finish();
  void take_held(int64_t capacity);

  const Model& model_;
  const GenerationRequest request_;
  const OnToken on_token_;
  const Speculation speculation_;
  const int64_t vocab_;
  // Whether the run's tokens are picked on the device (every part that ends
  // in a token asks for a pick): sampling that Backend::pick_rows does
  // (Sampler::pickable) with nothing that reads or changes a row on the host.
  // Verify spans take picks only when greedy.
  const bool picks_;
  bool verify_picks() const { return picks_ && sampler_.greedy(); }
  std::unique_ptr<SequenceState> state_;
  HeldSequence* held_ = nullptr;
  int64_t chunk_ = 0, prefilled_ = 0, planned_ = 0, reused_ = 0;
  Phase phase_ = Phase::prefill;
  Sampler sampler_, draft_sampler_;
  std::optional<DraftLengthPolicy> lengths_;
  std::vector<int32_t> history_;  // the prompt and every generated token
  int32_t next_ = 0;              // generated, not in the cache yet
  bool sampled_ahead_ = false;    // next_ is this step's, sampled from ahead_row_
  std::span<const float> ahead_row_;
  Draft draft_;                   // the drafts being verified
  TokenDistribution target_;
  std::vector<float> adjusted_;
  GenerationResult result_;
  std::string error_;
  std::chrono::steady_clock::time_point started_, first_token_;
};

}  // namespace fathom
