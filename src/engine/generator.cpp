#include "engine/generator.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"

namespace fathom {

void validate_token_ids(const std::vector<int32_t>& ids, int64_t vocab_size) {
  check(!ids.empty(), "prompt is empty");
  for (int32_t id : ids)
    check(id >= 0 && id < vocab_size, "token id ", id, " is out of range [0, ", vocab_size, ")");
}

Tensor prefill(const Model& model, SequenceState& state, const std::vector<int32_t>& prompt,
               const PrefillPolicy& policy, bool all_logits) {
  validate_token_ids(prompt, model.config().vocab_size);
  const int64_t total = int64_t(prompt.size());
  const int64_t chunk = policy.chunk_size(total, state.capacity);
  const int64_t vocab = model.config().vocab_size;
  Tensor out = Tensor::empty({all_logits ? total : 1, vocab}, DType::f32);
  for (int64_t begin = 0; begin < total; begin += chunk) {
    const int64_t end = std::min(total, begin + chunk);
    const std::vector<int32_t> ids(prompt.begin() + begin, prompt.begin() + end);
    const bool last_chunk = end == total;
    Tensor logits = model.forward(ids, state, all_logits);
    if (all_logits)
      std::memcpy(out.data<float>() + begin * vocab, logits.raw(), logits.nbytes());
    else if (last_chunk)
      std::memcpy(out.raw(), logits.raw(), logits.nbytes());
  }
  return out;
}

GenerationResult generate(const Model& model, const PrefillPolicy& policy, const GenerationRequest& request,
                          const std::function<bool(const GeneratedToken&)>& on_token, const Speculation& speculation) {
  check(request.max_new_tokens >= 0, "max new tokens must be >= 0, got ", request.max_new_tokens);
  check(speculation.draft_tokens >= 0, "draft tokens must be >= 0, got ", speculation.draft_tokens);
  const int64_t vocab = model.config().vocab_size;
  validate_token_ids(request.prompt, vocab);
  const int64_t capacity = int64_t(request.prompt.size()) + std::max<int64_t>(request.max_new_tokens, 1);
  auto state = model.new_state(capacity);
  Sampler sampler(request.sampling);
  // The draft model samples with the same parameters from its own stream:
  // what it proposes never changes the output's distribution.
  SamplingParams draft_params = request.sampling;
  draft_params.seed ^= 0x9e3779b97f4a7c15ull;
  Sampler draft_sampler(draft_params);
  std::vector<int32_t> history = request.prompt;
  GenerationResult result;
  result.finish_reason = "length";
  Drafter* drafter = speculation.draft_tokens > 0 ? speculation.drafter : nullptr;
  struct FinishDrafter {  // however generation ends
    Drafter* drafter;
    ~FinishDrafter() {
      if (drafter) drafter->finish();
    }
  } finish_drafter{drafter};
  std::optional<DraftLengthPolicy> lengths;
  if (drafter && speculation.adaptive) lengths.emplace(speculation.draft_tokens, drafter->relative_cost());

  // Row r of `logits`, after adjust_logits (then a copy, valid until the next call).
  std::vector<float> adjusted;
  auto row = [&](const Tensor& logits, int64_t r) {
    const std::span<const float> raw(logits.data<float>() + r * vocab, size_t(vocab));
    if (!request.adjust_logits) return raw;
    adjusted.assign(raw.begin(), raw.end());
    request.adjust_logits(adjusted, result.ids);
    return std::span<const float>(adjusted);
  };
  // Records a generated id; false when generation ends with it.
  auto emit = [&](int32_t id, std::span<const float> logits) {
    result.ids.push_back(id);
    history.push_back(id);
    const bool keep_going = !on_token || on_token({id, logits, state->bytes()});
    if (!keep_going || std::find(request.stop_ids.begin(), request.stop_ids.end(), id) != request.stop_ids.end()) {
      result.finish_reason = "stop";
      return false;
    }
    return int64_t(result.ids.size()) < request.max_new_tokens;
  };

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  Tensor logits = prefill(model, *state, request.prompt, policy, /*all_logits=*/false);
  const auto t1 = clock::now();
  result.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  // `next` has been generated but is not in the cache yet.
  bool going = request.max_new_tokens > 0;
  int32_t next = 0;
  if (going) {
    const auto first = row(logits, 0);
    next = sampler.sample(first, history);
    going = emit(next, first);
  }
  TokenDistribution target;
  while (going) {
    const int64_t remaining = request.max_new_tokens - int64_t(result.ids.size());
    const int64_t wanted = lengths ? lengths->next() : speculation.draft_tokens;
    const int64_t most = std::min({wanted, remaining - 1, state->max_verify_rows() - 1});
    Draft draft;
    if (drafter && most >= 1) draft = drafter->propose(history, most, draft_sampler);
    const int64_t drafted = int64_t(draft.tokens.size());
    check(drafted <= std::max<int64_t>(most, 0) && (draft.dists.empty() || int64_t(draft.dists.size()) == drafted),
          "speculative decoding: the drafter returned ", drafted, " tokens and ", draft.dists.size(),
          " distributions for at most ", most);
    for (int32_t d : draft.tokens) check(d >= 0 && d < vocab, "speculative decoding: draft token ", d, " is out of range");
    ++result.spec.target_passes;
    if (drafted == 0) {
      logits = model.forward({next}, *state, false);
      const auto r = row(logits, 0);
      next = sampler.sample(r, history);
      going = emit(next, r);
      continue;
    }
    // Verify: the pending token and its drafts in one step; each row judges
    // the draft after it, and the row after the last draft gives a bonus token.
    std::vector<int32_t> step = {next};
    step.insert(step.end(), draft.tokens.begin(), draft.tokens.end());
    state->begin(int64_t(step.size()));
    const Tensor verify = model.forward(step, *state, /*all_logits=*/true);
    int64_t accepted = 0;
    std::span<const float> pending_logits;
    for (int64_t i = 0;; ++i) {
      pending_logits = row(verify, i);
      if (i == drafted) {
        next = sampler.sample(pending_logits, history);
        break;
      }
      sampler.distribution(pending_logits, history, target);
      const DraftVerdict verdict =
          judge_draft(target, draft.dists.empty() ? nullptr : &draft.dists[size_t(i)], draft.tokens[size_t(i)], sampler);
      next = verdict.token;
      if (!verdict.accepted) break;
      ++accepted;
      going = emit(next, pending_logits);
      if (!going) break;
    }
    result.spec.drafted += drafted;
    result.spec.accepted += accepted;
    if (lengths) lengths->observe(drafted, accepted);
    const int64_t replay = state->resolve(accepted + 1);
    if (replay > 0) {  // recurrent layers went back to the checkpoint
      model.forward({step.begin(), step.begin() + replay}, *state, false);
      ++result.spec.replays;
    }
    if (!going) break;
    going = emit(next, pending_logits);
  }
  result.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return result;
}

}  // namespace fathom
