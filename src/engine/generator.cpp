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
                          const std::function<bool(int32_t)>& on_token) {
  check(request.max_new_tokens >= 0, "max new tokens must be >= 0, got ", request.max_new_tokens);
  const int64_t vocab = model.config().vocab_size;
  validate_token_ids(request.prompt, vocab);
  const int64_t capacity = int64_t(request.prompt.size()) + std::max<int64_t>(request.max_new_tokens, 1);
  auto state = model.new_state(capacity);
  Sampler sampler(request.sampling);
  std::vector<int32_t> history = request.prompt;
  GenerationResult result;
  result.finish_reason = "length";

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  Tensor logits = prefill(model, *state, request.prompt, policy, /*all_logits=*/false);
  const auto t1 = clock::now();
  result.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  for (int64_t step = 0; step < request.max_new_tokens; ++step) {
    const int32_t next = sampler.sample({logits.data<float>(), size_t(vocab)}, history);
    result.ids.push_back(next);
    history.push_back(next);
    const bool keep_going = !on_token || on_token(next);
    if (!keep_going ||
        std::find(request.stop_ids.begin(), request.stop_ids.end(), next) != request.stop_ids.end()) {
      result.finish_reason = "stop";
      break;
    }
    if (step + 1 == request.max_new_tokens) break;
    logits = model.forward({next}, *state, false);
  }
  result.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return result;
}

}  // namespace fathom
