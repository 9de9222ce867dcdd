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
                           Metrics& metrics, size_t max_queued, Speculation speculation)
    : model_(model),
      policy_(policy),
      admission_(admission),
      metrics_(metrics),
      max_queued_(max_queued),
      speculation_(speculation),
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
void fill_logprobs(std::span<const float> logits, int32_t id, int n, TokenEvent& event) {
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

void EngineWorker::run(Job& job) {
  const JobSpec& spec = job.spec;
  if (Clock::now() > spec.deadline) {
    ++metrics_.cancelled;
    return job.finish("timeout");
  }
  GenerationRequest request;
  request.prompt = spec.prompt;
  request.max_new_tokens = spec.max_tokens;
  request.sampling = spec.sampling;
  request.stop_ids = spec.stop_ids;
  if (!spec.logit_bias.empty() || spec.presence_penalty != 0.0f || spec.frequency_penalty != 0.0f)
    request.adjust_logits = [&spec](std::span<float> logits, std::span<const int32_t> generated) {
      adjust_openai_logits(spec, logits, generated);
    };

  std::string ended_by;  // "cancelled" or "timeout" when the job stopped early
  Clock::time_point last = Clock::now();
  bool first = true;
  auto on_token = [&](const GeneratedToken& token) {
    TokenEvent event;
    event.id = token.id;
    if (spec.top_logprobs >= 0) fill_logprobs(token.logits, token.id, spec.top_logprobs, event);
    const auto now = Clock::now();
    if (first)
      metrics_.time_to_first_token.observe(std::chrono::duration<double>(now - job.enqueued).count());
    else
      metrics_.inter_token_latency.observe(std::chrono::duration<double>(now - last).count());
    first = false;
    last = now;
    ++metrics_.generated_tokens;
    metrics_.kv_bytes_in_use = token.state_bytes;
    job.push(std::move(event));
    if (job.cancelled) ended_by = "cancelled";
    else if (now > spec.deadline) ended_by = "timeout";
    return ended_by.empty();
  };
  const GenerationResult result = generate(model_, policy_, request, on_token, speculation_);
  metrics_.drafted_tokens += result.spec.drafted;
  metrics_.accepted_tokens += result.spec.accepted;
  if (!ended_by.empty()) {
    ++metrics_.cancelled;
    return job.finish(ended_by);
  }
  metrics_.request_duration.observe(std::chrono::duration<double>(Clock::now() - job.enqueued).count());
  job.finish(result.finish_reason);
}

}  // namespace fathom::server
