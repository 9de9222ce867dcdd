#pragma once
// The single engine thread: a bounded FIFO of generation jobs, run together
// in continuous batches. HTTP threads submit a Job (native structs only) and
// read its token events; setting Job::cancelled (client gone, stop string,
// timeout) makes the engine drop the job's sequence state at its next step.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "grammar/grammar_constraint.h"
#include "engine/admission.h"
#include "engine/prefix_cache.h"
#include "engine/generator.h"
#include "engine/sequence_run.h"
#include "engine/prefill_policy.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "server/metrics.h"

namespace fathom::server {

using Clock = std::chrono::steady_clock;

struct JobSpec {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplingParams sampling;
  float presence_penalty = 0.0f;   // OpenAI semantics: subtracted once from every id seen in the output
  float frequency_penalty = 0.0f;  // subtracted per occurrence in the output
  std::vector<std::pair<int32_t, float>> logit_bias;
  int top_logprobs = -1;           // -1: no logprobs; 0..20: the chosen token's logprob and this many alternatives
  std::vector<int64_t> stop_ids;
  Clock::time_point deadline = Clock::time_point::max();
  // Structured output: the grammar the answer must follow (null: none), after
  // the reasoning block these tokens mark.
  std::shared_ptr<grammar::CompiledGrammar> grammar;
  grammar::ReasoningTokens reasoning;
};

// The most tokens a job's sequence can hold: its prompt and every token it may generate.
inline int64_t job_tokens(const JobSpec& spec) {
  return int64_t(spec.prompt.size()) + std::max<int64_t>(spec.max_tokens, 1);
}

struct TokenEvent {
  int32_t id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // best first
};

class Job {
 public:
  explicit Job(JobSpec spec) : spec(std::move(spec)), enqueued(Clock::now()) {}
  const JobSpec spec;
  const Clock::time_point enqueued;
  std::atomic<bool> cancelled{false};
  // Prompt tokens that came from the prefix cache (set when the job starts).
  std::atomic<int64_t> cached_tokens{0};
  // Choices of one request (OpenAI n > 1) share their prompt: the first job
  // shares it (set before submit), and each other one waits in the queue for
  // it (prompt_source) until its prefill is in the prefix cache (prompt_ready,
  // also set when the first job ends), then starts from a fork of it.
  bool share_prompt = false;
  std::shared_ptr<Job> prompt_source;
  std::atomic<bool> prompt_ready{false};

  enum class Next { token, finished, waiting };
  // Takes the next event, waiting up to `wait`. On finished, finish_reason() and error() are final.
  Next next(TokenEvent& out, std::chrono::milliseconds wait);
  std::string finish_reason() const;  // "stop", "length", "cancelled" or "timeout"
  std::string error() const;          // non-empty when the engine failed on this job

  // Engine side.
  void push(TokenEvent event);
  void finish(std::string finish_reason, std::string error = {});

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<TokenEvent> events_;
  bool finished_ = false;
  std::string finish_reason_, error_;
};

class EngineWorker {
 public:
  // Continuous batching: every running job's sequence shares each forward
  // step, and jobs join and leave at any step. A job starts only once
  // `admission` has charged its memory (make_job refused those that could
  // not fit even alone), so a job that fits later waits in the queue, and at
  // most `max_running` run at once. `speculation`: a drafter forked for each
  // job (the caller keeps the original), and its draft length. Finished
  // sequences are kept in a prefix cache of `prefix_cache_bytes` (the caller
  // charged them to the admission's fixed bytes); a job whose prompt shares
  // a prefix with one starts from a fork of it.
  EngineWorker(const Model& model, const PrefillPolicy& policy, MemoryAdmission& admission, Metrics& metrics,
               size_t max_queued, Speculation speculation = {}, size_t max_running = 16,
               int64_t prefix_cache_bytes = 0);
  ~EngineWorker();
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // False when max_queued jobs are already waiting (the caller answers 429).
  bool submit(const std::shared_ptr<Job>& job);
  size_t queued() const;

 private:
  struct Running;
  void loop();
  // Puts a sharing job's prefilled prompt into the prefix cache once its
  // prefill is done, and lets the jobs waiting for it start.
  void share_prompt(Running& r);
  // Moves queued jobs that fit into `running`; true when the worker is stopping.
  bool admit(std::vector<std::unique_ptr<Running>>& running);
  std::unique_ptr<Running> start(const std::shared_ptr<Job>& job, int64_t bytes);
  void end(Running& r);

  const Model& model_;
  const PrefillPolicy& policy_;
  MemoryAdmission& admission_;
  Metrics& metrics_;
  const size_t max_queued_, max_running_;
  const Speculation speculation_;
  PrefixCache prefix_cache_;  // the engine thread's alone
  bool arena_trimmed_ = true;  // since the last request ran; the engine thread's alone
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace fathom::server
