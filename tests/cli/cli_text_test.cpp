// The text commands end to end on a tiny random model that carries the real
// Qwen3 tokenizer and chat template: tokenize/detokenize agree with the
// transformers fixtures, generate takes --prompt/--chat/--stop and prints text.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "text/tokenizer/tokenizer.h"
#include "test_util.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;

std::pair<int, std::string> run(const std::string& args) {
  FILE* pipe = ::popen((std::string(FATHOM_BINARY) + " " + args + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, out};
}

// Parses a command's output, failing the test with that output when it is not JSON.
nlohmann::json parse_output(const std::string& out) {
  nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << out;
  return j;
}

// A 2-layer Qwen3 with the real vocabulary (151936) and random bf16 weights.
const fs::path& tiny_qwen3() {
  static const fs::path dir = [] {
    const fs::path tok = fs::path(FATHOM_TOKENIZERS_DIR) / "qwen3";
    EXPECT_TRUE(fs::exists(tok / "tokenizer.json")) << "run scripts/fetch_tokenizers.sh";
    fs::path d = fs::temp_directory_path() / ("fathom_tiny_qwen3_" + std::to_string(::getpid()));
    fs::create_directories(d);
    fs::copy_file(tok / "tokenizer.json", d / "tokenizer.json", fs::copy_options::overwrite_existing);
    fs::copy_file(tok / "tokenizer_config.json", d / "tokenizer_config.json", fs::copy_options::overwrite_existing);
    const int64_t vocab = 151936, hidden = 32, inter = 64, heads = 2, kv = 1, hd = 16;
    nlohmann::json config = {{"model_type", "qwen3"}, {"vocab_size", vocab}, {"hidden_size", hidden},
                             {"intermediate_size", inter}, {"num_hidden_layers", 2}, {"num_attention_heads", heads},
                             {"num_key_value_heads", kv}, {"head_dim", hd}, {"tie_word_embeddings", true},
                             {"rope_theta", 1e6}, {"rms_norm_eps", 1e-6}, {"eos_token_id", 151645},
                             {"dtype", "bfloat16"}};
    std::ofstream(d / "config.json") << config.dump();
    auto rng = testing::fresh_rng();
    std::map<std::string, Tensor> w;
    w["model.embed_tokens.weight"] = testing::random_tensor({vocab, hidden}, DType::bf16, rng);
    w["model.norm.weight"] = testing::random_tensor({hidden}, DType::bf16, rng);
    for (int l = 0; l < 2; ++l) {
      const std::string p = "model.layers." + std::to_string(l);
      w[p + ".input_layernorm.weight"] = testing::random_tensor({hidden}, DType::bf16, rng);
      w[p + ".post_attention_layernorm.weight"] = testing::random_tensor({hidden}, DType::bf16, rng);
      w[p + ".self_attn.q_proj.weight"] = testing::random_tensor({heads * hd, hidden}, DType::bf16, rng, 0.2f);
      w[p + ".self_attn.k_proj.weight"] = testing::random_tensor({kv * hd, hidden}, DType::bf16, rng, 0.2f);
      w[p + ".self_attn.v_proj.weight"] = testing::random_tensor({kv * hd, hidden}, DType::bf16, rng, 0.2f);
      w[p + ".self_attn.o_proj.weight"] = testing::random_tensor({hidden, heads * hd}, DType::bf16, rng, 0.2f);
      w[p + ".self_attn.q_norm.weight"] = testing::random_tensor({hd}, DType::bf16, rng);
      w[p + ".self_attn.k_norm.weight"] = testing::random_tensor({hd}, DType::bf16, rng);
      w[p + ".mlp.gate_proj.weight"] = testing::random_tensor({inter, hidden}, DType::bf16, rng, 0.2f);
      w[p + ".mlp.up_proj.weight"] = testing::random_tensor({inter, hidden}, DType::bf16, rng, 0.2f);
      w[p + ".mlp.down_proj.weight"] = testing::random_tensor({hidden, inter}, DType::bf16, rng, 0.2f);
    }
    write_safetensors((d / "model.safetensors").string(), w);
    static const fs::path* const cleanup = new fs::path(d);  // outlives static destruction
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(*cleanup, ignored);
    });
    return d;
  }();
  return dir;
}

