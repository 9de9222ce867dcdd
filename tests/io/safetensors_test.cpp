#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/model.h"
#include "model/weights.h"
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

// A safetensors file from a raw header text and `data_bytes` zero bytes of data.
std::string safetensors_bytes(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(out.data(), &len, 8);
  out += header;
  out.append(data_bytes, '\0');
  return out;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// Runs f, which must throw fathom::Error whose message holds every one of `parts`.
void expect_error_naming(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << parts.front();
  } catch (const Error& e) {
    for (const auto& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "\"" << part << "\" not in: " << e.what();
  }
}

TEST(SafetensorsHostile, WrappingDataOffsetsAreRejected) {
  // begin near 2^64: begin + header start wraps to a small offset, and the old
  // bounds check (offset + nbytes <= size) passed; a later read went anywhere.
  const uint64_t begin = ~uint64_t(0) - 63;
  const std::string header = R"({"emb":{"dtype":"F32","shape":[4],"data_offsets":[)" + std::to_string(begin) + "," +
                             std::to_string(begin + 16) + "]}}";
  const std::string bytes = safetensors_bytes(header, 64);
  expect_error_naming([&] { parse_safetensors_header(bytes, bytes.size(), "mem"); }, {"emb", "data_offsets"});
  const fs::path dir = temp_dir("wrap");
  write_bytes(dir / "model.safetensors", bytes);
  expect_error_naming([&] { WeightStore::open_folder(dir.string()); }, {"model.safetensors", "emb", "data_offsets"});
}

TEST(SafetensorsHostile, EveryMalformedFieldIsANamedError) {
  struct Case {
    std::string entry, field;
  };
  const std::vector<Case> cases = {
      {R"("not an object")", "entry"},
      {R"({"shape":[1],"data_offsets":[0,4]})", "dtype"},
      {R"({"dtype":5,"shape":[1],"data_offsets":[0,4]})", "dtype"},
      {R"({"dtype":"Q4_K","shape":[1],"data_offsets":[0,4]})", "dtype"},
      {R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})", "shape"},
      {R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})", "shape"},
      {R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})", "shape"},
      {R"({"dtype":"F32","shape":[true],"data_offsets":[0,4]})", "shape"},
      {R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]})", "shape"},
      {R"({"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]})", "shape"},
      {R"({"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]})", "shape"},
      {R"({"dtype":"F32","shape":[1],"data_offsets":[0]})", "data_offsets"},
      {R"({"dtype":"F32","shape":[1],"data_offsets":{"a":0}})", "data_offsets"},
      {R"({"dtype":"F32","shape":[1],"data_offsets":["0",4]})", "data_offsets"},
      {R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})", "data_offsets"},
      {R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})", "data_offsets"},
      {R"({"dtype":"F32","shape":[1],"data_offsets":[0,400]})", "data_offsets"},  // past the data
      {R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})", "data_offsets"},    // 4 bytes for 8
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.entry);
    const std::string bytes = safetensors_bytes(R"({"__metadata__":{"format":"pt"},"w.0":)" + c.entry + "}", 16);
    expect_error_naming([&] { parse_safetensors_header(bytes, bytes.size(), "mem.safetensors"); },
                        {"mem.safetensors", "w.0", c.field});
  }
  // The same entries that are well formed pass, zero-sized tensors included.
  const std::string ok = safetensors_bytes(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"BF16","shape":[0,3],"data_offsets":[8,8]}})", 8);
  const auto tensors = parse_safetensors_header(ok, ok.size(), "ok");
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors.at("a").offset, ok.size() - 8);
  EXPECT_EQ(tensors.at("a").nbytes, 8u);
  EXPECT_EQ(tensors.at("z").nbytes, 0u);
}

