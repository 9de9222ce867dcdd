#pragma once
// What the routes share: the model, its text tools, the engine worker, metrics
// and the options; plus the steps every generation route takes on its HTTP
// thread (template, tokenize, check against the context, submit).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/memory_contract.h"
#include "model/model.h"
#include "server/bounded_http_server.h"
#include "server/engine_worker.h"
#include "server/metrics.h"
#include "server/request_parsing.h"
#include "server/response_store.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"
#include "text/jinja/chat_template.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;                // empty: no authentication
  std::string served_model_name;      // default: the model folder's name
  int64_t context_length = 0;         // --ctx-size; 0: the model's max_position_embeddings
  size_t max_body_bytes = 4u << 20;
  size_t max_queued = 64;
  size_t max_running = 16;            // sequences the engine runs at once (continuous batching)
  int64_t prefix_cache_bytes = 0;     // finished sequences kept for their prefixes (0: none)
  int request_timeout_s = 600;
  ConnectionLimits connections;
  bool webui = true;                  // the chat page at / (--no-webui: off)
};

struct ServerContext {
  ServerContext(const Model& model, const MemoryContract& contract, const PrefillPolicy& policy,
                MemoryAdmission& admission, Tokenizer tokenizer, ChatTemplate chat_template,
                std::vector<int64_t> stop_ids, ServerOptions options, Speculation speculation = {});

  const Model& model;
  // What GET /status reports: the contract's terms and the chunk the policy picks.
  const MemoryContract& contract;
  const PrefillPolicy& policy;
  MemoryAdmission& admission;
  const Tokenizer tokenizer;
  const ChatTemplate chat_template;
  const std::vector<int64_t> stop_ids;  // eos ids of the model, generation config and tokenizer
  const ServerOptions options;
  // Positions a request may use: --ctx-size or the model's maximum.
  const int64_t window;
  // Tokens (prompt + max_tokens) one request may reach: the window, or less
  // when the memory budget allows less.
  const int64_t context_length;
  const bool has_thinking;
  const ToolCallFormat tool_format;
  // When the server started (the models' "created"), and what identifies its
  // configuration in answers (OpenAI's system_fingerprint: the model, the
  // compute dtype, the KV scheme and the backend).
  const int64_t started_at;
  const std::string system_fingerprint;
  GrammarCache grammars;    // structured output's compiled grammars
  ResponseStore responses;  // the Responses API's stored conversations
  Metrics metrics;
  EngineWorker worker;  // last: its thread starts once everything above exists
};

struct PreparedPrompt {
  std::vector<int32_t> ids;
  bool starts_in_reasoning = false;
  bool may_open_reasoning = false;  // a thinking template whose prompt neither opened nor closed the block
};

// When a request that arrives now must be done (--request-timeout).
Clock::time_point request_deadline(const ServerContext& ctx);
// Renders the chat template and tokenizes (template errors are 400s; a
// template still rendering at the deadline is stopped: 504).
PreparedPrompt prepare_chat_prompt(const ServerContext& ctx, const ChatRequest& request, Clock::time_point deadline);
// Builds the engine job. A prompt that leaves no room in the window is a 400
// (context_length_exceeded); one whose prompt + max_tokens cannot fit the
// memory budget even alone is a 400 (memory_budget_exceeded) with the numbers.
std::shared_ptr<Job> make_job(ServerContext& ctx, const std::vector<int32_t>& prompt, const GenerationFields& gen,
                              Clock::time_point deadline, JobConstraint constraint = {});
// The grammar for a request's structured output (none when it asks for none),
// letting a reasoning block pass first; unsupported schemas are 400s.
JobConstraint constrain_output(ServerContext& ctx, const OutputConstraint& output, const ojson& tools,
                               const PreparedPrompt& prompt);
// Queues the job; a full queue is a 429.
void submit_job(ServerContext& ctx, const std::shared_ptr<Job>& job);

// A fresh id such as "chatcmpl-3f9a…".
std::string random_id(const std::string& prefix);
int64_t unix_time();
// "2026-12-01T05:29:22Z" for a unix time.
std::string rfc3339(int64_t unix_seconds);

}  // namespace fathom::server
