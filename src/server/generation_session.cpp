#include "server/generation_session.h"

namespace fathom::server {

GenerationSession::GenerationSession(const ServerContext& ctx, std::shared_ptr<Job> job,
                                     std::vector<std::string> stops, bool split_reasoning, bool starts_in_reasoning)
    : job_(std::move(job)), detokenizer_(ctx.tokenizer, /*skip_special_tokens=*/true), stops_(std::move(stops)) {
  if (split_reasoning) reasoning_.emplace(starts_in_reasoning);
}

GenerationSession::~GenerationSession() { job_->cancelled = true; }

void GenerationSession::emit(const std::string& text, Delta& out) {
  if (!reasoning_) {
    out.content += text;
    return;
  }
  auto parts = reasoning_->push(text);
  out.reasoning += parts.reasoning;
  out.content += parts.content;
}

void GenerationSession::finish(Delta& out) {
  if (!stopped_by_string_) {
    const auto step = stops_.push(detokenizer_.flush());
    emit(step.emit, out);
    if (step.stopped) stopped_by_string_ = true, stop_sequence_ = step.matched;
    else emit(stops_.flush(), out);
  }
  if (reasoning_) {
    auto parts = reasoning_->flush();
    out.reasoning += parts.reasoning;
    out.content += parts.content;
  }
  done_ = true;
  if (stopped_by_string_) {
    finish_reason_ = "stop";
    job_->cancelled = true;
    return;
  }
  finish_reason_ = job_->finish_reason();
  error_ = job_->error();
}

std::optional<ApiError> GenerationSession::failure() const {
  if (finish_reason_ == "timeout")
    return ApiError(504, "the request ran past the server's --request-timeout; " + std::to_string(completion_tokens_) +
                             " tokens had been generated",
                    "", "timeout_error", "timeout");
  if (finish_reason_ == "error") return ApiError(500, error_, "", "server_error");
  if (finish_reason_ == "cancelled")
    return ApiError(503, error_.empty() ? "the request was cancelled" : error_, "", "server_error", "cancelled");
  return std::nullopt;
}

bool GenerationSession::step(Delta& out, std::chrono::milliseconds wait) {
  if (done_) return true;
  TokenEvent event;
  switch (job_->next(event, wait)) {
    case Job::Next::waiting:
      return false;
    case Job::Next::finished:
      finish(out);
      return true;
    case Job::Next::token:
      break;
  }
  ++completion_tokens_;
  const auto step = stops_.push(detokenizer_.push(event.id));
  out.tokens.push_back(std::move(event));
  const bool was_reasoning = reasoning_ && reasoning_->in_reasoning();
  emit(step.emit, out);
  if (was_reasoning || (reasoning_ && reasoning_->in_reasoning())) ++reasoning_tokens_;
  if (step.stopped) {
    stopped_by_string_ = true;
    stop_sequence_ = step.matched;
    finish(out);
    return true;
  }
  return false;
}

}  // namespace fathom::server
