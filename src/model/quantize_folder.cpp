#include "model/quantize_folder.h"

#include <filesystem>
#include <fstream>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "backend/affine_weights.h"
#include "core/error.h"
#include "io/model_config.h"
#include "io/quantization_config.h"
#include "io/safetensors.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// mlx-lm's mixed recipes: (low bits, high bits).
std::pair<int, int> recipe_bits(const std::string& recipe) {
  static const std::map<std::string, std::pair<int, int>> recipes = {
      {"mixed_2_6", {2, 6}}, {"mixed_3_4", {3, 4}}, {"mixed_3_5", {3, 5}}, {"mixed_3_6", {3, 6}},
      {"mixed_3_8", {3, 8}}, {"mixed_4_6", {4, 6}}, {"mixed_4_8", {4, 8}}};
  const auto it = recipes.find(recipe);
  if (it != recipes.end()) return it->second;
  std::string names;
  for (const auto& [name, _] : recipes) names += (names.empty() ? "" : ", ") + name;
  fail("quantize: --mixed ", recipe, " is not a recipe (", names, ")");
}

// The layer index in a module path ("model.layers.7.mlp.down_proj" → 7), or 0.
int64_t layer_of(const std::string& module) {
  static const std::regex layer(R"(\.layers\.(\d+)\.)");
  std::smatch m;
  return std::regex_search(module, m, layer) ? std::stoll(m[1].str()) : 0;
}

// How one module is quantized, or nullopt to keep it as stored.
std::optional<QuantParams> params_for(const std::string& module, int64_t cols, const QuantizeOptions& o,
                                      int64_t layers) {
  QuantParams p{o.bits, o.group_size};
  if (!o.mixed.empty()) {
    const auto [low, high] = recipe_bits(o.mixed);
    const int64_t i = layer_of(module);
    const bool more_bits = i < layers / 8 || i >= 7 * layers / 8 || (i - layers / 8) % 3 == 2;
    const bool head = module.find("lm_head") != std::string::npos || module.find("embed_tokens") != std::string::npos;
    const bool sensitive = module.find("v_proj") != std::string::npos || module.find("down_proj") != std::string::npos;
    p = {head || (more_bits && sensitive) ? high : low, 64};
  }
  if (cols % p.group_size != 0) return std::nullopt;
  return p;
}

// MoE experts stored one folder per expert (…mlp.experts.E.gate_proj.weight)
// become MLX's switch layer (…mlp.switch_mlp.gate_proj.weight [E, out, in]).
struct SwitchStack {
  std::string name;                      // the stacked tensor's name
  std::map<int64_t, std::string> parts;  // expert → its stored tensor
};

std::map<std::string, SwitchStack> expert_stacks(const std::vector<std::string>& names) {
  static const std::regex expert(R"((.*)\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight)");
  std::map<std::string, SwitchStack> stacks;
  for (const auto& name : names) {
    std::smatch m;
    if (!std::regex_match(name, m, expert)) continue;
    const std::string stacked = m[1].str() + ".switch_mlp." + m[3].str() + ".weight";
    stacks[stacked].name = stacked;
    stacks[stacked].parts[std::stoll(m[2].str())] = name;
  }
  return stacks;
}

// The experts of one stack as one [E, out, in] tensor in their stored dtype.
Tensor stack_experts(const WeightStore& store, const SwitchStack& s) {
  const Tensor first = store.get(s.parts.begin()->second);
  check(first.rank() == 2, "quantize: expert weight ", s.parts.begin()->second, " is not a matrix");
  const int64_t e = int64_t(s.parts.size());
  check(s.parts.rbegin()->first == e - 1, "quantize: experts of ", s.name, " are not numbered 0..", e - 1);
  Tensor out = Tensor::empty({e, first.dim(0), first.dim(1)}, first.dtype());
  for (const auto& [i, name] : s.parts) {
    const Tensor t = store.get(name);
    check(t.shape() == first.shape() && t.dtype() == first.dtype(), "quantize: expert weight ", name, " is ",
          dtype_name(t.dtype()), " ", t.shape_string(), ", unlike ", s.parts.begin()->second);
    std::memcpy(static_cast<char*>(out.raw()) + size_t(i) * t.nbytes(), t.raw(), t.nbytes());
  }
  return out;
}