TEST(SafetensorsHostile, HeaderLengthAndShapeOfTheHeaderAreChecked) {
  // Length prefix past the end of the file.
  std::string bytes = safetensors_bytes("{}", 0);
  const uint64_t huge = ~uint64_t(0);
  std::memcpy(bytes.data(), &huge, 8);
  expect_error_naming([&] { parse_safetensors_header(bytes, bytes.size(), "m"); }, {"truncated"});
  // A length within a (claimed) 1 GiB file but over the header cap is refused before anything is read.
  const uint64_t big = kMaxSafetensorsHeaderBytes + 1;
  std::memcpy(bytes.data(), &big, 8);
  expect_error_naming([&] { parse_safetensors_header(bytes, uint64_t(1) << 30, "m"); }, {"larger than"});
  // A header that is not an object, or not JSON.
  for (const std::string header : {"[1,2]", "\"text\"", "{\"a\":", "nul"}) {
    const std::string b = safetensors_bytes(header, 0);
    EXPECT_THROW(parse_safetensors_header(b, b.size(), "m"), Error) << header;
  }
  // A file shorter than its length prefix.
  EXPECT_THROW(parse_safetensors_header(std::string_view("\x08\0\0\0\0\0\0\0{}", 10), 10, "m"), Error);
  EXPECT_THROW(parse_safetensors_header("abc", 3, "m"), Error);
}

TEST(SafetensorsHostile, DeeplyNestedHeaderIsAnErrorNotAStackOverflow) {
  const std::string nested(100000, '[');
  const std::string bytes = safetensors_bytes(nested + std::string(100000, ']'), 0);
  expect_error_naming([&] { parse_safetensors_header(bytes, bytes.size(), "m"); }, {"nests deeper"});
  const std::string in_metadata =
      safetensors_bytes(R"({"__metadata__":{"x":)" + nested + std::string(100000, ']') + "}}", 0);
  expect_error_naming([&] { parse_safetensors_header(in_metadata, in_metadata.size(), "m"); }, {"nests deeper"});
  // Brackets inside strings are text, not nesting.
  const std::string in_string = safetensors_bytes(R"({"__metadata__":{"x":")" + nested + R"("}})", 0);
  EXPECT_TRUE(parse_safetensors_header(in_string, in_string.size(), "m").empty());
}

TEST(SafetensorsHostile, ShardNamesMustStayInsideTheFolder) {
  auto rng = fresh_rng();
  const fs::path root = temp_dir("escape");
  const fs::path dir = root / "model";
  fs::create_directories(dir);
  // A valid shard outside the folder: the old loader opened it.
  write_safetensors((root / "outside.safetensors").string(), {{"a", random_tensor({2}, DType::f32, rng)}});
  fs::create_directories(dir / "sub");
  write_safetensors((dir / "sub" / "inner.safetensors").string(), {{"a", random_tensor({2}, DType::f32, rng)}});
  const std::string outside = (root / "outside.safetensors").string();
  for (const std::string& shard : {std::string("../outside.safetensors"), outside, std::string("sub/inner.safetensors"),
                                  std::string(""), std::string(".."), std::string("sub\\inner.safetensors")}) {
    SCOPED_TRACE(shard);
    std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"weight_map", {{"a", shard}}}}.dump();
    expect_error_naming([&] { WeightStore::open_folder(dir.string()); }, {"\"a\"", "plain file name"});
  }
  EXPECT_TRUE(is_plain_shard_name("model-00001-of-00002.safetensors"));
  EXPECT_FALSE(is_plain_shard_name(std::string_view("a\0b", 3)));
  EXPECT_FALSE(is_plain_shard_name("/etc/passwd"));
}

TEST(SafetensorsHostile, IndexEntriesAreCheckedAgainstTheirShards) {
  auto rng = fresh_rng();
  const fs::path dir = temp_dir("index_entries");
  write_safetensors((dir / "s1.safetensors").string(), {{"a", random_tensor({2}, DType::f32, rng)}});
  write_safetensors((dir / "s2.safetensors").string(), {{"b", random_tensor({2}, DType::f32, rng)}});
  const auto with_index = [&](const std::string& text) {
    std::ofstream(dir / "model.safetensors.index.json") << text;
    return [&] { WeightStore::open_folder(dir.string()); };
  };
  expect_error_naming(with_index(R"({"weight_map": {"a": 5}})"), {"\"a\"", "not a file name"});
  expect_error_naming(with_index(R"({"weight_map": {"a": ["s1.safetensors"]}})"), {"\"a\"", "not a file name"});
  expect_error_naming(with_index(R"({"weight_map": ["s1.safetensors"]})"), {"weight_map"});
  expect_error_naming(with_index(R"({"weight_map": {}})"), {"weight_map is empty"});
  expect_error_naming(with_index(R"([1])"), {"weight_map"});
  expect_error_naming(with_index(R"({"weight_map": {"a": "s1.safetensors", "c": "s1.safetensors"}})"),
                      {"\"c\"", "s1.safetensors", "does not hold it"});
  // Listed under the wrong shard: present in the store, but not where the index says.
  expect_error_naming(with_index(R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors", "x": "s2.safetensors"}})"),
                      {"\"b\"", "does not hold it"});
  expect_error_naming(with_index(R"({"weight_map": {"a": "missing.safetensors"}})"), {"missing.safetensors"});
  expect_error_naming(with_index(std::string(100000, '[')), {"nests deeper"});
  // The same tensor name in two shards is ambiguous.
  write_safetensors((dir / "s3.safetensors").string(), {{"a", random_tensor({2}, DType::f32, rng)}});
  expect_error_naming(with_index(R"({"weight_map": {"a": "s1.safetensors", "b": "s3.safetensors"}})"),
                      {"\"a\"", "also in"});
  with_index(R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})")();  // and the good index loads
}

