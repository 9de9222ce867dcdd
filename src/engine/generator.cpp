#include "engine/generator.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "engine/run_step.h"
#include "engine/sequence_run.h"

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
  SequenceRun run(model, policy, request, on_token, speculation);
  SequenceRun* const runs[] = {&run};
  while (!run.finished()) run_step(model, runs, std::numeric_limits<int64_t>::max());
  if (!run.error().empty()) fail(run.error());
  return run.result();
}

}  // namespace fathom
