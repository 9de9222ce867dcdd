// KvScheme as a value: cache keys, per-layer codecs, describe, exact bytes
// (held against what a sequence really allocates), delayed-start exactness,
// and every invalid flag combination.
#include "kv/kv_scheme.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "engine/generator.h"
#include "model/model.h"
#include "test_util.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;

ModelConfig synthetic(const std::vector<std::string>& types, int64_t head_dim = 128) {
  nlohmann::json c = {{"model_type", "qwen3_next"},  {"vocab_size", 64},        {"hidden_size", 256},
                      {"intermediate_size", 512},    {"num_hidden_layers", types.size()},
                      {"num_attention_heads", 4},    {"num_key_value_heads", 2}, {"head_dim", head_dim},
                      {"layer_types", types},        {"sliding_window", 512},
                      {"linear_num_key_heads", 2},   {"linear_num_value_heads", 4},
                      {"linear_key_head_dim", 16},   {"linear_value_head_dim", 16},
                      {"linear_conv_kernel_dim", 4}};
  return parse_model_config(c);
}

TEST(KvScheme, CacheKeysNameEverythingThatChangesBytes) {
  EXPECT_EQ(KvScheme::bf16().cache_key(), "bf16");
  EXPECT_EQ(KvScheme::affine_uniform(4, 64, 0).cache_key(), "kv4");
  EXPECT_EQ(KvScheme::affine_uniform(4, 32, 0).cache_key(), "kv4-g32");
  EXPECT_EQ(KvScheme::affine_uniform(8).cache_key(), "kv8-start5000");
  EXPECT_EQ(KvScheme::affine_uniform(4, 32, 100).cache_key(), "kv4-g32-start100");
  EXPECT_EQ(KvScheme::affine_config({}).cache_key(), "config");
  EXPECT_EQ(KvScheme::affine_config({}, 10).cache_key(), "config-start10");
  EXPECT_EQ(KvScheme::turbo(3, 4).cache_key(), "turbo-k3v4");
  EXPECT_EQ(KvScheme::turbo(3, 4, 64).cache_key(), "turbo-k3v4-start64");
}

TEST(KvScheme, CacheKeysParseBack) {
  for (const char* key : {"bf16", "kv4", "kv4-g32", "kv8-start5000", "kv2-g128-start7", "turbo-k3v4", "turbo-k2v3-start64"})
    EXPECT_EQ(KvScheme::from_cache_key(key).cache_key(), key);
  for (const char* bad : {"kv", "kv5", "kv4-g48", "turbo-k5v4", "kv4-start", "kv4x", "fp8"})
    EXPECT_THROW(KvScheme::from_cache_key(bad), Error) << bad;
}

TEST(KvScheme, DescribeCountsCodecsPerLayerKind) {
  const ModelConfig dense = synthetic({"full_attention", "full_attention", "full_attention"});
  auto d = KvScheme::affine_uniform(4, 64, 0).describe(dense);
  EXPECT_EQ(d["codecs"]["kv4"], 3);
  EXPECT_EQ(d["mode"], "affine-uniform");
  const ModelConfig hybrid = synthetic({"linear_attention", "linear_attention", "full_attention", "sliding_attention"});
  auto t = KvScheme::turbo(3, 4).describe(hybrid);
  EXPECT_EQ(t["codecs"]["turbo-k3v4"], 1);  // only the global layer
  EXPECT_EQ(t["codecs"]["bf16"], 1);        // the sliding layer stays exact
  EXPECT_EQ(t["attention_layers"]["global"], 1);
  EXPECT_EQ(t["attention_layers"]["sliding"], 1);
  EXPECT_EQ(t["recurrent_layers"], 2);
  auto c = KvScheme::affine_config({{3, 8, 32}}).describe(hybrid);
  EXPECT_EQ(c["codecs"]["kv8-g32"], 1);
  EXPECT_EQ(c["codecs"]["bf16"], 1);
  EXPECT_THROW(KvScheme::affine_config({{0, 4, 64}}).describe(hybrid), Error);  // a recurrent layer
  EXPECT_THROW(KvScheme::affine_config({{9, 4, 64}}).describe(hybrid), Error);  // out of range
}

