#include "engine/sequence_run.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace fathom {

namespace {

SamplingParams draft_params(SamplingParams p) {
  // The draft model samples with the same parameters from its own stream:
  // what it proposes never changes the output's distribution.
  p.seed ^= 0x9e3779b97f4a7c15ull;
  return p;
}

bool picks_suffice(const GenerationRequest& r, bool reads_logits) {
  return Sampler::pickable(r.sampling) && !r.adjust_logits && !r.constraint && !reads_logits;
}

}  // namespace

int64_t sequence_capacity(const GenerationRequest& request) {
  const int64_t prompt = int64_t(request.prompt.size());
  return std::max(prompt + std::max<int64_t>(request.max_new_tokens, 1), request.capacity);
}

SequenceRun::SequenceRun(const Model& model, const PrefillPolicy& policy, GenerationRequest request, OnToken on_token,
                         Speculation speculation, HeldSequence* held)
    : model_(model),
      request_(std::move(request)),
      on_token_(std::move(on_token)),
      speculation_(speculation.draft_tokens > 0 ? speculation : Speculation{}),
      vocab_(model.config().vocab_size),
      picks_(picks_suffice(request_, on_token_ && request_.token_logits)),
      held_(held),
      sampler_(request_.sampling),
      draft_sampler_(draft_params(request_.sampling)),
      history_(request_.prompt),
      started_(std::chrono::steady_clock::now()) {
  check(request_.max_new_tokens >= 0, "max new tokens must be >= 0, got ", request_.max_new_tokens);
  check(speculation.draft_tokens >= 0, "draft tokens must be >= 0, got ", speculation.draft_tokens);
  validate_token_ids(request_.prompt, vocab_);
  const int64_t prompt = int64_t(request_.prompt.size());
  const int64_t capacity = sequence_capacity(request_);
  take_held(capacity);
  if (!state_) state_ = model_.new_state(capacity);
  chunk_ = policy.chunk_size(prompt, capacity);
  if (speculation_.drafter && speculation_.adaptive)
    lengths_.emplace(speculation_.draft_tokens, speculation_.drafter->relative_cost());
  result_.finish_reason = "length";
}

void SequenceRun::take_held(int64_t capacity) {
  if (!held_ || !held_->state || !held_->state->valid() || held_->state->capacity < capacity) return;
  std::unique_ptr<SequenceState> state = std::move(held_->state);
  const std::vector<int32_t>& tokens = held_->tokens;
  check(int64_t(tokens.size()) == state->length(), "sequence run: the held state holds ", state->length(),
        " tokens, not ", tokens.size());
  // The prompt's last token always runs again: its logits give the first new token.
  const size_t most = request_.prompt.size() - 1;
  size_t common = 0;
  while (common < tokens.size() && common < most && tokens[common] == request_.prompt[common]) ++common;
  try {
    state->trim(int64_t(common));
  } catch (const Error&) {
    return;  // layers that cannot go back there: a fresh state
  }
  state_ = std::move(state);
  prefilled_ = reused_ = int64_t(common);
}

SequenceRun::~SequenceRun() {
  if (speculation_.drafter) speculation_.drafter->finish();
}

std::span<const float> SequenceRun::row(const Tensor& logits, int64_t r) {
  const std::span<const float> raw(logits.data<float>() + r * vocab_, size_t(vocab_));
  if (!request_.adjust_logits && !request_.constraint) return raw;
  adjusted_.assign(raw.begin(), raw.end());  // valid until the next row
  if (request_.adjust_logits) request_.adjust_logits(adjusted_, result_.ids);
  if (request_.constraint)
    request_.constraint->mask(adjusted_, request_.max_new_tokens - int64_t(result_.ids.size()));
  return adjusted_;
}

bool SequenceRun::emit(int32_t id, std::span<const float> logits) {
  // Sampled from masked logits, so allowed, unless the mask left nothing.
  check(!request_.constraint || request_.constraint->accept(id), "constrained decoding: token ", id,
        " breaks the constraint (no allowed token had a finite logit)");
  result_.ids.push_back(id);
  history_.push_back(id);
  const bool keep_going = !on_token_ || on_token_({id, logits});
  const auto& stops = request_.stop_ids;
  if (!keep_going || std::find(stops.begin(), stops.end(), id) != stops.end()) {
    result_.finish_reason = "stop";
    return false;
  }
  return int64_t(result_.ids.size()) < request_.max_new_tokens;
}

