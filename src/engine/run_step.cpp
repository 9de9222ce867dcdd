#include "engine/run_step.h"

#include <new>
#include <vector>

namespace fathom {

namespace {

// Runs `body`; a failure stops `run` with its message instead of escaping.
template <class Body>
void or_stop(SequenceRun& run, Body&& body) {
  try {
    body();
  } catch (const std::bad_alloc&) {
    run.stop("error", "out of memory");
  } catch (const std::exception& e) {
    run.stop("error", e.what());
  }
}

}  // namespace

bool run_step(const Model& model, std::span<SequenceRun* const> runs, int64_t token_budget) {
  std::vector<SequenceStep> step;
  std::vector<SequenceRun*> planned;
  int64_t tokens = 0;
  for (const bool decoding : {true, false})
    for (SequenceRun* run : runs) {
      if (run->finished() || run->prefilling() == decoding) continue;
      or_stop(*run, [&] {
        if (auto part = run->plan(decoding ? 0 : token_budget - tokens)) {
          tokens += int64_t(part->ids.size());
          step.push_back(std::move(*part));
          planned.push_back(run);
        }
      });
    }
  if (step.empty()) return false;

  Tensor logits;
  try {
    logits = model.forward(step);
  } catch (const std::bad_alloc&) {
    for (SequenceRun* run : planned) run->stop("error", "out of memory");
    return true;
  } catch (const std::exception& e) {
    for (SequenceRun* run : planned) run->stop("error", e.what());
    return true;
  }
  int64_t row = 0;
  for (size_t i = 0; i < planned.size(); ++i) {
    or_stop(*planned[i], [&] { planned[i]->absorb(logits, row); });
    row += step[i].logit_rows();
  }
  return true;
}

}  // namespace fathom
