// The fathom binary as a user runs it: outputs on a parity fixture, and a
// one-line error with a non-zero exit for every kind of bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "sanitized_build.h"
#include "test_util.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code;
  std::string out, err;
};

RunResult run(const std::string& args) {
  const fs::path err_path = fs::temp_directory_path() / ("fathom_cli_err_" + std::to_string(::getpid()));
  const std::string cmd = std::string(FATHOM_BINARY) + " " + args + " 2>" + err_path.string();
  FILE* pipe = ::popen(cmd.c_str(), "r");
  RunResult r{};
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  std::ifstream in(err_path);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  return r;
}

const std::string kModel = std::string(FATHOM_FIXTURES_DIR) + "/parity/qwen3_untied_4layer";

nlohmann::json reference_json() {
  std::ifstream in(kModel + "/reference.json");
  nlohmann::json j;
  in >> j;
  return j;
}

std::string join_ids(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

TEST(Cli, LogitsWritesTheReferenceLogitsAsNpy) {
  const auto ref = reference_json();
  const auto prompt = ref["prompt_ids"].get<std::vector<int>>();
  const fs::path out = fs::temp_directory_path() / ("fathom_logits_" + std::to_string(::getpid()) + ".npy");
  const RunResult r = run("logits --model " + kModel + " --prompt-ids " + join_ids(prompt) + " --out " +
                          out.string() + " --dtype f32 --prefill-chunk 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<int64_t> shape;
  const std::vector<float> got = read_npy_f32(out.string(), shape);
  WeightStore store = WeightStore::open_file(kModel + "/reference.safetensors");
  Tensor expected = store.get("logits");
  ASSERT_EQ(shape, expected.shape());
  EXPECT_LT(testing::relative_error(got.data(), expected.data<float>(), expected.numel()), 1e-4);
}

TEST(Cli, GeneratePrintsTheGreedyIdsAsJson) {
  const auto ref = reference_json();
  const RunResult r = run("generate --model " + kModel + " --prompt-ids " +
                          join_ids(ref["prompt_ids"].get<std::vector<int>>()) + " -n 16 --temp 0 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["ids"], ref["greedy_ids"]);
  EXPECT_EQ(out["finish_reason"], "length");
}

TEST(Cli, SeededSamplingIsReproducible) {
  const std::string args = "generate --model " + kModel + " --prompt-ids 5,17,42 -n 12 --temp 1.0 --top-p 0.95 --seed 7";
  const RunResult a = run(args), b = run(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(Cli, BenchPrintsSpeedsAndPeakMemory) {
  const RunResult r = run("bench --model " + kModel + " --prompt-tokens 16 --gen-tokens 4 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  EXPECT_GT(out["prefill_tok_s"].get<double>(), 0.0);
  EXPECT_GT(out["decode_tok_s"].get<double>(), 0.0);
  EXPECT_GT(out["peak_rss_bytes"].get<int64_t>(), 0);
}

void expect_clean_failure(const std::string& args, const std::string& needle) {
  const RunResult r = run(args);
  EXPECT_NE(r.exit_code, 0) << args;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\nstderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "not one line: " << r.err;
}

TEST(Cli, BadInputGivesOneLineErrorAndNonZeroExit) {
  const fs::path tmp = fs::temp_directory_path() / ("fathom_cli_bad_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  expect_clean_failure("generate --model /nonexistent/model --prompt-ids 1,2", "not found");
  expect_clean_failure("generate --model " + kModel + " --prompt-ids 1,99999", "out of range");
  expect_clean_failure("generate --model " + kModel + " --prompt-ids 1,x", "not a token id");
  expect_clean_failure("generate --model " + kModel + " --prompt-ids 1 --bogus-flag", "bogus");
  expect_clean_failure("generate --model " + kModel + " --prompt-ids 1 --dtype f8", "f8");
  expect_clean_failure("generate --model " + kModel + " --prompt-ids 1 --temp -1", "temperature");
  expect_clean_failure("frobnicate", "frobnicate");

  // Unsupported architecture.
  const fs::path arch = tmp / "arch";
  fs::create_directories(arch);
  std::ifstream cfg_in(kModel + "/config.json");
  nlohmann::json cfg;
  cfg_in >> cfg;
  cfg["model_type"] = "gpt_neo_nonexistent";
  std::ofstream(arch / "config.json") << cfg.dump();
  expect_clean_failure("generate --model " + arch.string() + " --prompt-ids 1", "supported: llama");

  // Truncated safetensors.
  const fs::path cut = tmp / "cut";
  fs::create_directories(cut);
  fs::copy_file(kModel + "/config.json", cut / "config.json");
  fs::copy_file(kModel + "/model.safetensors", cut / "model.safetensors");
  fs::resize_file(cut / "model.safetensors", fs::file_size(cut / "model.safetensors") / 2);
  expect_clean_failure("generate --model " + cut.string() + " --prompt-ids 1", "truncated");

  // Unreadable weights: garbage header.
  const fs::path junk = tmp / "junk";
  fs::create_directories(junk);
  fs::copy_file(kModel + "/config.json", junk / "config.json");
  std::ofstream(junk / "model.safetensors") << "garbage that is not a safetensors file";
  expect_clean_failure("logits --model " + junk.string() + " --prompt-ids 1 --out /dev/null", "safetensors");
}

// A --model that is not there says so, whichever command is asked (it used to
// blame a missing tokenizer.json or config.json inside it).
TEST(Cli, AMissingModelFolderIsNamed) {
  for (const char* command : {"generate --chat hi", "serve", "chat --prompt hi", "fit", "tokenize --text hi"}) {
    std::string args = command;
    args.insert(args.find(' ') == std::string::npos ? args.size() : args.find(' '), " --model /nonexistent/model");
    expect_clean_failure(args, "model folder /nonexistent/model not found");
  }
  expect_clean_failure("generate --model " + kModel + "/config.json --chat hi", "is a file, not a model folder");
}

nlohmann::json fit_json(const std::string& model, const std::string& flags, int threads = 1) {
  const RunResult r = run("fit --model " + model + " --threads " + std::to_string(threads) + " --json " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

// The contract's promise on the CPU: what fit predicts for a run bounds the
// resident peak of that run. (A CUDA build once linked cuBLAS, whose
// constructors alone made ~160 MB resident that no term knew of.)
TEST(Cli, FitBoundsTheResidentPeakOfTheRun) {
  if (testing::kSanitizedBuild) GTEST_SKIP() << "skipped: a sanitizer's shadow memory and quarantine are not the release's";
  for (const char* fixture : {"qwen3_untied_4layer", "qwen3_5_text", "gemma3_sliding"}) {
    const std::string model = std::string(FATHOM_FIXTURES_DIR) + "/parity/" + fixture;
    for (int threads : {1, 2}) {
      const nlohmann::json fit = fit_json(model, "--ctx 20", threads);
      ASSERT_TRUE(fit.contains("total_bytes")) << fixture;
      const RunResult bench =
          run("bench --model " + model + " --prompt-tokens 16 --gen-tokens 4 --threads " + std::to_string(threads));
      ASSERT_EQ(bench.exit_code, 0) << bench.err;
      const int64_t peak = nlohmann::json::parse(bench.out)["peak_rss_bytes"].get<int64_t>();
      EXPECT_LE(peak, fit["total_bytes"].get<int64_t>()) << fixture << " at " << threads << " threads";
    }
  }
}

// fathom quantize writes a folder the other commands take as it is (fit reads
// its packed weights' bytes; generate's greedy ids come from the codes), and
// says clearly what it cannot do.
TEST(Cli, QuantizeWritesAFolderTheOtherCommandsRun) {
  const fs::path out = fs::temp_directory_path() / ("fathom_cli_q4_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const RunResult q = run("quantize --model " + kModel + " --out " + out.string() + " --bits 4 --group-size 32");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const auto report = nlohmann::json::parse(q.out);
  EXPECT_GT(report["quantized_modules"].get<int>(), 0);
  EXPECT_LT(report["bytes_out"].get<int64_t>(), report["bytes_in"].get<int64_t>());
  const nlohmann::json fit = fit_json(out.string(), "--ctx 64");
  int64_t stored = 0;
  for (const auto& [_, t] : read_safetensors_headers(out.string())) stored += int64_t(t.nbytes);
  EXPECT_GE(fit["weights_bytes"].get<int64_t>(), stored);
  const RunResult g = run("generate --model " + out.string() + " --prompt-ids 1,2,3 -n 4 --temp 0");
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["ids"].size(), 4u);
  expect_clean_failure("quantize --model " + kModel + " --out " + out.string() + "_7 --bits 7", "--bits 7");
  expect_clean_failure("quantize --model " + kModel + " --out " + out.string() + "_g --group-size 48", "--group-size 48");
  expect_clean_failure("quantize --model " + kModel + " --out " + out.string() + "_m --mixed mixed_9", "mixed_9");
  expect_clean_failure("quantize --model " + out.string() + " --out " + out.string() + "_again", "already quantized");
  fs::remove_all(out);
}

TEST(Cli, FitPrintsEveryTermAndTheLimits) {
  const nlohmann::json j = fit_json(kModel, "--ctx 64 --memory-budget 1GiB");
  for (const char* key : {"weights_bytes", "kv_bytes", "transient_bytes", "runtime_bytes", "total_bytes",
                          "budget_bytes", "max_context", "max_sequences", "prefill_chunk"})
    ASSERT_TRUE(j.contains(key) && j[key].is_number_integer()) << key << " in " << j.dump();
  EXPECT_EQ(j["total_bytes"].get<int64_t>(), j["weights_bytes"].get<int64_t>() + j["kv_bytes"].get<int64_t>() +
                                                 j["transient_bytes"].get<int64_t>() +
                                                 j["runtime_bytes"].get<int64_t>());
  EXPECT_EQ(j["budget_bytes"].get<int64_t>(), int64_t(1) << 30);
  EXPECT_TRUE(j["fits"].get<bool>());
  const ModelConfig config = load_model_config(kModel);
  EXPECT_EQ(j["max_context"].get<int64_t>(), config.max_position_embeddings);
  EXPECT_GT(j["max_sequences"].get<int64_t>(), 1);
  EXPECT_EQ(j["kv"]["cache_key"], "bf16");
  // Sequences multiply the KV term and nothing else.
  const nlohmann::json three = fit_json(kModel, "--ctx 64 --memory-budget 1GiB --sequences 3");
  EXPECT_EQ(three["kv_bytes"].get<int64_t>(), 3 * j["kv_bytes"].get<int64_t>());
  EXPECT_EQ(three["weights_bytes"], j["weights_bytes"]);

  // A byte short of the total: a smaller prefill chunk makes it fit.
  const int64_t total = j["total_bytes"].get<int64_t>();
  const nlohmann::json smaller = fit_json(kModel, "--ctx 64 --memory-budget " + std::to_string(total - 1));
  EXPECT_TRUE(smaller["fits"].get<bool>());
  EXPECT_LT(smaller["prefill_chunk"].get<int64_t>(), 64);
  // With no room for any step at this context it does not fit, and the limits it reports do.
  const std::string tight = std::to_string(total - j["transient_bytes"].get<int64_t>());
  const nlohmann::json short_of = fit_json(kModel, "--ctx 64 --memory-budget " + tight);
  EXPECT_FALSE(short_of["fits"].get<bool>());
  const int64_t max_context = short_of["max_context"].get<int64_t>();
  EXPECT_GT(max_context, 0);
  EXPECT_LT(max_context, 64);
  const nlohmann::json at_max = fit_json(kModel, "--ctx " + std::to_string(max_context) + " --memory-budget " + tight);
  EXPECT_TRUE(at_max["fits"].get<bool>()) << at_max.dump();
  const nlohmann::json past_max =
      fit_json(kModel, "--ctx " + std::to_string(max_context + 1) + " --memory-budget " + tight);
  EXPECT_FALSE(past_max["fits"].get<bool>()) << past_max.dump();

  // The table names every term.
  const RunResult table = run("fit --model " + kModel + " --ctx 64 --memory-budget 1GiB");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const char* word : {"weights", "kv", "transient", "runtime", "total", "budget", "fits"})
    EXPECT_NE(table.out.find(word), std::string::npos) << word << " in\n" << table.out;
}

// Speculation adds its term: nothing without it; per sequence with prompt
// lookup on a hybrid model (its recurrent states during a verify step), and
// the draft model's weights once with a draft model.
TEST(Cli, FitCountsSpeculation) {
  const std::string hybrid = std::string(FATHOM_FIXTURES_DIR) + "/parity/qwen3_5_text";
  const nlohmann::json plain = fit_json(hybrid, "--ctx 64 --memory-budget 1GiB");
  EXPECT_EQ(plain["speculation_bytes"].get<int64_t>(), 0);
  const nlohmann::json ngram = fit_json(hybrid, "--ctx 64 --memory-budget 1GiB --spec ngram --draft-tokens 8");
  const nlohmann::json ngram2 =
      fit_json(hybrid, "--ctx 64 --memory-budget 1GiB --spec ngram --draft-tokens 8 --sequences 2");
  EXPECT_GT(ngram["speculation_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(ngram2["speculation_bytes"].get<int64_t>(), 2 * ngram["speculation_bytes"].get<int64_t>());
  EXPECT_EQ(ngram["total_bytes"].get<int64_t>(),
            plain["total_bytes"].get<int64_t>() + ngram["speculation_bytes"].get<int64_t>());
  const nlohmann::json draft = fit_json(kModel, "--ctx 64 --memory-budget 1GiB --draft-model " + kModel);
  EXPECT_GT(draft["speculation_bytes"].get<int64_t>(), draft["weights_bytes"].get<int64_t>())
      << "the draft's weights, and its cache per sequence";
  expect_clean_failure("fit --model " + kModel + " --spec ngram --draft-tokens 0", "--draft-tokens");
}

TEST(Cli, FitReadsOnlyTheHeaders) {
  // A folder whose tensor data is cut off right after the header measures the same.
  const fs::path cut = fs::temp_directory_path() / ("fathom_fit_cut_" + std::to_string(::getpid()));
  fs::remove_all(cut);
  fs::create_directories(cut);
  fs::copy_file(kModel + "/config.json", cut / "config.json");
  fs::copy_file(kModel + "/model.safetensors", cut / "model.safetensors");
  uint64_t header_len = 0;
  std::ifstream(kModel + "/model.safetensors", std::ios::binary).read(reinterpret_cast<char*>(&header_len), 8);
  fs::resize_file(cut / "model.safetensors", 8 + header_len);
  const nlohmann::json whole = fit_json(kModel, "--ctx 100 --memory-budget 1GiB --turbo-kv 3,4");
  const nlohmann::json headers = fit_json(cut.string(), "--ctx 100 --memory-budget 1GiB --turbo-kv 3,4");
  EXPECT_EQ(whole["weights_bytes"], headers["weights_bytes"]);
  EXPECT_EQ(whole["total_bytes"], headers["total_bytes"]);
  fs::remove_all(cut);
}

// --device cuda bills GPU memory: needing no GPU with a budget given (the
// contract reads headers only); without one, the GPU's free memory is the
// budget, and a machine without a usable GPU says so.
TEST(Cli, FitOnTheGpuBillsDeviceMemory) {
  const nlohmann::json cpu = fit_json(kModel, "--ctx 64 --memory-budget 1GiB --dtype bf16");
  const nlohmann::json gpu = fit_json(kModel, "--ctx 64 --memory-budget 1GiB --dtype bf16 --device cuda");
  EXPECT_EQ(gpu["device"], "cuda");
  EXPECT_EQ(gpu["kv_bytes"], cpu["kv_bytes"]) << "the same KV blocks";
  EXPECT_GE(gpu["runtime_bytes"].get<int64_t>(), int64_t(48) << 20) << "cuBLAS's workspace and a KV slab at least";
  EXPECT_EQ(gpu["total_bytes"].get<int64_t>(), gpu["weights_bytes"].get<int64_t>() + gpu["kv_bytes"].get<int64_t>() +
                                                   gpu["transient_bytes"].get<int64_t>() +
                                                   gpu["runtime_bytes"].get<int64_t>());
  const RunResult table = run("fit --model " + kModel + " --ctx 64 --memory-budget 1GiB --device cuda");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("on cuda"), std::string::npos) << table.out;
  const RunResult free_memory = run("fit --model " + kModel + " --ctx 64 --device cuda");
  if (free_memory.exit_code == 0) {
    EXPECT_NE(free_memory.out.find("of the free memory of cuda"), std::string::npos) << free_memory.out;
  } else {
    EXPECT_NE(free_memory.err.find("--device cuda"), std::string::npos) << free_memory.err;
    EXPECT_EQ(std::count(free_memory.err.begin(), free_memory.err.end(), '\n'), 1) << free_memory.err;
  }
  expect_clean_failure("fit --model " + kModel + " --device tpu", "unknown device");
}

TEST(Cli, DescribeKvBillsTheDtypeReallyStored) {
  auto bytes = [](const std::string& dtype) {
    const RunResult r = run("fit --model " + kModel + " --describe-kv --dtype " + dtype);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["bytes_at"]["bytes"].get<int64_t>();
  };
  EXPECT_EQ(bytes("f32"), 2 * bytes("bf16"));  // f32 compute keeps f32 KV
}

TEST(Cli, FitRejectsBadInput) {
  expect_clean_failure("fit --model /nonexistent/model", "not found");
  expect_clean_failure("fit --model " + kModel + " --memory-budget 12XB", "unknown unit");
  expect_clean_failure("fit --model " + kModel + " --memory-budget lots", "not a size");
  expect_clean_failure("fit --model " + kModel + " --memory-budget 0", "less than one byte");
  expect_clean_failure("fit --model " + kModel + " --kv-quant 8 --kv-group-size 128", "group size");
  expect_clean_failure("fit --model " + kModel + " --ctx 100000000", "max_position_embeddings");
  expect_clean_failure("fit --model " + kModel + " --sequences 0", "--sequences");
}

// --prompts-file: every prompt in one continuous batch, staggered joins; each
// line is what generate prints for that prompt alone, in input order.
TEST(Cli, GeneratePromptsFileRunsThemTogetherInOrder) {
  const fs::path file = fs::temp_directory_path() / ("fathom_prompts_" + std::to_string(::getpid()) + ".jsonl");
  auto rng = testing::fresh_rng();
  std::mt19937 ids_rng{uint32_t(rng())};
  std::vector<std::string> lines, alone;
  for (const int n : {5, 23, 2}) {
    const std::string ids = join_ids([&] {
      std::vector<int> v;
      for (int32_t id : testing::random_ids(n, 512, ids_rng)) v.push_back(id);
      return v;
    }());
    lines.push_back("{\"ids\": [" + ids + "]}");
    const RunResult one = run("generate --model " + kModel + " --prompt-ids " + ids + " -n 6 --ignore-eos");
    ASSERT_EQ(one.exit_code, 0) << one.err;
    alone.push_back(one.out);
  }
  {
    std::ofstream out(file);
    for (const auto& l : lines) out << l << "\n\n";  // blank lines are skipped
  }
  const RunResult r = run("generate --model " + kModel + " --prompts-file " + file.string() + " --stagger 2 -n 6 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, alone[0] + alone[1] + alone[2]);

  std::ofstream(file) << "{\"ids\": [1, 2]}\n{\"text\": \"x\"}\n";
  expect_clean_failure("generate --model " + kModel + " --prompts-file " + file.string(), "line 2");
  std::ofstream(file) << "{\"ids\": [1, -4]}\n";
  expect_clean_failure("generate --model " + kModel + " --prompts-file " + file.string(), "not a token id");
  expect_clean_failure("generate --model " + kModel + " --prompts-file " + file.string() + " --prompt-ids 1",
                       "exactly one of");
  expect_clean_failure("generate --model " + kModel + " --prompts-file /nonexistent.jsonl", "cannot read");
  fs::remove(file);
}

}  // namespace
}  // namespace fathom
