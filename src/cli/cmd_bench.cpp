// fathom bench --model DIR --prompt-tokens 512 --gen-tokens 128 [--threads N]
// Prefill and decode are timed separately; with --repeat the medians are reported.
// --batch B: B sequences prefilled, then decoding together in one step each token.
// --synthetic-context: the prompt's keys and values are random rows written
// straight into the cache (no prefill), to time decode deep into a context.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <fstream>
#include <random>

#include "backend/cpu/kernels.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/speculation_options.h"
#include "core/error.h"
#include "core/process_memory.h"
#include "core/thread_pool.h"
#include "engine/generator.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom::cli {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Writes `tokens` random key and value rows into every KV layer of the state,
// in steps a sequence may take (sliding layers reuse blocks as they go).
void fill_synthetic(Backend& backend, const ModelConfig& c, SequenceState& state, int64_t tokens, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t step = std::min<int64_t>(state.max_step, 256);
  for (int64_t done = 0; done < tokens; done += step) {
    const int64_t n = std::min(step, tokens - done);
    for (size_t i = 0; i < state.kv.size(); ++i) {
      if (!state.kv[i]) continue;
      Tensor k = Tensor::empty({n, c.kv_heads_of(int64_t(i)), c.head_dim_of(int64_t(i))}, DType::f32);
      Tensor v = Tensor::empty(k.shape(), DType::f32);
      for (int64_t j = 0; j < k.numel(); ++j) k.data<float>()[j] = normal(rng), v.data<float>()[j] = normal(rng);
      state.kv[i]->append(backend.upload(k), backend.upload(v));
    }
    state.end_step(n);
  }
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    int64_t prompt_tokens = 512;
    int64_t gen_tokens = 128;
    int repeat = 1;
    int64_t batch = 1;
    std::string prompt_file;
    bool synthetic_context = false;
    bool profile_ops = false, profile_step_graph = false;
    float temperature = 0.0f, min_p = 0.0f, top_p = 1.0f;
    int64_t top_k = 0;
    SpeculationOptions speculation;
  };
  auto o = std::make_shared<Options>();
  o->model.add_to(app);
  app.add_option("--prompt-tokens", o->prompt_tokens, "prompt length")->capture_default_str();
  app.add_option("--gen-tokens", o->gen_tokens, "tokens to decode")->capture_default_str();
  app.add_option("--repeat", o->repeat, "runs; medians are reported")->capture_default_str();
  app.add_option("--batch", o->batch,
                 "sequences prefilled one after another, then decoding together (decode_tok_s: all rows per second)")
      ->capture_default_str();
  app.add_option("--prompt-file", o->prompt_file,
                 "take the prompt from this text (the model's tokenizer; its first --prompt-tokens tokens) "
                 "instead of random ids");
  app.add_flag("--synthetic-context", o->synthetic_context,
               "write --prompt-tokens random key/value rows into the cache instead of prefilling (decode at depth; "
               "prefill_tok_s is then 0)");
  app.add_flag("--profile-ops", o->profile_ops,
               "report the time per backend op of the decode steps (ms per token) and of the prefills (ms per "
               "prefill; not with --synthetic-context), every run together, and the time outside the ops");
  app.add_flag("--profile-step-graph", o->profile_step_graph,
               "after decoding, time the last decode step's graph (devices that replay steps as graphs) whole and "
               "without each of its kernels in turn (what each kernel costs inside the graph)");
  app.add_option("--temperature", o->temperature,
                 "decode by drawing each token at this temperature (seeded, picked where the logits are) instead "
                 "of greedily")
      ->capture_default_str();
  app.add_option("--min-p", o->min_p, "with --temperature: leave out tokens below this × the best one's probability")
      ->capture_default_str();
  app.add_option("--top-k", o->top_k, "with --temperature: draw from the best this many tokens (0: all)")
      ->capture_default_str();
  app.add_option("--top-p", o->top_p, "with --temperature: draw from the fewest best tokens reaching this probability")
      ->capture_default_str();
  o->speculation.add_to(app);
  return [o] {
    if (o->model.maybe_describe_kv()) return 0;
    check(o->prompt_tokens > 0, "--prompt-tokens must be positive, got ", o->prompt_tokens);
    check(o->gen_tokens > 0, "--gen-tokens must be positive, got ", o->gen_tokens);
    check(o->repeat > 0, "--repeat must be positive, got ", o->repeat);
    check(o->batch >= 1 && o->batch <= 256, "--batch must be in 1..256, got ", o->batch);
    check(!o->synthetic_context || !o->speculation.enabled(), "--synthetic-context cannot be used with speculation");
    const SamplingParams sampling{
        .temperature = o->temperature, .top_k = o->top_k, .top_p = o->top_p, .min_p = o->min_p, .seed = 1234};
    sampling.validate();
    MemoryContract contract = o->model.memory_contract();
    o->speculation.add_to_contract(contract, o->model);
    const auto policy = o->model.prefill_policy(contract);
    auto model = o->model.load();
    const auto& config = model->config();
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> pick(0, int32_t(config.vocab_size - 1));
    std::vector<int32_t> prompt(static_cast<size_t>(o->prompt_tokens));
    for (auto& id : prompt) id = pick(rng);
    if (!o->prompt_file.empty()) {
      std::ifstream in(o->prompt_file);
      check(bool(in), "--prompt-file: cannot read ", o->prompt_file);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      prompt = Tokenizer::load(o->model.model_dir).encode(text, /*add_special_tokens=*/true);
      check(int64_t(prompt.size()) >= o->prompt_tokens, "--prompt-file: ", prompt.size(), " tokens, fewer than --prompt-tokens ",
            o->prompt_tokens);
      prompt.resize(static_cast<size_t>(o->prompt_tokens));
    }

    using clock = std::chrono::steady_clock;
    std::vector<double> prefill_tps, decode_tps;
    OpProfile prefill_ops, decode_ops;
    double prefill_seconds = 0.0, decode_seconds = 0.0;
    int64_t kv_bytes = 0;
    const size_t batch = size_t(o->batch);
    for (int r = 0; r < o->repeat; ++r) {
      // Sequence b's prompt: the prompt with its ids shifted by b (same length, other tokens).
      std::vector<std::unique_ptr<SequenceState>> states;
      std::vector<int32_t> next(batch);
      if (o->profile_ops) model->backend().set_op_profile(&prefill_ops);
      const auto t0 = clock::now();
      for (size_t b = 0; b < batch; ++b) {
        std::vector<int32_t> ids = prompt;
        for (auto& id : ids) id = int32_t((int64_t(id) + int64_t(b)) % config.vocab_size);
        states.push_back(model->new_state(o->prompt_tokens + o->gen_tokens));
        if (o->synthetic_context) {
          fill_synthetic(model->backend(), config, *states.back(), o->prompt_tokens, rng);
          next[b] = ids.back();
          continue;
        }
        const Tensor logits = prefill(*model, *states.back(), ids, *policy, false);
        next[b] = cpu::argmax({logits.data<float>(), size_t(config.vocab_size)});
      }
      if (o->profile_ops) model->backend().set_op_profile(&decode_ops);
      const auto t1 = clock::now();
      std::vector<SequenceStep> step(batch);
      std::vector<Sampler> samplers;
      for (size_t b = 0; b < batch; ++b) {
        SamplingParams p = sampling;
        p.seed += b;
        samplers.emplace_back(p);
      }
      for (int64_t i = 0; i < o->gen_tokens; ++i) {
        // As the engine decodes a greedy or temperature run: each row's pick
        // made where the logits are.
        for (size_t b = 0; b < batch; ++b)
          step[b] = {states[b].get(), {next[b]}, WantLogits::pick, samplers[b].next_pick_rule()};
        const Tensor picks = model->forward(step).picks;
        for (size_t b = 0; b < batch; ++b) next[b] = picks.data<int32_t>()[b];
      }
      const auto t2 = clock::now();
      model->backend().set_op_profile(nullptr);
      prefill_seconds += std::chrono::duration<double>(t1 - t0).count();
      decode_seconds += std::chrono::duration<double>(t2 - t1).count();
      kv_bytes = 0;
      for (const auto& state : states) kv_bytes += state->bytes();
      prefill_tps.push_back(o->synthetic_context ? 0.0
                                                 : double(o->prompt_tokens * o->batch) /
                                                       std::chrono::duration<double>(t1 - t0).count());
      decode_tps.push_back(double(o->gen_tokens * o->batch) / std::chrono::duration<double>(t2 - t1).count());
    }
    const Backend::StepGraphCosts graph_costs =
        o->profile_step_graph ? model->backend().step_graph_costs() : Backend::StepGraphCosts{};
    // With speculation: the same greedy generation with and without drafts.
    nlohmann::json spec_out;
    if (o->speculation.enabled()) {
      const int64_t capacity = o->prompt_tokens + o->gen_tokens;
      const auto drafter = o->speculation.make_drafter(*model, o->model, capacity);
      GenerationRequest request;
      request.prompt = prompt;
      request.max_new_tokens = o->gen_tokens;
      request.sampling.temperature = 0.0f;
      std::vector<double> plain_tps, spec_tps;
      GenerationResult last;
      bool identical = true;
      for (int r = 0; r < o->repeat; ++r) {
        const GenerationResult plain = generate(*model, *policy, request);
        last = generate(*model, *policy, request, {}, o->speculation.with(drafter.get()));
        identical = identical && last.ids == plain.ids;
        plain_tps.push_back(double(plain.ids.size()) / plain.decode_seconds);
        spec_tps.push_back(double(last.ids.size()) / last.decode_seconds);
      }
      const auto& s = last.spec;
      spec_out = {{"mode", o->speculation.draft_model.empty() ? "ngram" : "draft:" + o->speculation.draft_model},
                  {"draft_tokens", o->speculation.draft_tokens},
                  {"draft_length", o->speculation.draft_length},
                  {"decode_tok_s_without", median(plain_tps)},
                  {"decode_tok_s_with", median(spec_tps)},
                  {"speedup", median(spec_tps) / median(plain_tps)},
                  {"drafted", s.drafted},
                  {"accepted", s.accepted},
                  {"acceptance", s.drafted ? double(s.accepted) / double(s.drafted) : 0.0},
                  {"tokens_per_target_pass", double(last.ids.size() - 1) / double(std::max<int64_t>(1, s.target_passes))},
                  {"identical_to_plain", identical}};
    }
    nlohmann::json out = {
        {"model", o->model.model_dir},
        {"model_type", config.model_type},
        {"backend", model->backend_name()},
        {"dtype", compute_dtype_name(model->compute_dtype())},
        {"threads", ThreadPool::global().size()},
        {"prompt_tokens", o->prompt_tokens},
        {"gen_tokens", o->gen_tokens},
        {"prefill_chunk", policy->chunk_size(o->prompt_tokens, o->prompt_tokens + o->gen_tokens)},
        {"repeat", o->repeat},
        {"prefill_tok_s", median(prefill_tps)},
        {"batch", o->batch},
        {"temperature", o->temperature},
        {"min_p", o->min_p},
        {"top_k", o->top_k},
        {"top_p", o->top_p},
        {"decode_tok_s", median(decode_tps)},
        {"decode_tok_s_per_sequence", median(decode_tps) / double(o->batch)},
        {"weight_bytes", model->weight_bytes()},
        {"kv_scheme", model->kv_scheme().cache_key()},
        {"kv_bytes", kv_bytes},
        {"peak_rss_bytes", peak_resident_bytes()},
    };
    if (contract.device() == Device::cuda) {
      // The GPU's memory: the most this run held there (tensors and KV slabs)
      // against what the contract bills for its sequences.
      const int64_t context = o->prompt_tokens + o->gen_tokens;
      out["device_peak_bytes"] = allocated_peak_bytes(Device::cuda) + reserved_bytes(Device::cuda);
      out["device_contract_bytes"] =
          contract.predict(context, o->batch, policy->chunk_size(o->prompt_tokens, context)).total();
    }
    if (!spec_out.is_null()) out["spec"] = spec_out;
    if (const Backend::StepReplays r = model->backend().step_replays(); r.replays + r.captures > 0)
      out["step_graphs"] = {{"replays", r.replays},
                            {"captures", r.captures},
                            {"updated_nodes", r.updated_nodes},
                            {"lead_ms_per_replay", r.replays ? r.lead_seconds * 1e3 / double(r.replays) : 0.0},
                            {"host_ms_per_replay", r.replays ? r.host_seconds * 1e3 / double(r.replays) : 0.0},
                            {"gpu_ms_per_replay", r.replays ? r.gpu_seconds * 1e3 / double(r.replays) : 0.0}};
    if (!graph_costs.kernels.empty()) {
      nlohmann::json kernels = nlohmann::json::array();
      for (const auto& k : graph_costs.kernels)
        kernels.push_back({{"kernel", k.kernel}, {"nodes", k.nodes}, {"ms_saved", k.ms_saved}});
      out["step_graph_costs"] = {{"whole_ms", graph_costs.whole_ms}, {"kernels", kernels}};
    }
    if (o->profile_ops) {
      // Per decoded token and per prefill (all sequences of a repeat): each
      // op's time, and what the phase spent outside them.
      const auto per = [&](const char* phase, const OpProfile& profile, double seconds, double units, const char* unit) {
        nlohmann::json ops = nlohmann::json::object();
        for (const auto& [name, e] : profile.ops)
          ops[name] = {{std::string("ms_per_") + unit, e.seconds * 1e3 / units},
                       {std::string("calls_per_") + unit, double(e.calls) / units}};
        out[std::string(phase) + "_ops"] = ops;
        out[std::string(phase) + "_outside_ops_ms_per_" + unit] = (seconds - profile.total_seconds()) * 1e3 / units;
      };
      per("decode", decode_ops, decode_seconds, double(o->gen_tokens) * o->repeat, "token");
      if (!o->synthetic_context) per("prefill", prefill_ops, prefill_seconds, double(o->repeat), "prefill");
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  };
}

}  // namespace fathom::cli
