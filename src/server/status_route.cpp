#include "server/status_route.h"

#include "core/process_memory.h"
#include "server/http_errors.h"
#include "server/sse.h"

namespace fathom::server {

namespace {

// The contract's terms for one sequence of the longest context a request may
// reach, with the chunk the engine's policy would prefill it in: the same
// numbers `fathom fit --ctx N` prints and admission charges.
ojson contract_json(const ServerContext& ctx) {
  const int64_t chunk = ctx.policy.chunk_size(ctx.context_length, ctx.context_length);
  const MemoryBreakdown b = ctx.contract.predict(ctx.context_length, 1, chunk);
  return {{"context", b.context},       {"prefill_chunk", b.prefill_chunk}, {"weights_bytes", b.weights},
          {"kv_bytes", b.kv},           {"transient_bytes", b.transient},  {"runtime_bytes", b.runtime},
          {"speculation_bytes", b.speculation}, {"total_bytes", b.total()}};
}

}  // namespace

ojson status_json(const ServerContext& ctx) {
  const ModelConfig& config = ctx.model.config();
  const KvScheme& scheme = ctx.model.kv_scheme();
  const Metrics& m = ctx.metrics;
  return {
      {"model",
       {{"id", ctx.options.served_model_name},
        {"architecture", config.model_type},
        {"compute_dtype", ctx.model.compute_dtype() == ComputeDType::bf16 ? "bf16" : "f32"},
        {"backend", ctx.model.backend_name()},
        {"layers", config.num_layers},
        {"vocab_size", config.vocab_size}}},
      // length: the most tokens (prompt + answer) one request may reach now;
      // window: the positions the model (or --ctx-size) allows.
      {"context", {{"length", ctx.context_length}, {"window", ctx.window}}},
      {"kv",
       {{"cache_key", scheme.cache_key()},
        {"bytes_per_token", ctx.model.kv_bytes_per_token()},
        {"bytes_at_context", ctx.model.kv_bytes_at(ctx.context_length)},
        {"layout", ojson::parse(scheme.describe(config).dump())}}},
      {"memory",
       {{"budget_bytes", ctx.admission.budget()},
        {"fixed_bytes", ctx.admission.fixed()},
        {"admitted_bytes", ctx.admission.admitted()},
        {"resident_bytes", resident_bytes()},
        {"contract", contract_json(ctx)}}},
      {"engine",
       {{"running", m.running.load()},
        {"queued", ctx.worker.queued()},
        {"prompt_tokens_total", m.prompt_tokens.load()},
        {"generated_tokens_total", m.generated_tokens.load()},
        {"kv_bytes_in_use", m.kv_bytes_in_use.load()},
        {"speculative_draft_tokens", ctx.contract.draft_tokens()},
        {"drafted_tokens_total", m.drafted_tokens.load()},
        {"accepted_tokens_total", m.accepted_tokens.load()}}},
  };
}

void add_status_route(httplib::Server& http, ServerContext& ctx) {
  http.Get("/status", guarded(ctx, "/status", ApiStyle::openai, [&ctx](const httplib::Request&, httplib::Response& res) {
             res.set_header("Cache-Control", "no-store");
             res.set_content(dump_json(status_json(ctx)), "application/json");
           }));
}

}  // namespace fathom::server
