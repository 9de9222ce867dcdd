#pragma once
// One forward step shared by many sequence runs: continuous batching's unit.
#include <cstdint>
#include <span>

#include "engine/prefill_policy.h"
#include "engine/sequence_run.h"
#include "model/model.h"

namespace fathom {

// The most tokens a step takes by default (every decode row, then prefill
// chunks): the largest prefill chunk on the model's device.
inline int64_t step_tokens(const Model& model) { return max_prefill_chunk(model.backend().device()); }

// Runs one step over `runs`: every decoding run's row (or verify span) first,
// then prefill chunks of prefilling runs, in order, while the step holds
// fewer than `token_budget` tokens. A run that fails to plan or absorb stops
// with finish reason "error"; a failed forward stops every run in the step.
// Finished runs stay in `runs` (finished() says so). Returns false when no
// run had anything to run.
bool run_step(const Model& model, std::span<SequenceRun* const> runs, int64_t token_budget);

}  // namespace fathom