// One tensor of the written folder's source: a stored tensor or a stack of
// experts, kept as it is or quantized into codes, scales and biases.
struct Source {
  std::string name;
  const SwitchStack* stack = nullptr;  // the experts stacked into it, or null
  std::optional<QuantParams> params;   // nullopt: kept as stored
  std::vector<SafetensorsWriter::Entry> outputs;
};

// Reads (or stacks) a source, quantizes it if asked, and writes its outputs.
void write_source(SafetensorsWriter& writer, const WeightStore& store, const Source& src) {
  const Tensor t = src.stack ? stack_experts(store, *src.stack) : store.get(src.name);
  if (!src.params) return writer.write(t);
  const int64_t cols = t.dim(-1), rows = t.numel() / cols;
  const Tensor affine = quantize_affine(t.reshape({rows, cols}), src.params->bits, src.params->group_size, t.dtype());
  const AffineQuant& aq = affine.affine_quant();
  writer.write(Tensor::borrow(affine.raw(), src.outputs[0].shape, DType::u32, std::make_shared<Tensor>(affine)));
  writer.write(aq.scales.reshape(src.outputs[1].shape));
  writer.write(aq.biases.reshape(src.outputs[2].shape));
}

}  // namespace

QuantizeReport quantize_folder(const std::string& in, const std::string& out, const QuantizeOptions& o) {
  check(o.bits == 2 || o.bits == 3 || o.bits == 4 || o.bits == 5 || o.bits == 6 || o.bits == 8, "quantize: --bits ",
        o.bits, " is not supported (2, 3, 4, 5, 6 or 8)");
  check(o.group_size == 32 || o.group_size == 64 || o.group_size == 128, "quantize: --group-size ", o.group_size,
        " is not supported (32, 64 or 128)");
  if (!o.mixed.empty()) recipe_bits(o.mixed);
  check(o.max_shard_bytes > 0, "quantize: the largest shard must be positive, got ", o.max_shard_bytes, " bytes");
  std::error_code ec;
  check(fs::is_directory(in, ec), "quantize: model folder not found: ", in);
  check(!fs::exists(out, ec) || !fs::equivalent(in, out, ec), "quantize: --out must not be the input folder");
  json config;
  {
    std::ifstream f(fs::path(in) / "config.json");
    check(bool(f), "quantize: cannot read ", (fs::path(in) / "config.json").string());
    config = json::parse(f, nullptr, /*allow_exceptions=*/false);
    check(config.is_object(), "quantize: ", (fs::path(in) / "config.json").string(), " is not a JSON object");
  }
  const ModelConfig model = parse_model_config(config);
  check(!model.quantization, "quantize: ", in, " is already quantized (config.json has a quantization block)");

  const WeightStore store = WeightStore::open_folder(in);
  std::vector<std::string> names = store.names();
  const auto stacks = expert_stacks(names);
  std::map<std::string, bool> stacked_part;
  for (const auto& [_, s] : stacks)
    for (const auto& [__, part] : s.parts) stacked_part[part] = true;

  QuantizationConfig q;
  q.defaults = {o.mixed.empty() ? o.bits : recipe_bits(o.mixed).first, o.mixed.empty() ? o.group_size : 64};
  QuantizeReport report;
  // The plan first (from the headers: names, dtypes, shapes), then each shard
  // written a source tensor at a time, so that memory holds one tensor (or one
  // stack of experts) and its codes, never the model.
  std::vector<Source> sources;
  auto plan = [&](const std::string& name, DType dtype, std::vector<int64_t> shape, const SwitchStack* stack) {
    Source& src = sources.emplace_back();
    src.name = name;
    src.stack = stack;
    // Linear and Embedding weights (matrices) and switch layers (stacks of them).
    const bool quantizable = ends_with(name, ".weight") && (shape.size() == 2 || stack);
    const std::string module = quantizable ? name.substr(0, name.size() - 7) : name;
    src.params = quantizable ? params_for(module, shape.back(), o, model.num_layers) : std::nullopt;
    const SafetensorsWriter::Entry stored{name, dtype, shape};
    report.bytes_in += int64_t(stored.nbytes());
    if (!src.params) {
      if (quantizable) ++report.kept_modules;
      src.outputs = {stored};
    } else {
      check(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16, "quantize: ", name, " is ",
            dtype_name(dtype), ", not a float weight");
      std::vector<int64_t> codes = shape, groups = shape;
      codes.back() = shape.back() * src.params->bits / 32;
      groups.back() = shape.back() / src.params->group_size;
      src.outputs = {{name, DType::u32, codes}, {module + ".scales", dtype, groups}, {module + ".biases", dtype, groups}};
      ++report.quantized_modules;
      if (!o.mixed.empty() || *src.params != q.defaults) q.modules[module] = *src.params;
    }
    for (const auto& e : src.outputs) report.bytes_out += int64_t(e.nbytes());
  };
  for (const auto& name : names) {
    if (stacked_part.count(name)) continue;
    const StoredTensor& info = store.info(name);
    plan(name, parse_safetensors_dtype(info.dtype), info.shape, nullptr);
  }
  for (const auto& [name, s] : stacks) {
    const StoredTensor& first = store.info(s.parts.begin()->second);
    check(first.shape.size() == 2, "quantize: expert weight ", s.parts.begin()->second, " is not a matrix");
    plan(name, parse_safetensors_dtype(first.dtype), {int64_t(s.parts.size()), first.shape[0], first.shape[1]}, &s);
  }

  // Shards of at most max_shard_bytes (a source's tensors stay together; one
  // larger than that has a shard of its own).
  std::vector<std::vector<const Source*>> shards;
  size_t shard_bytes = 0;
  for (const Source& src : sources) {
    size_t bytes = 0;
    for (const auto& e : src.outputs) bytes += e.nbytes();
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + bytes > size_t(o.max_shard_bytes))) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&src);
    shard_bytes += bytes;
  }

  fs::create_directories(out, ec);
  check(!ec, "quantize: cannot create ", out, ": ", ec.message());
  // Every other file of the folder (tokenizer, chat template, generation config) as it is.
  for (const auto& entry : fs::directory_iterator(in)) {
    const std::string file = entry.path().filename().string();
    if (!entry.is_regular_file() || file == "config.json" || file.find(".safetensors") != std::string::npos) continue;
    fs::copy_file(entry.path(), fs::path(out) / file, fs::copy_options::overwrite_existing, ec);
    check(!ec, "quantize: cannot copy ", entry.path().string(), ": ", ec.message());
  }
  // Weights an earlier run left in OUT would mix with these.
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("model", 0) == 0 && file.find(".safetensors") != std::string::npos) fs::remove(entry.path(), ec);
  }
  json weight_map = json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    const std::string name = shards.size() == 1 ? "model.safetensors" : file;
    std::vector<SafetensorsWriter::Entry> entries;
    for (const Source* src : shards[i])
      for (const auto& e : src->outputs) {
        entries.push_back(e);
        weight_map[e.name] = name;
      }
    SafetensorsWriter writer((fs::path(out) / name).string(), std::move(entries));
    for (const Source* src : shards[i]) write_source(writer, store, *src);
    writer.finish();
  }
  if (shards.size() > 1) {
    std::ofstream f(fs::path(out) / "model.safetensors.index.json");
    f << json{{"metadata", {{"total_size", report.bytes_out}}}, {"weight_map", weight_map}}.dump(2) << "\n";
    check(bool(f), "quantize: cannot write ", (fs::path(out) / "model.safetensors.index.json").string());
  }
  config["quantization"] = q.to_json();
  config["quantization_config"] = q.to_json();
  std::ofstream f(fs::path(out) / "config.json");
  f << config.dump(2) << "\n";
  check(bool(f), "quantize: cannot write ", (fs::path(out) / "config.json").string());
  return report;
}

}  // namespace fathom
