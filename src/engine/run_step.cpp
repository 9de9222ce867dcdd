#include "engine/run_step.h"

#include <new>
#include <vector>

#include "core/thread_pool.h"

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

constexpr int64_t kSamplingRowsPerThread = 8;

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

  StepOutput out;
  try {
    out = model.forward(step);
  } catch (const std::bad_alloc&) {
    for (SequenceRun* run : planned) run->stop("error", "out of memory");
    return true;
  } catch (const std::exception& e) {
    for (SequenceRun* run : planned) run->stop("error", e.what());
    return true;
  }
  std::vector<int64_t> first_rows(planned.size()), picks(planned.size());
  for (size_t i = 1; i < planned.size(); ++i) {
    first_rows[i] = first_rows[i - 1] + step[i - 1].logit_rows();
    picks[i] = picks[i - 1] + step[i - 1].picks();
  }
  // Each run samples from its own row with its own sampler: a wide step's
  // rows are sampled across the pool's threads, kSamplingRowsPerThread or
  // more each (64 rows of a 128k vocabulary on one thread held a GPU's
  // batch-64 step back by milliseconds), then absorbed in order, which emits
  // and may stop runs. A narrow step samples on this thread: at 8 rows, the
  // pool's wake-up and its workers' spinning after it cost a GPU server more
  // than they saved (bench/RESULTS.md).
  if (int64_t(planned.size()) >= 2 * kSamplingRowsPerThread)
    ThreadPool::global().parallel_for(int64_t(planned.size()), kSamplingRowsPerThread, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) planned[size_t(i)]->sample_ahead(out.logits, first_rows[size_t(i)]);
    });
  for (size_t i = 0; i < planned.size(); ++i)
    or_stop(*planned[i], [&] { planned[i]->absorb(out, first_rows[i], picks[i]); });
  return true;
}

}  // namespace fathom
