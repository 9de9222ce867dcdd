// fathom kv-eval --model DIR --tokens 2048 --schemes kv8,kv4,turbo-k3v4,... [--text-file F]
// fathom kv-eval --model DIR --models Q8_DIR,Q4_DIR,... (quantized weights; no schemes unless given)
// Quality of KV-cache schemes against bf16 KV, or of other weights of the same
// model (quantized folders) against DIR's, on the same token sequence: per
// position KL(P_ref ‖ P_other) of the next-token distributions, its mean and
// 99th percentile, top-1 agreement, and KV bytes per token (weight bytes for
// models). All run in lockstep, chunk by chunk, so only one chunk of logits is
// held at a time.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <fstream>
#include <sstream>

#include "backend/cpu/kernels.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "core/error.h"
#include "engine/generator.h"
#include "io/safetensors.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom::cli {
namespace {

// log-softmax of one row, in double.
std::vector<double> log_softmax(const float* logits, int64_t n) {
  const float max_logit = *std::max_element(logits, logits + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - max_logit);
  const double log_sum = std::log(sum) + max_logit;
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = double(logits[i]) - log_sum;
  return out;
}

double kl_divergence(const std::vector<double>& log_p, const std::vector<double>& log_q) {
  double kl = 0.0;
  for (size_t i = 0; i < log_p.size(); ++i) kl += std::exp(log_p[i]) * (log_p[i] - log_q[i]);
  return std::max(kl, 0.0);
}

}  // namespace