std::optional<SequenceStep> SequenceRun::plan(int64_t budget) {
  if (phase_ == Phase::finished) return std::nullopt;
  if (phase_ == Phase::prefill) {
    const int64_t total = int64_t(request_.prompt.size());
    planned_ = std::min({chunk_, total - prefilled_, budget});
    if (planned_ <= 0) return std::nullopt;
    const auto begin = request_.prompt.begin() + prefilled_;
    const bool last = prefilled_ + planned_ == total;
    const WantLogits want = !last ? WantLogits::none
                            : picks_ && request_.max_new_tokens > 0 ? WantLogits::pick
                                                                     : WantLogits::last;
    return SequenceStep{state_.get(), {begin, begin + planned_}, want,
                        want == WantLogits::pick ? sampler_.next_pick_rule() : PickRule{}};
  }
  // Decode: the pending token, and drafts when a drafter has some.
  draft_ = {};
  const int64_t remaining = request_.max_new_tokens - int64_t(result_.ids.size());
  const int64_t wanted = lengths_ ? lengths_->next() : speculation_.draft_tokens;
  const int64_t most = std::min({wanted, remaining - 1, state_->max_verify_rows() - 1});
  if (speculation_.drafter && most >= 1) draft_ = speculation_.drafter->propose(history_, most, draft_sampler_);
  const int64_t proposed = int64_t(draft_.tokens.size());
  check(proposed <= std::max<int64_t>(most, 0) && (draft_.dists.empty() || int64_t(draft_.dists.size()) == proposed),
        "speculative decoding: the drafter returned ", proposed, " tokens and ", draft_.dists.size(),
        " distributions for at most ", most);
  for (int32_t d : draft_.tokens)
    check(d >= 0 && d < vocab_, "speculative decoding: draft token ", d, " is out of range");
  if (request_.constraint) cut_drafts_to_constraint();
  const int64_t drafted = int64_t(draft_.tokens.size());
  ++result_.spec.target_passes;
  if (drafted == 0)
    return picks_ ? SequenceStep{state_.get(), {next_}, WantLogits::pick, sampler_.next_pick_rule()}
                  : SequenceStep{state_.get(), {next_}, WantLogits::last, {}};
  std::vector<int32_t> ids = {next_};
  ids.insert(ids.end(), draft_.tokens.begin(), draft_.tokens.end());
  state_->begin(int64_t(ids.size()));
  // Greedy verification needs each row's pick alone; sampled verification
  // judges drafts against the rows' distributions on the host.
  return SequenceStep{state_.get(), std::move(ids), verify_picks() ? WantLogits::pick_all : WantLogits::all, {}};
}

void SequenceRun::cut_drafts_to_constraint() {
  // Drafts past the first one the constraint rejects could never be accepted
  // (their target probability is 0 once masked): do not verify them.
  int64_t allowed = 0;
  for (const int32_t d : draft_.tokens) {
    if (!request_.constraint->accept(d)) break;
    ++allowed;
  }
  request_.constraint->rollback(allowed);
  draft_.tokens.resize(size_t(allowed));
  if (!draft_.dists.empty()) draft_.dists.resize(size_t(allowed));
}

void SequenceRun::sample_ahead(const Tensor& logits, int64_t first_row) noexcept {
  sampled_ahead_ = false;
  if (phase_ == Phase::finished || picks_ || request_.constraint || !draft_.tokens.empty()) return;
  if (phase_ == Phase::prefill &&
      (prefilled_ + planned_ < int64_t(request_.prompt.size()) || request_.max_new_tokens == 0))
    return;
  try {
    ahead_row_ = row(logits, first_row);
    next_ = sampler_.sample(ahead_row_, history_);
    sampled_ahead_ = true;
  } catch (...) {  // absorb samples again and reports it
  }
}

