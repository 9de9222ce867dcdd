#include "server/engine_worker.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/error.h"
#include "engine/generator.h"

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
  ready_.notify_all();
}

EngineWorker::EngineWorker(const Model& model, const PrefillPolicy& policy, MemoryAdmission& admission,
                           Metrics& metrics, size_t max_queued)
    : model_(model),
      policy_(policy),
      admission_(admission),
      metrics_(metrics),
      max_queued_(max_queued),
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

void EngineWorker::loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      metrics_.queue_depth = int64_t(queue_.size());
    }
    if (job->cancelled) {
      job->finish("cancelled");
      ++metrics_.cancelled;
      continue;
    }
    // One sequence runs at a time, so a job that fits alone (make_job checked)
    // always fits here; running several at once (continuous batching) is
    // where a job will wait for memory to free.
    const int64_t bytes = admission_.sequence_bytes(job_tokens(job->spec));
    if (!admission_.try_admit(bytes)) {
      job->finish("error", "the request does not fit the memory budget beside the running work");
      continue;
    }
    ++metrics_.running;
    try {
      run(*job);
    } catch (const std::bad_alloc&) {
      job->finish("error", "out of memory");
    } catch (const std::exception& e) {
      job->finish("error", e.what());
    }
    admission_.release(bytes);
    metrics_.kv_bytes_in_use = 0;
    --metrics_.running;
  }
}

namespace {

// log-softmax of `logits` at `id`, and the `n` best alternatives.
void fill_logprobs(const std::vector<float>& logits, int32_t id, int n, TokenEvent& event) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double total = 0.0;
  for (float l : logits) total += std::exp(double(l - max_logit));
  const double log_total = std::log(total) + max_logit;
  event.logprob = float(double(logits[size_t(id)]) - log_total);
  if (n <= 0) return;
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  const size_t keep = std::min(order.size(), size_t(n));
  std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                    [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  for (size_t i = 0; i < keep; ++i)
    event.top.emplace_back(order[i], float(double(logits[size_t(order[i])]) - log_total));
}

}  // namespace

void EngineWorker::run(Job& job) {
  const JobSpec& spec = job.spec;
  const int64_t vocab = model_.config().vocab_size;
  validate_token_ids(spec.prompt, vocab);
  auto state = model_.new_state(job_tokens(spec));
  Sampler sampler(spec.sampling);
  std::vector<int32_t> history = spec.prompt;
  std::unordered_map<int32_t, int> output_counts;
  std::vector<float> logits(static_cast<size_t>(vocab));
  if (Clock::now() > spec.deadline) {
    ++metrics_.cancelled;
    return job.finish("timeout");
  }

  Tensor raw = prefill(model_, *state, spec.prompt, policy_, /*all_logits=*/false);
  metrics_.kv_bytes_in_use = state->bytes();
  Clock::time_point last = Clock::now();
  for (int64_t step = 0; step < spec.max_tokens; ++step) {
    if (job.cancelled) {
      ++metrics_.cancelled;
      return job.finish("cancelled");
    }
    if (Clock::now() > spec.deadline) {
      ++metrics_.cancelled;
      return job.finish("timeout");
    }
    std::copy_n(raw.data<float>(), vocab, logits.data());
    for (const auto& [id, bias] : spec.logit_bias) logits[size_t(id)] += bias;
    for (const auto& [id, count] : output_counts)
      logits[size_t(id)] -= spec.presence_penalty + spec.frequency_penalty * float(count);

    TokenEvent event;
    event.id = sampler.sample(logits, history);
    if (spec.top_logprobs >= 0) fill_logprobs(logits, event.id, spec.top_logprobs, event);
    history.push_back(event.id);
    ++output_counts[event.id];
    const int32_t id = event.id;
    const auto now = Clock::now();
    if (step == 0)
      metrics_.time_to_first_token.observe(std::chrono::duration<double>(now - job.enqueued).count());
    else
      metrics_.inter_token_latency.observe(std::chrono::duration<double>(now - last).count());
    last = now;
    ++metrics_.generated_tokens;
    job.push(std::move(event));
    if (std::find(spec.stop_ids.begin(), spec.stop_ids.end(), id) != spec.stop_ids.end()) return job.finish("stop");
    if (step + 1 == spec.max_tokens) break;
    raw = model_.forward({id}, *state, false);
    metrics_.kv_bytes_in_use = state->bytes();
  }
  metrics_.request_duration.observe(std::chrono::duration<double>(Clock::now() - job.enqueued).count());
  job.finish("length");
}

}  // namespace fathom::server
