#include "server/engine_worker.h"

#include <malloc.h>

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "engine/generator.h"
#include "engine/run_step.h"
#include "engine/token_logprobs.h"

namespace fathom::server {

Job::Next Job::next(TokenEvent& out, std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, wait, [&] { return !events_.empty() || finished_; });
  if (!events_.empty()) {
    out = std::move(events_.front());
    events_.pop_front();
    return Next::token;
  }
  return finished_ ? Next::finished : Next::waiting;
}

std::string Job::finish_reason() const {
  std::lock_guard lock(mutex_);
  return finish_reason_;
}

std::string Job::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Job::push(TokenEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_all();
}

void Job::finish(std::string finish_reason, std::string error) {
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
    finish_reason_ = std::move(finish_reason);
    error_ = std::move(error);
  }
  prompt_ready = true;  // whoever waits for this job's prompt starts without it
  ready_.notify_all();
}

EngineWorker::EngineWorker(const Model& model, const PrefillPolicy& policy, MemoryAdmission& admission,
                           Metrics& metrics, size_t max_queued, Speculation speculation, size_t max_running,
                           int64_t prefix_cache_bytes)
    : model_(model),
      policy_(policy),
      admission_(admission),
      metrics_(metrics),
      max_queued_(max_queued),
      max_running_(std::max<size_t>(1, max_running)),
      speculation_(speculation),
      prefix_cache_(prefix_cache_bytes),
      thread_([this] { loop(); }) {}

EngineWorker::~EngineWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (auto& job : queue_) job->finish("cancelled", "server is shutting down");
    queue_.clear();
  }
  wake_.notify_all();
  thread_.join();
}

bool EngineWorker::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(job);
    metrics_.queue_depth = int64_t(queue_.size());
  }
  wake_.notify_one();
  return true;
}

size_t EngineWorker::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

namespace {

// The OpenAI-side logit changes: bias per id, then the presence penalty once
// and the frequency penalty per occurrence for every id generated so far.
void adjust_openai_logits(const JobSpec& spec, std::span<float> logits, std::span<const int32_t> generated) {
  for (const auto& [id, bias] : spec.logit_bias) logits[size_t(id)] += bias;
  if (spec.presence_penalty == 0.0f && spec.frequency_penalty == 0.0f) return;
  std::unordered_map<int32_t, int> counts;
  for (int32_t id : generated) ++counts[id];
  for (const auto& [id, count] : counts)
    logits[size_t(id)] -= spec.presence_penalty + spec.frequency_penalty * float(count);
}

}  // namespace

// A job the engine is running: its sequence, its drafter, and what it was charged.
struct EngineWorker::Running {
  std::shared_ptr<Job> job;
  int64_t bytes = 0;
  std::unique_ptr<Drafter> drafter;
  HeldSequence held;  // the prefix cache's fork it starts from; its sequence when it ends
  std::unique_ptr<SequenceRun> run;
  std::string ended_by;  // "cancelled" or "timeout" when the job stopped early
  int64_t checkpointed = 0;  // prompt tokens last kept in the prefix cache mid-prefill
  Clock::time_point last;
  bool first = true;
};

std::unique_ptr<EngineWorker::Running> EngineWorker::start(const std::shared_ptr<Job>& job, int64_t bytes) {
  auto r = std::make_unique<Running>();
  Running& self = *r;
  r->job = job;
  r->bytes = bytes;
  const JobSpec& spec = job->spec;
  GenerationRequest request;
  request.prompt = spec.prompt;
  request.max_new_tokens = spec.max_tokens;
  request.sampling = spec.sampling;
  request.stop_ids = spec.stop_ids;
  request.token_logits = spec.top_logprobs >= 0;  // on_token's log-probabilities read them
  if (spec.grammar)
    request.constraint = std::make_shared<grammar::GrammarConstraint>(
        spec.grammar, std::vector<int32_t>(spec.stop_ids.begin(), spec.stop_ids.end()), spec.reasoning);
  if (!spec.logit_bias.empty() || spec.presence_penalty != 0.0f || spec.frequency_penalty != 0.0f)
    request.adjust_logits = [&spec](std::span<float> logits, std::span<const int32_t> generated) {
      adjust_openai_logits(spec, logits, generated);
    };
  auto on_token = [this, &self](const GeneratedToken& token) {
    const JobSpec& spec = self.job->spec;
    TokenEvent event;
    event.id = token.id;
    if (spec.top_logprobs >= 0) {
      TokenLogprobs lp = token_logprobs(token.logits, token.id, spec.top_logprobs);
      event.logprob = lp.logprob;
      event.top = std::move(lp.top);
    }
    const auto now = Clock::now();
    if (self.first)
      metrics_.time_to_first_token.observe(std::chrono::duration<double>(now - self.job->enqueued).count());
    else
      metrics_.inter_token_latency.observe(std::chrono::duration<double>(now - self.last).count());
    self.first = false;
    self.last = now;
    ++metrics_.generated_tokens;
    self.job->push(std::move(event));
    if (self.job->cancelled) self.ended_by = "cancelled";
    else if (now > spec.deadline) self.ended_by = "timeout";
    return self.ended_by.empty();
  };
  Speculation speculation = speculation_;
  if (speculation.drafter) {
    r->drafter = speculation.drafter->fork();
    speculation.drafter = r->drafter.get();
  }
  ++metrics_.prefix_cache_lookups;
  if (auto fork = prefix_cache_.lookup(request.prompt, sequence_capacity(request))) r->held = std::move(*fork);
  r->run = std::make_unique<SequenceRun>(model_, policy_, std::move(request), on_token, speculation, &r->held);
  if (const int64_t cached = r->run->reused_tokens(); cached > 0) {
    job->cached_tokens = cached;
    ++metrics_.prefix_cache_hits;
    metrics_.prefix_cache_tokens += cached;
  }
  return r;
}

