#include "engine/prefill_policy.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

FixedPrefillPolicy::FixedPrefillPolicy(int64_t chunk) : chunk_(chunk) {
  check(chunk > 0, "prefill chunk must be positive, got ", chunk);
}

int64_t FixedPrefillPolicy::chunk_size(int64_t prompt_tokens) const {
  return std::max<int64_t>(1, std::min(chunk_, prompt_tokens));
}

}  // namespace fathom
