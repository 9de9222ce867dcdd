#include "engine/generator.h"

#include <algorithm>
#include <cstring>

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
                          const std::function<bool(int32_t)>& on_token, const Speculation& speculation) {
  check(request.max_new_tokens >= 0, "max new tokens must be >= 0, got ", request.max_new_tokens);
  check(speculation.draft_tokens >= 0, "draft tokens must be >= 0, got ", speculation.draft_tokens);
  const int64_t vocab = model.config().vocab_size;
  validate_token_ids(request.prompt, vocab);
  const int64_t capacity = int64_t(request.prompt.size()) + std::max<int64_t>(request.max_new_tokens, 1);
  auto state = model.new_state(capacity);
  Sampler sampler(request.sampling);
  std::vector<int32_t> history = request.prompt;
  GenerationResult result;
  result.finish_reason = "length";
  // Speculation keeps exactly what plain decoding would produce only when
  // every token is the target's argmax.
  Drafter* drafter = request.sampling.temperature < 1e-5f ? speculation.drafter : nullptr;

  // Records a generated id; false when generation ends with it.
  auto emit = [&](int32_t id) {
    result.ids.push_back(id);
    history.push_back(id);
    const bool keep_going = !on_token || on_token(id);
    if (!keep_going || std::find(request.stop_ids.begin(), request.stop_ids.end(), id) != request.stop_ids.end()) {
      result.finish_reason = "stop";
      return false;
    }
    return int64_t(result.ids.size()) < request.max_new_tokens;
  };
  auto row = [&](const Tensor& logits, int64_t r) {
    return std::span<const float>(logits.data<float>() + r * vocab, size_t(vocab));
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
    next = sampler.sample(row(logits, 0), history);
    going = emit(next);
  }
  while (going) {
    std::vector<int32_t> drafts;
    const int64_t remaining = request.max_new_tokens - int64_t(result.ids.size());
    const int64_t most = std::min({speculation.draft_tokens, remaining - 1, state->max_verify_rows() - 1});
    if (drafter && most >= 1) drafts = drafter->propose(history, most);
    for (int32_t d : drafts) check(d >= 0 && d < vocab, "speculative decoding: draft token ", d, " is out of range");
    ++result.spec.target_passes;
    if (drafts.empty()) {
      logits = model.forward({next}, *state, false);
      next = sampler.sample(row(logits, 0), history);
      going = emit(next);
      continue;
    }
    // Verify: the pending token and its drafts in one step.
    std::vector<int32_t> step = {next};
    step.insert(step.end(), drafts.begin(), drafts.end());
    state->begin(int64_t(step.size()));
    const Tensor verify = model.forward(step, *state, /*all_logits=*/true);
    int64_t accepted = 0;
    int32_t target = 0;
    for (int64_t i = 0;; ++i) {
      target = sampler.sample(row(verify, i), history);
      if (i == int64_t(drafts.size()) || target != drafts[size_t(i)]) break;
      ++accepted;
      going = emit(target);
      if (!going) break;
    }
    result.spec.drafted += int64_t(drafts.size());
    result.spec.accepted += accepted;
    const int64_t replay = state->resolve(accepted + 1);
    if (replay > 0) {  // recurrent layers went back to the checkpoint
      model.forward({step.begin(), step.begin() + replay}, *state, false);
      ++result.spec.replays;
    }
    if (!going) break;
    next = target;
    going = emit(next);
  }
  result.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return result;
}

}  // namespace fathom