int32_t SequenceRun::picked(const StepOutput& out, int64_t at) const {
  check(at >= 0 && at < out.picks.numel(), "sequence run: pick ", at, " of a step with ", out.picks.numel());
  const int32_t id = out.picks.data<int32_t>()[at];
  check(id >= 0 && id < vocab_, "sequence run: picked token ", id, " is out of range");
  return id;
}

std::span<const float> SequenceRun::sampled_row(const StepOutput& out, int64_t first_row, int64_t pick) {
  if (picks_) {
    next_ = picked(out, pick);
    return {};
  }
  if (std::exchange(sampled_ahead_, false)) return ahead_row_;
  const auto r = row(out.logits, first_row);
  next_ = sampler_.sample(r, history_);
  return r;
}

void SequenceRun::absorb(const StepOutput& out, int64_t first_row, int64_t pick) {
  check(phase_ != Phase::finished, "sequence run: logits for a finished run");
  if (phase_ == Phase::prefill) return absorb_prefill(out, first_row, pick);
  if (!draft_.tokens.empty()) return absorb_verify(out, first_row, pick);
  const auto r = sampled_row(out, first_row, pick);
  if (!emit(next_, r)) finish();
}

void SequenceRun::absorb_prefill(const StepOutput& out, int64_t first_row, int64_t pick) {
  prefilled_ += planned_;
  if (prefilled_ < int64_t(request_.prompt.size())) return;
  first_token_ = std::chrono::steady_clock::now();
  result_.prefill_seconds = std::chrono::duration<double>(first_token_ - started_).count();
  phase_ = Phase::decode;
  if (request_.max_new_tokens == 0) return finish();
  const auto first = sampled_row(out, first_row, pick);
  if (!emit(next_, first)) finish();
}

void SequenceRun::absorb_verify(const StepOutput& out, int64_t first_row, int64_t pick) {
  // Each row judges the draft after it; the row after the last draft gives a bonus token.
  const int64_t drafted = int64_t(draft_.tokens.size());
  int64_t accepted = 0;
  bool going = true;
  std::span<const float> pending;  // stays empty for picks
  const bool picks = verify_picks();
  for (int64_t i = 0;; ++i) {
    if (!picks) pending = row(out.logits, first_row + i);
    if (i == drafted) {
      next_ = picks ? picked(out, pick + i) : sampler_.sample(pending, history_);
      break;
    }
    DraftVerdict verdict;
    if (picks) {
      // Greedy: the target is all on the row's pick, so the draft stands
      // exactly when it is the pick, which replaces it otherwise (what
      // judge_draft decides for a point mass).
      const int32_t best = picked(out, pick + i);
      verdict = {best == draft_.tokens[size_t(i)], best};
    } else {
      sampler_.distribution(pending, history_, target_);
      const TokenDistribution* q = draft_.dists.empty() ? nullptr : &draft_.dists[size_t(i)];
      verdict = judge_draft(target_, q, draft_.tokens[size_t(i)], sampler_);
    }
    next_ = verdict.token;
    if (!verdict.accepted) break;
    ++accepted;
    going = emit(next_, pending);
    if (!going) break;
  }
  result_.spec.drafted += drafted;
  result_.spec.accepted += accepted;
  if (lengths_) lengths_->observe(drafted, accepted);
  state_->resolve(accepted + 1);
  draft_ = {};
  if (!going || !emit(next_, pending)) finish();
}

void SequenceRun::finish() {
  if (phase_ == Phase::decode)  // from the first token to the last
    result_.decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - first_token_).count();
  phase_ = Phase::finished;
  if (held_ && state_ && state_->valid() && !state_->in_transaction()) {
    held_->tokens.assign(history_.begin(), history_.begin() + state_->length());
    held_->state = std::move(state_);
  }
  state_.reset();
  if (speculation_.drafter) speculation_.drafter->finish();
}

void SequenceRun::stop(const std::string& finish_reason, const std::string& error) {
  if (phase_ == Phase::finished) return;
  if (!error.empty()) held_ = nullptr;  // a failed step may have left the state half-written
  finish();
  result_.finish_reason = finish_reason;
  error_ = error;
}

}  // namespace fathom