TEST(KvScheme, BytesAtFollowsTheCodecsAndTheStart) {
  const ModelConfig m = synthetic({"full_attention", "sliding_attention", "linear_attention"});
  const int64_t heads = 2, d = 128;
  // The linear-attention layer: an f32 conv window (2·32 + 64 channels × 3 taps) and the 4 × 16 × 16 matrix.
  const int64_t recurrent = 4 * ((2 * 32 + 64) * 3 + 4 * 16 * 16);
  EXPECT_EQ(m.linear_attention->state_bytes(), recurrent);
  // Blocks hold 32 tokens of the widest layer in bf16: K and V of 2 heads of 128.
  const int64_t block = 32 * heads * 2 * d * 2;
  EXPECT_EQ(kv_block_bytes(m, DType::bf16), block);
  // bf16: 100 tokens take 4 blocks in each attention layer.
  EXPECT_EQ(KvScheme::bf16().bytes_at(m, 100), 2 * 4 * block + recurrent);
  // kv4 g64: 64 bytes of codes + 2 groups × (scale + bias) × 2 bytes, for K
  // and V of 2 heads: 288 bytes a token, so 113 tokens fit a block.
  const KvFormat kv4 = KvScheme::affine_uniform(4, 64, 0).codec_for_layer(m, 0).format(heads, d, DType::bf16, block);
  EXPECT_EQ(kv4.token_bytes(), 288);
  EXPECT_EQ(kv4.block_rows, 113);
  EXPECT_EQ(KvScheme::affine_uniform(4, 64, 0).bytes_at(m, 113), 2 * block + recurrent);
  EXPECT_EQ(KvScheme::affine_uniform(4, 64, 0).bytes_at(m, 114), 2 * 2 * block + recurrent);
  // Before the start everything is bf16.
  EXPECT_EQ(KvScheme::affine_uniform(4, 64, 500).bytes_at(m, 100), KvScheme::bf16().bytes_at(m, 100));
  // turbo k3v4 on the global layer only (codes + an f32 norm each); the sliding layer stays bf16.
  const KvFormat turbo = KvScheme::turbo(3, 4).codec_for_layer(m, 0).format(heads, d, DType::bf16, block);
  EXPECT_EQ(turbo.token_bytes(), heads * (d * 3 / 8 + 4 + d * 4 / 8 + 4));
  EXPECT_EQ(KvScheme::turbo(3, 4).bytes_at(m, 300), ((300 + turbo.block_rows - 1) / turbo.block_rows + 10) * block + recurrent);
  // The sliding layer (window 512) stops growing at the blocks for 511 + the
  // step, plus one partly passed; the global one does not.
  EXPECT_EQ(KvScheme::bf16().bytes_at(m, 10000, 2, 64) - KvScheme::bf16().bytes_at(m, 9000, 2, 64),
            (313 - 282) * block);
  EXPECT_EQ(KvScheme::bf16().bytes_at(m, 10000, 2, 64), (313 + 18 + 1) * block + recurrent);
}

