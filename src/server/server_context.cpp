#include "server/server_context.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

#include "server/reasoning.h"

namespace fathom::server {

namespace {
std::string fingerprint_of(const Model& model, const ServerOptions& options) {
  const std::string what = options.served_model_name + "|" + compute_dtype_name(model.compute_dtype()) + "|" +
                           model.kv_scheme().cache_key() + "|" + model.backend_name();
  // FNV-1a: stable across runs and builds, unlike std::hash.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : what) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("fp_") + std::string(hex, 10);
}
}  // namespace

ServerContext::ServerContext(const Model& model, const MemoryContract& contract, const PrefillPolicy& policy,
                             MemoryAdmission& admission, Tokenizer tokenizer, ChatTemplate chat_template,
                             std::vector<int64_t> stop_ids, ServerOptions options, Speculation speculation)
    : model(model),
      contract(contract),
      policy(policy),
      admission(admission),
      tokenizer(std::move(tokenizer)),
      chat_template(std::move(chat_template)),
      stop_ids(std::move(stop_ids)),
      options(std::move(options)),
      window(this->options.context_length > 0
                 ? std::min<int64_t>(this->options.context_length, model.config().max_position_embeddings)
                 : model.config().max_position_embeddings),
      context_length(admission.longest_sequence(window)),
      has_thinking(template_has_thinking(this->chat_template.source())),
      tool_format(detect_tool_call_format(this->chat_template.source())),
      started_at(unix_time()),
      system_fingerprint(fingerprint_of(model, this->options)),
      grammars(this->tokenizer, model.config().vocab_size),
      worker(model, policy, admission, metrics, this->options.max_queued, speculation, this->options.max_running,
             this->options.prefix_cache_bytes) {}

Clock::time_point request_deadline(const ServerContext& ctx) {
  return Clock::now() + std::chrono::seconds(ctx.options.request_timeout_s);
}

PreparedPrompt prepare_chat_prompt(const ServerContext& ctx, const ChatRequest& request, Clock::time_point deadline) {
  // A template that never reads `tools` would drop them without a word, and
  // the model would answer as if it had none.
  if (request.tools_enabled && ctx.chat_template.source().find("tools") == std::string::npos)
    throw ApiError(400,
                   "this model's chat template cannot render tools, so the model cannot call them; send the request "
                   "without tools (or with tool_choice \"none\")",
                   "tools", "invalid_request_error", "tools_not_supported");
  std::string rendered;
  try {
    jinja::RenderOptions options;
    options.deadline = deadline;
    // A client that leaves stops its template too (checked every few thousand steps).
    options.cancelled = [] { return BoundedHttpServer::client_disconnected(); };
    rendered = ctx.chat_template.render(request.messages, request.tools, /*add_generation_prompt=*/true,
                                        request.chat_template_kwargs, options);
  } catch (const std::exception& e) {
    if (Clock::now() >= deadline)
      throw ApiError(504, std::string("the chat template was still rendering at the request's deadline: ") + e.what(),
                     "messages", "timeout_error", "timeout");
    throw ApiError(400, std::string("the chat template rejected the request: ") + e.what(), "messages");
  }
  PreparedPrompt out;
  out.ids = ctx.tokenizer.encode(rendered, /*add_special_tokens=*/false);
  out.starts_in_reasoning = ctx.has_thinking && prompt_opens_thinking(rendered);
  out.may_open_reasoning = ctx.has_thinking && !out.starts_in_reasoning && !prompt_closes_thinking(rendered);
  return out;
}

JobConstraint constrain_output(ServerContext& ctx, const OutputConstraint& output, const ojson& tools,
                               const PreparedPrompt& prompt) {
  JobConstraint out;
  if (output.kind == OutputConstraint::Kind::none) return out;
  out.grammar = ctx.grammars.compile(output, tools, ctx.tool_format);
  const auto open = ctx.tokenizer.token_to_id("<think>"), close = ctx.tokenizer.token_to_id("</think>");
  if (open && close && (prompt.starts_in_reasoning || prompt.may_open_reasoning))
    out.reasoning = {*open, *close, prompt.starts_in_reasoning, prompt.may_open_reasoning};
  return out;
}

std::shared_ptr<Job> make_job(ServerContext& ctx, const std::vector<int32_t>& prompt, const GenerationFields& gen,
                              Clock::time_point deadline, JobConstraint constraint) {
  const int64_t n = int64_t(prompt.size());
  if (n == 0) throw ApiError(400, "the prompt is empty", "prompt");
  if (n >= ctx.window)
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(ctx.window) +
                       " tokens, but the prompt has " + std::to_string(n) + " tokens.",
                   "messages", "invalid_request_error", "context_length_exceeded");
  const int64_t vocab = ctx.model.config().vocab_size;
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab) throw ApiError(400, "token id " + std::to_string(id) + " is out of range", "prompt");
  for (const auto& [id, bias] : gen.logit_bias)
    if (id >= vocab) throw ApiError(400, "logit_bias token id " + std::to_string(id) + " is out of range", "logit_bias");
  JobSpec spec;
  spec.prompt = prompt;
  // Without max_tokens a request may use what the memory allows; a max_tokens
  // beyond the window is cut to it, as before; one beyond the memory is refused.
  const int64_t room = std::min(ctx.window, std::max(ctx.context_length, n + 1)) - n;
  spec.max_tokens = std::min(gen.max_tokens.value_or(room), ctx.window - n);
  const int64_t tokens = job_tokens(spec);
  if (!ctx.admission.fits_alone(tokens))
    throw ApiError(400,
                   "This request needs " + std::to_string(ctx.admission.sequence_bytes(tokens)) + " bytes of memory (" +
                       std::to_string(n) + " prompt tokens + " + std::to_string(spec.max_tokens) +
                       " to generate) beside the " + std::to_string(ctx.admission.fixed()) +
                       " bytes the model holds, but the memory budget is " + std::to_string(ctx.admission.budget()) +
                       " bytes: at most " + std::to_string(ctx.context_length) +
                       " tokens (prompt + max_tokens) fit. Shorten the prompt or lower max_tokens.",
                   gen.max_tokens && n < ctx.context_length ? "max_tokens" : "messages", "invalid_request_error",
                   "memory_budget_exceeded");
  spec.sampling = gen.sampling;
  try {
    spec.sampling.validate();
  } catch (const std::exception& e) {
    throw ApiError(400, e.what());
  }
  spec.presence_penalty = gen.presence_penalty;
  spec.frequency_penalty = gen.frequency_penalty;
  spec.logit_bias = gen.logit_bias;
  spec.top_logprobs = gen.top_logprobs;
  spec.stop_ids = ctx.stop_ids;
  spec.deadline = deadline;
  spec.grammar = std::move(constraint.grammar);
  spec.reasoning = constraint.reasoning;
  return std::make_shared<Job>(std::move(spec));
}

void submit_job(ServerContext& ctx, const std::shared_ptr<Job>& job) {
  if (!ctx.worker.submit(job))
    throw ApiError(429, "too many requests are queued (" + std::to_string(ctx.options.max_queued) + "); retry later",
                   "", "rate_limit_error", "queue_full");
  ctx.metrics.prompt_tokens += int64_t(job->spec.prompt.size());
}

std::string random_id(const std::string& prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += hex[rng() % 16];
  return id;
}

std::string rfc3339(int64_t unix_seconds) {
  const std::time_t t = std::time_t(unix_seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return out;
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace fathom::server
