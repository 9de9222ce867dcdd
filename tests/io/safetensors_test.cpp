#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "test_util.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;
using testing::fresh_rng;
using testing::random_tensor;

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("fathom_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TEST(Safetensors, RoundTripKeepsBytesAndShapes) {
  auto rng = fresh_rng();
  const fs::path dir = temp_dir("roundtrip");
  Tensor a = random_tensor({3, 5}, DType::f32, rng), b = random_tensor({7}, DType::bf16, rng);
  write_safetensors((dir / "model.safetensors").string(), {{"a", a}, {"b", b}});
  WeightStore store = WeightStore::open_folder(dir.string());
  EXPECT_EQ(store.names().size(), 2u);
  Tensor ra = store.get("a"), rb = store.get("b");
  EXPECT_EQ(ra.shape(), a.shape());
  EXPECT_EQ(rb.dtype(), DType::bf16);
  EXPECT_EQ(0, std::memcmp(ra.raw(), a.raw(), a.nbytes()));
  EXPECT_EQ(0, std::memcmp(rb.raw(), b.raw(), b.nbytes()));
  EXPECT_EQ(store.total_bytes(), int64_t(a.nbytes() + b.nbytes()));
  EXPECT_THROW(store.get("missing"), Error);
}

TEST(Safetensors, InRamCopyHoldsTheSameBytesOutsideTheFile) {
  auto rng = fresh_rng();
  const fs::path dir = temp_dir("in_ram");
  // Large enough to span several copy chunks and end mid-page.
  Tensor a = random_tensor({3, 5}, DType::f32, rng), big = random_tensor({17 << 20 | 7}, DType::bf16, rng);
  write_safetensors((dir / "model.safetensors").string(), {{"a", a}, {"big", big}});
  WeightStore store = WeightStore::open_folder(dir.string(), WeightResidence::ram);
  EXPECT_EQ(store.residence(), WeightResidence::ram);
  // The copy must not depend on the file any more.
  fs::remove_all(dir);
  Tensor ra = store.get("a"), rbig = store.get("big");
  EXPECT_EQ(rbig.shape(), big.shape());
  EXPECT_EQ(0, std::memcmp(ra.raw(), a.raw(), a.nbytes()));
  EXPECT_EQ(0, std::memcmp(rbig.raw(), big.raw(), big.nbytes()));
  EXPECT_EQ(store.total_bytes(), int64_t(a.nbytes() + big.nbytes()));
}

TEST(Safetensors, ShardedIndexResolvesEveryTensor) {
  auto rng = fresh_rng();
  const fs::path dir = temp_dir("sharded");
  Tensor a = random_tensor({4, 4}, DType::f32, rng), b = random_tensor({2}, DType::f32, rng);
  write_safetensors((dir / "s1.safetensors").string(), {{"a", a}});
  write_safetensors((dir / "s2.safetensors").string(), {{"b", b}});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})";
  WeightStore store = WeightStore::open_folder(dir.string());
  EXPECT_EQ(store.get("b").data<float>()[1], b.data<float>()[1]);
}

TEST(Safetensors, TruncatedAndMalformedFilesAreClearErrors) {
  auto rng = fresh_rng();
  const fs::path dir = temp_dir("bad");
  const fs::path good = dir / "good.safetensors";
  write_safetensors(good.string(), {{"a", random_tensor({64, 64}, DType::f32, rng)}});
  const auto size = fs::file_size(good);
  fs::copy_file(good, dir / "cut.safetensors");
  fs::resize_file(dir / "cut.safetensors", size - 100);
  try {
    WeightStore::open_file((dir / "cut.safetensors").string());
    FAIL() << "truncated file accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "junk.safetensors") << "\x10\x00\x00\x00\x00\x00\x00\x00not json at all!";
  EXPECT_THROW(WeightStore::open_file((dir / "junk.safetensors").string()), Error);
  std::ofstream(dir / "tiny.safetensors") << "abc";
  EXPECT_THROW(WeightStore::open_file((dir / "tiny.safetensors").string()), Error);
  EXPECT_THROW(WeightStore::open_folder((dir / "nope").string()), Error);
  EXPECT_THROW(WeightStore::open_folder(dir.string()), Error);  // no model.safetensors
}

}  // namespace
}  // namespace fathom