Command add_kv_eval_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    int64_t tokens = 2048;
    std::string schemes = "kv8,kv4,kv4-g32,kv2,kv4-start512,turbo-k4v4,turbo-k3v4,turbo-k2v3";
    uint64_t seed = 1;
    std::string text_file;
    std::string models;
  };
  auto o = std::make_shared<Options>();
  o->model.add_to(app);
  app.add_option("--tokens", o->tokens, "sequence length")->capture_default_str();
  CLI::Option* schemes =
      app.add_option("--schemes", o->schemes, "comma-separated KV scheme cache keys")->capture_default_str();
  app.add_option("--models", o->models,
                 "comma-separated model folders with other weights of the same model (quantized), compared with "
                 "bf16 KV; with --models, schemes run only when --schemes is given");
  app.add_option("--seed", o->seed, "seed of the random token sequence")->capture_default_str();
  app.add_option("--text-file", o->text_file,
                 "evaluate on this text (the model's tokenizer; its first --tokens tokens) instead of random ids");
  return [o, schemes] {
    check(o->tokens > 1, "--tokens must be > 1, got ", o->tokens);
    auto reference = o->model.load();  // bf16 KV unless KV flags were given
    check(reference->kv_scheme().kind() == KvScheme::Kind::bf16, "kv-eval: the reference must use bf16 KV; pass "
          "the schemes to compare with --schemes");
    const ModelConfig& config = reference->config();
    std::vector<std::unique_ptr<Model>> models;
    std::vector<std::string> labels;  // a scheme's cache key, or a model folder
    std::stringstream folders(o->models);
    for (std::string dir; std::getline(folders, dir, ',');) {
      LoadOptions options;
      options.dtype = reference->compute_dtype();
      models.push_back(load_model(dir, options));
      check(models.back()->config().vocab_size == config.vocab_size, "kv-eval: ", dir, " has a vocabulary of ",
            models.back()->config().vocab_size, ", not ", config.vocab_size);
      labels.push_back(dir);
    }
    const int64_t compared_models = int64_t(models.size());
    std::stringstream list(o->models.empty() || schemes->count() > 0 ? o->schemes : "");
    for (std::string key; std::getline(list, key, ',');) {
      LoadOptions options;
      options.dtype = reference->compute_dtype();
      options.kv_scheme = KvScheme::from_cache_key(key, o->model.model_dir);
      models.push_back(load_model(o->model.model_dir, options));
      labels.push_back(models.back()->kv_scheme().cache_key());
    }
    check(!models.empty(), "kv-eval: nothing to compare (give --schemes or --models)");
    auto weight_bytes = [](const std::string& dir) {
      int64_t bytes = 0;
      for (const auto& [_, t] : read_safetensors_headers(dir)) bytes += int64_t(t.nbytes);
      return bytes;
    };
    std::vector<int32_t> ids;
    if (!o->text_file.empty()) {
      std::ifstream in(o->text_file);
      check(bool(in), "--text-file: cannot read ", o->text_file);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      ids = Tokenizer::load(o->model.model_dir).encode(text, /*add_special_tokens=*/false);
      check(int64_t(ids.size()) >= o->tokens, "--text-file: ", o->text_file, " has ", ids.size(),
            " tokens, fewer than --tokens ", o->tokens);
      ids.resize(static_cast<size_t>(o->tokens));
    } else {
      std::mt19937_64 rng(o->seed);
      ids.resize(static_cast<size_t>(o->tokens));
      for (auto& id : ids) id = int32_t(rng() % uint64_t(config.vocab_size));
    }

    auto ref_state = reference->new_state(o->tokens);
    std::vector<std::unique_ptr<SequenceState>> states;
    for (auto& m : models) states.push_back(m->new_state(o->tokens));
    std::vector<std::vector<double>> kls(models.size());
    std::vector<int64_t> agree(models.size(), 0);
    const MemoryContract contract = o->model.memory_contract();
    const int64_t chunk = o->model.prefill_policy(contract)->chunk_size(o->tokens, o->tokens);
    const int64_t vocab = config.vocab_size;
    for (int64_t begin = 0; begin < o->tokens; begin += chunk) {
      const int64_t end = std::min(o->tokens, begin + chunk);
      const std::vector<int32_t> piece(ids.begin() + begin, ids.begin() + end);
      const Tensor ref = reference->forward(piece, *ref_state, true);
      std::vector<std::vector<double>> ref_log;
      std::vector<int32_t> ref_top;
      for (int64_t r = 0; r < end - begin; ++r) {
        ref_log.push_back(log_softmax(ref.data<float>() + r * vocab, vocab));
        ref_top.push_back(cpu::argmax({ref.data<float>() + r * vocab, size_t(vocab)}));
      }
      for (size_t s = 0; s < models.size(); ++s) {
        const Tensor got = models[s]->forward(piece, *states[s], true);
        for (int64_t r = 0; r < end - begin; ++r) {
          kls[s].push_back(kl_divergence(ref_log[r], log_softmax(got.data<float>() + r * vocab, vocab)));
          agree[s] += cpu::argmax({got.data<float>() + r * vocab, size_t(vocab)}) == ref_top[r];
        }
      }
    }
    nlohmann::json out = nlohmann::json::array();
    out.push_back({{"scheme", "bf16"},
                   {"model", o->model.model_dir},
                   {"weight_bytes", weight_bytes(o->model.model_dir)},
                   {"kv_bytes_per_token", double(reference->kv_bytes_at(o->tokens)) / o->tokens}});
    for (size_t s = 0; s < models.size(); ++s) {
      std::vector<double> sorted = kls[s];
      std::sort(sorted.begin(), sorted.end());
      double mean = 0.0;
      for (double k : sorted) mean += k / double(sorted.size());
      nlohmann::json row = {{int64_t(s) < compared_models ? "model" : "scheme", labels[s]},
                            {"kl_mean", mean},
                            {"kl_p99", sorted[size_t(0.99 * double(sorted.size() - 1))]},
                            {"top1_agreement", double(agree[s]) / double(o->tokens)},
                            {"kv_bytes_per_token", double(models[s]->kv_bytes_at(o->tokens)) / o->tokens}};
      if (int64_t(s) < compared_models) row["weight_bytes"] = weight_bytes(labels[s]);
      out.push_back(row);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  };
}

}  // namespace fathom::cli