void EngineWorker::end(Running& r) {
  // Not running from the moment its client can learn that it ended: a client
  // that reads /metrics after its last answer's end sees it gone, even while
  // this step's other runs are still being ended.
  --metrics_.running;
  const SequenceRun& run = *r.run;
  metrics_.drafted_tokens += run.result().spec.drafted;
  metrics_.accepted_tokens += run.result().spec.accepted;
  const std::string reason = r.ended_by.empty() ? run.result().finish_reason : r.ended_by;
  if (!run.error().empty()) {
    r.job->finish("error", run.error());
  } else if (reason == "cancelled" || reason == "timeout") {
    ++metrics_.cancelled;
    r.job->finish(reason);
  } else {
    metrics_.request_duration.observe(std::chrono::duration<double>(Clock::now() - r.job->enqueued).count());
    r.job->finish(reason);
  }
  admission_.release(r.bytes);
  if (run.error().empty() && r.ended_by.empty()) prefix_cache_.insert(std::move(r.held));
}

void EngineWorker::share_prompt(Running& r) {
  if (!r.job->share_prompt || r.job->prompt_ready || r.run->prefilling()) return;
  if (const SequenceState* state = r.run->state()) prefix_cache_.keep_prompt(*state, r.run->prompt());
  r.job->prompt_ready = true;
  wake_.notify_all();
}

bool EngineWorker::admit(std::vector<std::unique_ptr<Running>>& running) {
  // Idle again: hand back what the requests' smaller buffers (under the
  // mmap threshold: logits rows, sampling scratch) left free in this thread's
  // malloc arena, so resident memory falls back to what the contract counts.
  if (running.empty() && !arena_trimmed_) {
    malloc_trim(0);
    arena_trimmed_ = true;
  }
  std::unique_lock lock(mutex_);
  if (running.empty()) wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
  if (stopping_) return true;
  while (!queue_.empty() && running.size() < max_running_) {
    std::shared_ptr<Job> job = queue_.front();
    // The next choice of a request waits for the first one's prompt (which
    // runs, or is ahead in the queue), so that it forks it instead of prefilling.
    if (job->prompt_source && !job->prompt_source->prompt_ready && !job->cancelled) break;
    if (job->cancelled || Clock::now() > job->spec.deadline) {
      queue_.pop_front();
      ++metrics_.cancelled;
      job->finish(job->cancelled ? "cancelled" : "timeout");
      continue;
    }
    // A job waits while what runs holds the memory it needs (make_job
    // refused any that could not fit even alone).
    const int64_t bytes = admission_.sequence_bytes(job_tokens(job->spec));
    if (!admission_.try_admit(bytes)) {
      if (!running.empty()) break;
      queue_.pop_front();
      job->finish("error", "the request does not fit the memory budget");
      continue;
    }
    queue_.pop_front();
    try {
      running.push_back(start(job, bytes));
      arena_trimmed_ = false;
    } catch (const std::bad_alloc&) {
      admission_.release(bytes);
      job->finish("error", "out of memory");
    } catch (const std::exception& e) {
      admission_.release(bytes);
      job->finish("error", e.what());
    }
  }
  metrics_.queue_depth = int64_t(queue_.size());
  return false;
}

void EngineWorker::loop() {
  std::vector<std::unique_ptr<Running>> running;
  for (;;) {
    if (admit(running)) {
      for (auto& r : running) {
        r->run->stop("cancelled", "server is shutting down");
        r->job->finish("cancelled", "server is shutting down");
        admission_.release(r->bytes);
      }
      return;
    }
    metrics_.running = int64_t(running.size());
    // Cancellations and deadlines take effect at every step, prefill included.
    std::vector<SequenceRun*> runs;
    for (auto& r : running) {
      if (r->job->cancelled) r->run->stop("cancelled");
      else if (Clock::now() > r->job->spec.deadline) r->run->stop("timeout");
      runs.push_back(r->run.get());
    }
    try {
      run_step(model_, runs, step_tokens(model_));
    } catch (const std::exception& e) {  // outside any one run (building the step): end them all, keep serving
      for (SequenceRun* run : runs) run->stop("error", std::string("engine step failed: ") + e.what());
    }
    int64_t kv_bytes = 0;
    for (auto it = running.begin(); it != running.end();) {
      if ((*it)->run->finished()) {
        end(**it);
        it = running.erase(it);
      } else {
        Running& r = **it;
        if (const SequenceState* state = r.run->prefill_state())
          prefix_cache_.checkpoint(*state, r.run->prompt(), r.checkpointed);
        share_prompt(r);
        kv_bytes += r.run->state_bytes();
        ++it;
      }
    }
    metrics_.kv_bytes_in_use = kv_bytes;
    metrics_.prefix_cache_bytes = prefix_cache_.bytes();
    metrics_.running = int64_t(running.size());
  }
}

}  // namespace fathom::server