TEST(SafetensorsHostile, NonRegularFilesAreRefusedWithoutBlocking) {
  const fs::path dir = temp_dir("fifo");
  ASSERT_EQ(::mkfifo((dir / "model.safetensors").c_str(), 0600), 0);
  expect_error_naming([&] { WeightStore::open_folder(dir.string()); }, {"not a regular file"});
  const fs::path dir2 = temp_dir("dir_shard");
  fs::create_directories(dir2 / "model.safetensors");
  expect_error_naming([&] { WeightStore::open_folder(dir2.string()); }, {"not a regular file"});
}

TEST(SafetensorsHostile, ShortEmbeddingTableIsALoadErrorNotAnOutOfBoundsRead) {
  auto rng = fresh_rng();
  const fs::path dir = temp_dir("short_embedding");
  // The config promises 100 tokens; the table has 99 rows, so id 99 would read past it.
  std::ofstream(dir / "config.json") << nlohmann::json{{"model_type", "llama"},      {"vocab_size", 100},
                                                       {"hidden_size", 64},          {"intermediate_size", 128},
                                                       {"num_hidden_layers", 1},     {"num_attention_heads", 4},
                                                       {"num_key_value_heads", 2}}.dump();
  write_safetensors((dir / "model.safetensors").string(),
                    {{"model.embed_tokens.weight", random_tensor({99, 64}, DType::f32, rng)}});
  expect_error_naming([&] { load_model(dir.string(), LoadOptions{}); },
                      {"model.embed_tokens.weight", "[99, 64]", "[100, 64]"});
  // The loader itself: rank, rows and columns must all match.
  WeightStore store = WeightStore::open_folder(dir.string());
  const auto backend = make_cpu_backend();
  const WeightLoader w(store, ComputeDType::f32, *backend);
  EXPECT_THROW(w.table("model.embed_tokens.weight", 100, 64), Error);
  EXPECT_THROW(w.table("model.embed_tokens.weight", 99, 32), Error);
  EXPECT_THROW(w.vector("model.embed_tokens.weight", 99 * 64), Error);
  EXPECT_EQ(w.table("model.embed_tokens.weight", 99, 64).dim(0), 99);
}

TEST(Safetensors, HeadersAloneDescribeWhatTheStoreMaps) {
  for (const char* fixture : {"qwen3_qknorm_sharded", "qwen3_untied_4layer"}) {
    const std::string dir = std::string(FATHOM_FIXTURES_DIR) + "/parity/" + fixture;
    const auto headers = read_safetensors_headers(dir);
    const WeightStore store = WeightStore::open_folder(dir);
    ASSERT_EQ(headers.size(), store.names().size()) << fixture;
    int64_t total = 0;
    for (const auto& [name, t] : headers) {
      const StoredTensor& mapped = store.info(name);
      EXPECT_EQ(t.dtype, mapped.dtype) << name;
      EXPECT_EQ(t.shape, mapped.shape) << name;
      EXPECT_EQ(t.nbytes, mapped.nbytes) << name;
      EXPECT_EQ(t.offset, mapped.offset) << name;
      EXPECT_EQ(t.file, mapped.file) << name;
      total += int64_t(t.nbytes);
    }
    EXPECT_EQ(total, store.total_bytes());
  }
  EXPECT_THROW(read_safetensors_headers("/nonexistent/model"), Error);
}

}  // namespace
}  // namespace fathom