TEST(CliText, TokenizeAndDetokenizeMatchTransformers) {
  std::ifstream in(std::string(FATHOM_FIXTURES_DIR) + "/tokenizer/qwen3.json");
  nlohmann::json fixture;
  in >> fixture;
  ASSERT_TRUE(fixture.contains("cases"));
  int checked = 0;
  for (const auto& c : fixture["cases"]) {
    const std::string text = c["text"];
    if (text.empty() || text.find_first_of("'\"\\$`\n") != std::string::npos || text.size() > 200) continue;
    auto [code, out] = run("tokenize --model " + tiny_qwen3().string() + " --text '" + text + "'");
    ASSERT_EQ(code, 0) << out;
    EXPECT_EQ(nlohmann::json::parse(out)["ids"], c["ids"]) << text;
    if (++checked == 12) break;
  }
  EXPECT_GE(checked, 12);
  auto [code, out] = run("detokenize --model " + tiny_qwen3().string() + " --ids 9707,11,1879,0");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["text"], "Hello, world!");
}

TEST(CliText, GeneratePrintsTextAndHonoursStopStrings) {
  const std::string model = tiny_qwen3().string();
  auto [code, out] = run("generate --model " + model + " --prompt 'Once upon a time' -n 12 --temp 0.8 --seed 3");
  ASSERT_EQ(code, 0) << out;
  const auto j = parse_output(out);
  ASSERT_TRUE(j.contains("text"));
  // The printed text is the decode of the ids (no stop strings here). The model's
  // vocabulary is padded past the tokenizer's, as Qwen3's is, and random weights
  // do sample those ids: they decode to nothing, while detokenize refuses them.
  const int64_t named = Tokenizer::load(model).vocab_size();
  std::string ids;
  for (int id : j["ids"])
    if (id < named) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  auto [dcode, dout] = run("detokenize --model " + model + " --skip-special --ids " + ids);
  // Random weights can emit byte tokens that never form a character; streaming
  // may then place U+FFFD differently from a full decode (valid text is exact).
  const std::string streamed = j["text"];
  if (streamed.find("\xEF\xBF\xBD") == std::string::npos) {
    ASSERT_EQ(dcode, 0) << dout;
    EXPECT_EQ(parse_output(dout)["text"], j["text"]);
  }
  // A stop string taken from the middle of that text cuts it right before.
  const std::string text = j["text"];
  // An ASCII stop string (so the cut never splits a character) from its middle.
  std::string stop;
  for (size_t i = text.size() / 3; i + 2 <= text.size() && stop.empty(); ++i)
    if (std::isalnum(static_cast<unsigned char>(text[i])) && std::isalnum(static_cast<unsigned char>(text[i + 1])))
      stop = text.substr(i, 2);
  if (!stop.empty()) {
    auto [scode, sout] = run("generate --model " + model + " --prompt 'Once upon a time' -n 12 --temp 0.8 --seed 3 --stop=" +
                             stop);
    ASSERT_EQ(scode, 0) << sout;
    const auto s = parse_output(sout);
    EXPECT_EQ(s["text"], text.substr(0, text.find(stop)));
    EXPECT_EQ(s["finish_reason"], "stop");
  }
  auto [ccode, cout] = run("generate --model " + model + " --chat 'Hi there' -n 3");
  EXPECT_EQ(ccode, 0) << cout;
  auto [bad, bout] = run("generate --model " + model + " --chat 'x' --prompt 'y'");
  EXPECT_NE(bad, 0);
  EXPECT_NE(bout.find("exactly one"), std::string::npos) << bout;
}

}  // namespace
}  // namespace fathom