TEST(KvScheme, EveryInvalidFlagCombinationIsAClearError) {
  const std::string dir = std::string(FATHOM_FIXTURES_DIR) + "/parity/llama_gqa_untied";
  EXPECT_NO_THROW(KvScheme::from_flags("off", {}, "", "", dir));
  EXPECT_EQ(KvScheme::from_flags("4", 32, "7", "", dir).cache_key(), "kv4-g32-start7");
  EXPECT_EQ(KvScheme::from_flags("off", {}, "3", "2,3", dir).cache_key(), "turbo-k2v3-start3");
  EXPECT_THROW(KvScheme::from_flags("5", {}, "", "", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("four", {}, "", "", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("4", 48, "", "", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("4", {}, "-1", "", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("4", {}, "1.5", "", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("4", {}, "", "3,4", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("off", 32, "", "", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("off", {}, "100", "", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("off", 32, "", "3,4", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("off", {}, "", "5,4", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("off", {}, "", "3", dir), Error);
  EXPECT_THROW(KvScheme::from_flags("config", {}, "", "", dir), Error);  // no kv_config.json there
  EXPECT_THROW(KvScheme::from_flags("config", 32, "", "", dir), Error);
  // A group the head_dim cannot hold is caught against the model.
  EXPECT_THROW(KvScheme::affine_uniform(4, 64, 0).validate_for(synthetic({"full_attention"}, 32)), Error);
  EXPECT_THROW(KvScheme::turbo(3, 3).validate_for(synthetic({"full_attention"}, 96)), Error);
}

TEST(KvScheme, KvConfigJsonIsReadAndChecked) {
  const fs::path dir = fs::temp_directory_path() / ("fathom_kvconfig_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "kv_config.json") << R"([{"layer_idx": 0, "bits": 8}, {"layer_idx": 2, "bits": 4, "group_size": 32}])";
  const KvScheme s = KvScheme::from_flags("config", {}, "", "", dir.string());
  const ModelConfig m = synthetic({"full_attention", "full_attention", "full_attention"});
  EXPECT_EQ(s.codec_for_layer(m, 0).label(), "kv8");
  EXPECT_EQ(s.codec_for_layer(m, 1).label(), "bf16");
  EXPECT_EQ(s.codec_for_layer(m, 2).label(), "kv4-g32");
  std::ofstream(dir / "kv_config.json") << R"([{"layer_idx": 0, "bits": 8}, {"layer_idx": 0, "bits": 4}])";
  EXPECT_THROW(KvScheme::from_flags("config", {}, "", "", dir.string()), Error);
  std::ofstream(dir / "kv_config.json") << R"([{"layer": 0}])";
  EXPECT_THROW(KvScheme::from_flags("config", {}, "", "", dir.string()), Error);
}

// On a real (tiny) model: allocated bytes equal bytes_at, delayed start is
// exact to the bit before the start and converts exactly at the boundary.
class SchemeOnModel : public ::testing::Test {
 protected:
  const std::string dir_ = std::string(FATHOM_FIXTURES_DIR) + "/parity/llama_gqa_untied";  // head_dim 32
  std::unique_ptr<Model> load(const KvScheme& scheme, ComputeDType dtype = ComputeDType::bf16) const {
    LoadOptions o;
    o.dtype = dtype;
    o.kv_scheme = scheme;
    return load_model(dir_, o);
  }
  std::vector<int32_t> prompt(int64_t n) const {
    auto rng = testing::fresh_rng();
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i) ids.push_back(int32_t(3 + rng() % 500));
    return ids;
  }
};

TEST_F(SchemeOnModel, AllocatedBytesEqualBytesAt) {
  const int64_t t = 37;
  for (const KvScheme& s : {KvScheme::bf16(), KvScheme::affine_uniform(4, 32, 0), KvScheme::affine_uniform(8, 32, 20),
                            KvScheme::affine_uniform(2, 32, 100), KvScheme::turbo(3, 4), KvScheme::turbo(2, 2, 5)})
    for (ComputeDType dtype : {ComputeDType::bf16, ComputeDType::f32}) {
      auto model = load(s, dtype);
      auto state = model->new_state(t);
      prefill(*model, *state, prompt(t), FixedPrefillPolicy(8), false);
      EXPECT_EQ(state->bytes(), model->kv_bytes_at(t)) << s.cache_key() << " " << compute_dtype_name(dtype);
    }
}

TEST_F(SchemeOnModel, DelayedStartIsExactBeforeAndConvertsAtTheBoundary) {
  const auto ids = prompt(30);
  const int64_t start = 10;
  auto exact = load(KvScheme::bf16());
  auto delayed = load(KvScheme::affine_uniform(4, 32, start));
  auto quantized = load(KvScheme::affine_uniform(4, 32, 0));
  auto a = exact->new_state(30), b = delayed->new_state(30), c = quantized->new_state(30);
  // Chunks of 7: [0,7) bf16, [7,14) crosses the start but is still read exactly, then converts.
  for (int64_t begin = 0; begin < 30; begin += 7) {
    const std::vector<int32_t> chunk(ids.begin() + begin, ids.begin() + std::min<int64_t>(30, begin + 7));
    Tensor la = exact->forward(chunk, *a, true), lb = delayed->forward(chunk, *b, true);
    Tensor lc = quantized->forward(chunk, *c, true);
    const bool before_conversion = begin < 14;
    const bool same = std::memcmp(la.raw(), lb.raw(), la.nbytes()) == 0;
    EXPECT_EQ(same, before_conversion) << "chunk at " << begin;
    if (begin == 0) {
      EXPECT_NE(std::memcmp(la.raw(), lc.raw(), la.nbytes()), 0) << "start 0 quantizes at once";
    }
    // Blocks are taken as rows arrive: plain ones until the conversion, coded from then on.
    const int64_t held = std::min<int64_t>(30, begin + 7);
    EXPECT_EQ(b->bytes(), delayed->kv_bytes_at(held)) << "after " << held << " tokens";
  }
}


// The schemes on the hybrid families: sliding layers drop coded rows, shared
// layers own none, recurrent layers keep their f32 state; bytes stay exact and
// an 8-bit cache stays close to the plain one.
TEST(SchemesOnHybridModels, BytesExactAndKv8Close) {
  for (const char* fixture : {"gemma3_sliding", "gemma4_ple_shared_kv", "qwen3_next_moe"}) {
    const std::string dir = std::string(FATHOM_FIXTURES_DIR) + "/parity/" + fixture;
    auto rng = testing::fresh_rng();
    std::vector<int32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back(int32_t(3 + rng() % 500));
    Tensor plain_logits;
    for (const KvScheme& s : {KvScheme::bf16(), KvScheme::affine_uniform(8, 32, 0), KvScheme::affine_uniform(4, 32, 12),
                              KvScheme::turbo(4, 4)}) {
      LoadOptions o;
      o.kv_scheme = s;
      o.sliding_step = 5;
      auto model = load_model(dir, o);
      auto state = model->new_state(int64_t(ids.size()));
      Tensor logits = prefill(*model, *state, ids, FixedPrefillPolicy(7), true);
      EXPECT_EQ(state->bytes(), model->kv_bytes_at(int64_t(ids.size()))) << fixture << " " << s.cache_key();
      if (s.kind() == KvScheme::Kind::bf16) plain_logits = logits;
      // The median position: on the MoE fixture a random prompt now and then
      // flips a near-tied expert route at a few positions, which moves those
      // rows far more than 8-bit rounding does (the whole-tensor error then
      // exceeded 0.1 about once in 40 runs).
      if (s.cache_key() == "kv8-g32") {
        const int64_t vocab = model->config().vocab_size;
        std::vector<double> rows;
        for (int64_t r = 0; r < int64_t(ids.size()); ++r)
          rows.push_back(testing::relative_error(logits.data<float>() + r * vocab,
                                                 plain_logits.data<float>() + r * vocab, vocab));
        std::sort(rows.begin(), rows.end());
        EXPECT_LE(rows[rows.size() / 2], 2e-2) << fixture;
      }
    }
  }
}

TEST(SchemesOnHybridModels, PerLayerHeadDimsAreChecked) {
  // gemma4_moe_k_eq_v: sliding head_dim 24, global 48: neither groups of 32
  // nor TurboQuant's power-of-two rotation fit.
  const std::string dir = std::string(FATHOM_FIXTURES_DIR) + "/parity/gemma4_moe_k_eq_v";
  for (const KvScheme& s : {KvScheme::affine_uniform(8, 32, 0), KvScheme::turbo(4, 4)}) {
    LoadOptions o;
    o.kv_scheme = s;
    EXPECT_THROW(load_model(dir, o), Error) << s.cache_key();
  }
  LoadOptions o;
  o.kv_scheme = KvScheme::affine_uniform(8, 64, 0);  // 24 % 64 != 0 either
  EXPECT_THROW(load_model(dir, o), Error);
}

}  // namespace
}  // namespace fathom
