// fathom serve --model DIR [--host 127.0.0.1] [--port 8080] [--api-key KEY]
// An OpenAI- and Anthropic-compatible HTTP server (see src/server/).
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/speculation_options.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "core/process_memory.h"
#include "engine/admission.h"
#include "io/generation_config.h"
#include "server/http_server.h"

namespace fathom::cli {

namespace {

// Loads the model; on a terminal, shows the time spent so far while it loads.
std::unique_ptr<Model> load_with_progress(const ModelOptions& options) {
  std::atomic<bool> done{false};
  std::thread ticker;
  const bool tty = ::isatty(STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  if (tty)
    ticker = std::thread([&] {
      const char* spin = "|/-\\";
      for (int i = 0; !done; ++i) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "\rloading %s %c %.1fs", options.model_dir.c_str(), spin[i % 4], s);
        std::fflush(stderr);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      std::fprintf(stderr, "\r\033[K");
    });
  std::unique_ptr<Model> model;
  try {
    model = options.load();
  } catch (...) {
    done = true;
    if (ticker.joinable()) ticker.join();
    throw;
  }
  done = true;
  if (ticker.joinable()) ticker.join();
  std::fprintf(stderr, "loaded %s in %.1fs\n", options.model_dir.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return model;
}

// Loopback addresses reach only this machine; anything else may be reached by others.
bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Where a browser on this machine opens the chat page (a wildcard bind is reached through loopback).
std::string page_url(const std::string& host, int port) {
  std::string h = host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return "http://" + h + ":" + std::to_string(port) + "/";
}

// --prefix-cache: "N%" of `room` (what the budget leaves beside the model and
// the server), or a byte size.
int64_t prefix_cache_bytes(const std::string& text, int64_t room) {
  if (text == "0") return 0;
  if (!text.empty() && text.back() == '%') {
    double percent = -1.0;
    try {
      size_t used = 0;
      percent = std::stod(text.substr(0, text.size() - 1), &used);
      if (used != text.size() - 1) percent = -1.0;
    } catch (const std::exception&) {
    }
    check(percent >= 0.0 && percent <= 50.0, "--prefix-cache: a share must be 0% to 50%, got '", text, "'");
    return int64_t(double(std::max<int64_t>(room, 0)) * percent / 100.0);
  }
  return parse_byte_size(text, "--prefix-cache");
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    SpeculationOptions speculation;
    server::ServerOptions server;
    int64_t max_body_mib = 4;
    bool no_webui = false;
    std::string prefix_cache = "10%";
  };
  auto o = std::make_shared<Options>();
  o->model.add_to(app);
  o->speculation.add_to(app);
  app.add_option("--host", o->server.host, "address to bind (127.0.0.1: this machine only)")->capture_default_str();
  app.add_option("--port", o->server.port, "port (0: any free port)")->capture_default_str();
  app.add_option("--api-key", o->server.api_key,
                 "require 'Authorization: Bearer KEY' (or x-api-key) on every route but /health")
      ->envname("FATHOM_API_KEY");
  app.add_flag("--no-webui", o->no_webui, "do not serve the chat page at /");
  app.add_option("--served-model-name", o->server.served_model_name, "model id in the API (default: folder name)");
  app.add_option("--ctx-size", o->server.context_length, "context length per request (0: the model's)")
      ->capture_default_str();
  app.add_option("--max-body-mib", o->max_body_mib, "largest request body in MiB")->capture_default_str();
  app.add_option("--max-running", o->server.max_running,
                 "requests the engine runs at once, sharing each step (the memory budget may allow fewer)")
      ->capture_default_str();
  app.add_option("--prefix-cache", o->prefix_cache,
                 "memory for finished sequences kept so that requests sharing a prefix skip prefilling it: a size "
                 "(512MiB) or a share of what the memory budget leaves beside the model (10%); 0 turns it off")
      ->capture_default_str();
  app.add_option("--max-queue", o->server.max_queued, "requests that may wait for the engine (429 beyond)")
      ->capture_default_str();
  app.add_option("--request-timeout", o->server.request_timeout_s, "seconds a request may take in all")
      ->capture_default_str();
  auto& conn = o->server.connections;
  app.add_option("--max-connections", conn.max_connections,
                 "connections served at once, one HTTP thread each (a 503 beyond)")
      ->capture_default_str();
  app.add_option("--header-timeout", conn.header_timeout_s, "seconds a request's line and headers may take to arrive")
      ->capture_default_str();
  app.add_option("--body-timeout", conn.body_timeout_s, "seconds a request's body may take to arrive")
      ->capture_default_str();
  app.add_option("--idle-timeout", conn.idle_timeout_s, "seconds a connection may wait for its next request")
      ->capture_default_str();
  return [o, &conn] {
    if (o->model.maybe_describe_kv()) return 0;
    check(o->max_body_mib > 0 && o->max_body_mib <= 1024, "--max-body-mib must be in 1..1024, got ", o->max_body_mib);
    check(o->server.max_queued > 0, "--max-queue must be positive");
    check(o->server.max_running > 0 && o->server.max_running <= 256, "--max-running must be in 1..256, got ",
          o->server.max_running);
    check(o->server.request_timeout_s > 0, "--request-timeout must be positive");
    prefix_cache_bytes(o->prefix_cache, 0);  // a bad value fails before the model loads
    check(conn.max_connections >= 4 && conn.max_connections <= 4096, "--max-connections must be in 4..4096, got ",
          conn.max_connections);
    check(conn.header_timeout_s > 0 && conn.body_timeout_s > 0 && conn.idle_timeout_s > 0,
          "--header-timeout, --body-timeout and --idle-timeout must be positive");
    o->server.max_body_bytes = size_t(o->max_body_mib) << 20;
    o->server.webui = !o->no_webui;
    const std::filesystem::path dir(o->model.model_dir);
    check(std::filesystem::exists(dir / "tokenizer.json"), "serve: ", dir.string(),
          " has no tokenizer.json (the server needs the model's tokenizer)");
    if (o->server.served_model_name.empty()) {
      auto name = std::filesystem::weakly_canonical(dir).filename().string();
      o->server.served_model_name = name.empty() ? "model" : name;
    }
    // The contract first: a budget that cannot hold the weights is refused
    // before anything is loaded.
    MemoryContract contract = o->model.memory_contract();
    o->speculation.add_to_contract(contract, o->model);
    const int64_t budget = o->model.budget_bytes();
    const int64_t weights = contract.weights_bytes() + contract.speculation_fixed_bytes();
    const int64_t predicted_fixed = weights + contract.runtime_bytes();
    check(predicted_fixed < budget, "serve: the weights (", weights, " bytes, draft model included) and the runtime (",
          contract.runtime_bytes(), " bytes) do not fit the memory budget of ", budget, " bytes");
    Tokenizer tokenizer = Tokenizer::load(o->model.model_dir);
    ChatTemplate chat_template = ChatTemplate::from_model_dir(o->model.model_dir);
    auto model = load_with_progress(o->model);
    const int64_t window = o->server.context_length > 0 ? o->server.context_length
                                                         : model->config().max_position_embeddings;
    const auto drafter = o->speculation.make_drafter(*model, o->model, window);
    // What the server holds beyond the engine's contract (the tokenizer, the
    // chat template) is measured now and charged as fixed. Mapped weights
    // become resident only as they are read, so those not read yet are added
    // to the measure (the contract counts every weight: without them the
    // overhead would come out short by as much). Charged too are the threads
    // that start after this: one per connection, the refuser's and the
    // engine's. On a GPU the budget is device memory: what the backend holds
    // there is measured.
    const bool on_gpu = contract.device() == Device::cuda;
    malloc_trim(0);  // what loading freed is not held: the measure is what stays
    const int64_t measured =
        on_gpu ? allocated_bytes(Device::cuda) : resident_bytes() + mapped_files_absent_bytes(".safetensors");
    const int64_t server_threads = on_gpu ? 0 : (o->server.connections.max_connections + 2) * thread_resident_bytes();
    const int64_t overhead = std::max<int64_t>(0, measured - predicted_fixed) + server_threads;
    // The policy sizes chunks in what the budget leaves once that is held.
    const auto policy = o->model.prefill_policy(contract, budget - overhead);
    o->server.prefix_cache_bytes = prefix_cache_bytes(o->prefix_cache, budget - predicted_fixed - overhead);
    MemoryAdmission admission(contract, *policy, budget, predicted_fixed + overhead + o->server.prefix_cache_bytes);
    const int64_t fitting = admission.longest_sequence(window);
    check(fitting > 0, "serve: the memory budget of ", budget, " bytes leaves no room for a sequence beside the ",
          admission.fixed(), " bytes the model and the server hold");
    if (o->server.context_length > 0 && fitting < o->server.context_length)
      fail("serve: --ctx-size ", o->server.context_length, " does not fit the memory budget of ", budget,
           " bytes: a sequence of ", o->server.context_length, " tokens needs ",
           admission.sequence_bytes(o->server.context_length), " bytes beside the ", admission.fixed(),
           " bytes the model and the server hold; at most ", fitting, " tokens fit");
    std::vector<int64_t> stop_ids = load_generation_config(o->model.model_dir).eos_token_ids;
    for (int64_t id : model->config().eos_token_ids) stop_ids.push_back(id);
    for (int32_t id : tokenizer.eos_ids()) stop_ids.push_back(id);
    server::ServerContext ctx(*model, contract, *policy, admission, std::move(tokenizer), std::move(chat_template), stop_ids,
                              o->server, o->speculation.with(drafter.get()));
    server::run_http_server(ctx, [&](int port) {
      std::printf("fathom serve: model %s (%s, %s compute, %s)\n", ctx.options.served_model_name.c_str(),
                  o->model.model_dir.c_str(), model->compute_dtype() == ComputeDType::bf16 ? "bf16" : "f32",
                  model->backend_name().c_str());
      std::printf("  context length %lld tokens%s; weights %s; resident memory %s; KV %s per token\n",
                  (long long)ctx.context_length,
                  ctx.context_length < ctx.window
                      ? (" (the longest that fits the memory budget of " + format_bytes(budget) + "; the model allows " +
                         std::to_string(ctx.window) + ")").c_str()
                      : "",
                  format_bytes(model->weight_bytes()).c_str(), format_bytes(resident_bytes()).c_str(),
                  std::to_string(model->kv_bytes_per_token()).append(" bytes").c_str());
      if (drafter)
        std::printf("  speculative decoding: %s, up to %lld draft tokens a step (%s)\n",
                    o->speculation.draft_model.empty() ? "prompt lookup"
                                                       : ("draft model " + o->speculation.draft_model).c_str(),
                    (long long)o->speculation.draft_tokens, o->speculation.draft_length.c_str());
      std::printf("  memory budget %s (%s); the model and the server hold %s, the prefix cache up to %s\n",
                  format_bytes(budget).c_str(), o->model.memory_budget.empty() ? "90% of MemAvailable" : "--memory-budget",
                  format_bytes(admission.fixed() - o->server.prefix_cache_bytes).c_str(),
                  format_bytes(o->server.prefix_cache_bytes).c_str());
      std::printf("  listening on http://%s:%d  (OpenAI: /v1/chat/completions /v1/completions /v1/models; "
                  "Anthropic: /v1/messages; /health /metrics /status)%s\n",
                  ctx.options.host.c_str(), port, ctx.options.api_key.empty() ? "" : "; API key required");
      if (ctx.options.webui)
        std::printf("  chat page: open %s in a browser (--no-webui turns it off)\n",
                    page_url(ctx.options.host, port).c_str());
      std::fflush(stdout);
      if (ctx.options.api_key.empty() && !is_loopback(ctx.options.host)) {
        std::fprintf(stderr,
                     "warning: --host %s without --api-key: anyone who can reach this machine on port %d can use "
                     "the server and its chat page; set --api-key KEY (or FATHOM_API_KEY)\n",
                     ctx.options.host.c_str(), port);
        std::fflush(stderr);
      }
    });
    std::printf("fathom serve: stopped\n");
    return 0;
  };
}

}  // namespace fathom::cli
