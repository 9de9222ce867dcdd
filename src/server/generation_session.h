#pragma once
// The HTTP-thread side of one running job: turns its token events into text
// deltas (incremental detokenization, stop strings, <think> splitting) and
// keeps the counts for usage. Destroying a session cancels its job, so a
// client that goes away frees the engine's state at its next token.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/engine_worker.h"
#include "server/reasoning.h"
#include "server/server_context.h"
#include "text/stop_strings.h"
#include "text/tokenizer/incremental_detokenizer.h"

namespace fathom::server {

struct Delta {
  std::string content, reasoning;
  std::vector<TokenEvent> tokens;  // the tokens behind this delta (for logprobs)
  bool empty() const { return content.empty() && reasoning.empty() && tokens.empty(); }
};

class GenerationSession {
 public:
  GenerationSession(const ServerContext& ctx, std::shared_ptr<Job> job, std::vector<std::string> stops,
                    bool split_reasoning, bool starts_in_reasoning);
  ~GenerationSession();
  GenerationSession(const GenerationSession&) = delete;
  GenerationSession& operator=(const GenerationSession&) = delete;

  // Waits up to `wait` for the next token; appends what it produced to `out`.
  // Returns true once generation is over (then finish_reason() is final).
  bool step(Delta& out, std::chrono::milliseconds wait);
  void cancel() { job_->cancelled = true; }

  // "stop" (eos or stop string), "length", "cancelled", "timeout" or "error".
  const std::string& finish_reason() const { return finish_reason_; }
  bool stopped_by_string() const { return stopped_by_string_; }
  const std::string& error() const { return error_; }
  // When generation ended without a whole answer, the error the client gets:
  // the request ran past its deadline (504), the engine failed (500), the
  // server is shutting down (503).
  std::optional<ApiError> failure() const;
  int64_t prompt_tokens() const { return int64_t(job_->spec.prompt.size()); }
  int64_t completion_tokens() const { return completion_tokens_; }
  // Completion tokens generated inside the reasoning block (its tags included).
  int64_t reasoning_tokens() const { return reasoning_tokens_; }
  // The stop string that ended the answer, when one did.
  const std::string& stop_sequence() const { return stop_sequence_; }
  // Prompt tokens the prefix cache gave (known once the job has started).
  int64_t cached_tokens() const { return job_->cached_tokens; }

 private:
  void emit(const std::string& text, Delta& out);
  void finish(Delta& out);

  std::shared_ptr<Job> job_;
  IncrementalDetokenizer detokenizer_;
  StopStringMatcher stops_;
  std::optional<ReasoningSplitter> reasoning_;
  int64_t completion_tokens_ = 0, reasoning_tokens_ = 0;
  bool done_ = false, stopped_by_string_ = false;
  std::string finish_reason_, error_, stop_sequence_;
};

}  // namespace fathom::server
