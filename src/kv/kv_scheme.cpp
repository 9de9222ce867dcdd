#include "kv/kv_scheme.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/json_file.h"

namespace fathom {
namespace {

bool valid_affine_bits(int bits) { return bits == 2 || bits == 3 || bits == 4 || bits == 6 || bits == 8; }
bool valid_group(int g) { return g == 32 || g == 64 || g == 128; }
bool valid_turbo_bits(int bits) { return bits == 2 || bits == 3 || bits == 4; }

int64_t parse_start(const std::string& text) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  check(used == text.size() && !text.empty() && v >= 0, "--quantized-kv-start must be a non-negative integer, got \"",
        text, "\"");
  return v;
}

}  // namespace

std::string LayerCodec::label() const {
  switch (kind) {
    case Kind::plain: return "bf16";
    case Kind::affine:
      return "kv" + std::to_string(bits) + (group_size != 64 ? "-g" + std::to_string(group_size) : "");
    case Kind::turbo: return "turbo-k" + std::to_string(k_bits) + "v" + std::to_string(v_bits);
  }
  return "?";
}

KvFormat LayerCodec::format(int64_t kv_heads, int64_t head_dim, DType plain_dtype, int64_t block_bytes) const {
  KvFormat f;
  f.kv_heads = kv_heads;
  f.head_dim = head_dim;
  f.dtype = plain_dtype;
  switch (kind) {
    case Kind::plain: break;
    case Kind::affine:
      f.codec = KvFormat::Codec::affine;
      f.k_bits = f.v_bits = bits;
      f.group_size = group_size;
      break;
    case Kind::turbo:
      f.codec = KvFormat::Codec::codebook;
      f.k_bits = k_bits;
      f.v_bits = v_bits;
      break;
  }
  return f.fitted_to(block_bytes);
}

KvScheme KvScheme::bf16() { return KvScheme(); }

KvScheme KvScheme::affine_uniform(int bits, int group_size, std::optional<int64_t> start) {
  check(valid_affine_bits(bits), "--kv-quant: unsupported bits ", bits, " (2, 3, 4, 6, 8)");
  check(valid_group(group_size), "--kv-group-size must be 32, 64 or 128, got ", group_size);
  KvScheme s;
  s.kind_ = Kind::affine_uniform;
  s.bits_ = bits;
  s.group_size_ = group_size;
  s.start_ = start.value_or(5000);
  return s;
}

KvScheme KvScheme::affine_config(std::vector<KvConfigEntry> entries, std::optional<int64_t> start) {
  for (const auto& e : entries) {
    check(valid_affine_bits(e.bits), "kv_config.json: layer ", e.layer_idx, " has unsupported bits ", e.bits);
    check(valid_group(e.group_size), "kv_config.json: layer ", e.layer_idx, " has unsupported group_size ",
          e.group_size);
  }
  KvScheme s;
  s.kind_ = Kind::affine_config;
  s.entries_ = std::move(entries);
  s.start_ = start.value_or(0);
  return s;
}

KvScheme KvScheme::turbo(int k_bits, int v_bits, std::optional<int64_t> start) {
  check(valid_turbo_bits(k_bits) && valid_turbo_bits(v_bits), "--turbo-kv: bits must be 2, 3 or 4, got K=", k_bits,
        " V=", v_bits);
  KvScheme s;
  s.kind_ = Kind::turbo;
  s.k_bits_ = k_bits;
  s.v_bits_ = v_bits;
  s.start_ = start.value_or(0);
  return s;
}

std::vector<KvConfigEntry> KvScheme::load_kv_config(const std::string& model_dir) {
  const auto path = std::filesystem::path(model_dir) / "kv_config.json";
  check(std::filesystem::exists(path), "--kv-quant config: no kv_config.json in ", model_dir);
  const nlohmann::json j = parse_json_bounded(read_file_capped(path), path.string());
  // Either a list of entries or {"layers": [...]}.
  const nlohmann::json& list = j.is_object() && j.contains("layers") ? j["layers"] : j;
  check(list.is_array(), path.string(), ": expected a list of {layer_idx, bits, group_size}");
  std::vector<KvConfigEntry> entries;
  for (const auto& e : list) {
    check(e.is_object() && e.contains("layer_idx") && e["layer_idx"].is_number_integer() && e.contains("bits") &&
              e["bits"].is_number_integer(),
          path.string(), ": entry ", e.dump(), " needs integer layer_idx and bits");
    KvConfigEntry entry;
    entry.layer_idx = e["layer_idx"].get<int64_t>();
    entry.bits = e["bits"].get<int>();
    entry.group_size = e.value("group_size", 64);
    for (const auto& seen : entries)
      check(seen.layer_idx != entry.layer_idx, path.string(), ": layer ", entry.layer_idx, " is listed twice");
    entries.push_back(entry);
  }
  return entries;
}

KvScheme KvScheme::from_flags(const std::string& kv_quant, std::optional<int> group_size,
                              const std::string& quantized_kv_start, const std::string& turbo_kv,
                              const std::string& model_dir) {
  std::optional<int64_t> start;
  if (!quantized_kv_start.empty()) start = parse_start(quantized_kv_start);
  const bool affine = !kv_quant.empty() && kv_quant != "off";
  if (!turbo_kv.empty()) {
    check(!affine, "--turbo-kv and --kv-quant ", kv_quant, " cannot be combined");
    check(!group_size, "--kv-group-size applies to --kv-quant, not --turbo-kv");
    const size_t comma = turbo_kv.find(',');
    check(comma != std::string::npos, "--turbo-kv expects K,V bits such as 3,4, got \"", turbo_kv, "\"");
    int k = 0, v = 0;
    try {
      size_t a = 0, b = 0;
      k = std::stoi(turbo_kv.substr(0, comma), &a);
      v = std::stoi(turbo_kv.substr(comma + 1), &b);
      check(a == comma && b == turbo_kv.size() - comma - 1, "");
    } catch (const std::exception&) {
      fail("--turbo-kv expects K,V bits such as 3,4, got \"", turbo_kv, "\"");
    }
    return turbo(k, v, start);
  }
  if (!affine) {
    check(!group_size, "--kv-group-size needs --kv-quant");
    check(!start, "--quantized-kv-start needs --kv-quant or --turbo-kv");
    return bf16();
  }
  if (kv_quant == "config") {
    check(!group_size, "--kv-group-size does not apply to --kv-quant config (kv_config.json sets each layer's)");
    return affine_config(load_kv_config(model_dir), start);
  }
  int bits = 0;
  try {
    size_t used = 0;
    bits = std::stoi(kv_quant, &used);
    check(used == kv_quant.size(), "");
  } catch (const std::exception&) {
    fail("--kv-quant must be off, 2, 3, 4, 6, 8 or config, got \"", kv_quant, "\"");
  }
  return affine_uniform(bits, group_size.value_or(64), start);
}

KvScheme KvScheme::from_cache_key(const std::string& key, const std::string& model_dir) {
  if (key == "bf16") return bf16();
  std::string rest = key;
  int64_t start = 0;
  if (const size_t at = rest.find("-start"); at != std::string::npos) {
    start = parse_start(rest.substr(at + 6));
    rest = rest.substr(0, at);
  }
  int a = 0, b = 0;
  char tail = 0;
  if (rest == "config") return affine_config(load_kv_config(model_dir), start);
  if (std::sscanf(rest.c_str(), "turbo-k%dv%d%c", &a, &b, &tail) == 2) return turbo(a, b, start);
  if (std::sscanf(rest.c_str(), "kv%d-g%d%c", &a, &b, &tail) == 2) return affine_uniform(a, b, start);
  if (std::sscanf(rest.c_str(), "kv%d%c", &a, &tail) == 1) return affine_uniform(a, 64, start);
  fail("unknown KV scheme \"", key, "\" (examples: bf16, kv4, kv4-g32, kv8-start512, turbo-k3v4, config)");
}

std::string KvScheme::cache_key() const {
  std::string key;
  switch (kind_) {
    case Kind::bf16: return "bf16";
    case Kind::affine_uniform:
      key = "kv" + std::to_string(bits_) + (group_size_ != 64 ? "-g" + std::to_string(group_size_) : "");
      break;
    case Kind::affine_config: key = "config"; break;
    case Kind::turbo: key = "turbo-k" + std::to_string(k_bits_) + "v" + std::to_string(v_bits_); break;
  }
  if (start_ > 0) key += "-start" + std::to_string(start_);
  return key;
}

void KvScheme::validate_for(const ModelConfig& config) const {
  for (const auto& e : entries_) {
    check(e.layer_idx >= 0 && e.layer_idx < config.num_layers, "kv_config.json: layer_idx ", e.layer_idx,
          " is out of range [0, ", config.num_layers, ")");
    check(config.layer_types[e.layer_idx] != LayerKind::linear_attention, "kv_config.json: layer ", e.layer_idx,
          " is a recurrent (linear attention) layer and has no KV cache");
  }
  for (int64_t i = 0; i < config.num_layers; ++i) {
    if (!config.owns_kv(i)) continue;
    const LayerCodec c = codec_for_layer(config, i);
    const int64_t head_dim = config.head_dim_of(i);
    if (c.kind == LayerCodec::Kind::affine)
      check(head_dim % c.group_size == 0 && (head_dim * c.bits) % 32 == 0, "kv scheme ", cache_key(), ": layer ", i,
            "'s head_dim ", head_dim, " is not a multiple of the group size ", c.group_size);
    if (c.kind == LayerCodec::Kind::turbo)
      check((head_dim & (head_dim - 1)) == 0 && head_dim * 2 % 32 == 0, "kv scheme ", cache_key(),
            ": TurboQuant needs a power-of-two head_dim, layer ", i, " has ", head_dim);
  }
}

LayerCodec KvScheme::codec_for_layer(const ModelConfig& config, int64_t layer) const {
  check(layer >= 0 && layer < config.num_layers, "kv scheme: layer ", layer, " out of range");
  LayerCodec c;
  const LayerKind type = config.layer_types[layer];
  if (type == LayerKind::linear_attention) return c;
  switch (kind_) {
    case Kind::bf16: break;
    case Kind::affine_uniform:
      c.kind = LayerCodec::Kind::affine;
      c.bits = bits_;
      c.group_size = group_size_;
      break;
    case Kind::affine_config:
      for (const auto& e : entries_)
        if (e.layer_idx == layer) {
          c.kind = LayerCodec::Kind::affine;
          c.bits = e.bits;
          c.group_size = e.group_size;
        }
      break;
    case Kind::turbo:
      // Only global layers: sliding windows are short and stay exact.
      if (type == LayerKind::full_attention) {
        c.kind = LayerCodec::Kind::turbo;
        c.k_bits = k_bits_;
        c.v_bits = v_bits_;
      }
      break;
  }
  return c;
}

nlohmann::json KvScheme::describe(const ModelConfig& config) const {
  validate_for(config);
  static const char* kModes[] = {"bf16", "affine-uniform", "affine-config", "turbo"};
  nlohmann::json codecs = nlohmann::json::object();
  int64_t global = 0, sliding = 0, recurrent = 0, shared = 0;
  for (int64_t i = 0; i < config.num_layers; ++i) {
    switch (config.layer_types[i]) {
      case LayerKind::linear_attention: ++recurrent; continue;
      case LayerKind::sliding_attention: ++sliding; break;
      case LayerKind::full_attention: ++global; break;
    }
    if (!config.owns_kv(i)) {  // reads an earlier layer's cache: no codec, no bytes
      ++shared;
      continue;
    }
    const std::string label = codec_for_layer(config, i).label();
    codecs[label] = codecs.value(label, 0) + 1;
  }
  return {{"cache_key", cache_key()},
          {"mode", kModes[int(kind_)]},
          {"quantized_kv_start", start_},
          {"codecs", codecs},
          {"attention_layers", {{"global", global}, {"sliding", sliding}, {"kv_shared", shared}}},
          {"sliding_window", config.sliding_window ? nlohmann::json(*config.sliding_window) : nlohmann::json()},
          {"recurrent_layers", recurrent},
          {"recurrent_state_bytes_per_layer",
           config.linear_attention ? config.linear_attention->state_bytes() : int64_t(0)}};
}

int64_t KvScheme::bytes_at(const ModelConfig& config, int64_t tokens, int64_t plain_bytes, int64_t sliding_step) const {
  check(tokens >= 0, "kv bytes: token count must be >= 0, got ", tokens);
  const bool quantized = tokens > 0 && tokens >= start_;
  int64_t total = 0;
  for (int64_t i = 0; i < config.num_layers; ++i) {
    if (config.layer_types[i] == LayerKind::linear_attention) {
      total += config.linear_attention->state_bytes();  // fixed size, f32, no codec
      continue;
    }
    if (!config.owns_kv(i) || tokens == 0) continue;
    const LayerCodec codec = quantized ? codec_for_layer(config, i) : LayerCodec{};
    const DType plain = plain_bytes == 4 ? DType::f32 : DType::bf16;
    const int64_t block_bytes = kv_block_bytes(config, plain);
    const KvFormat f = codec.format(config.kv_heads_of(i), config.head_dim_of(i), plain, block_bytes);
    const int64_t max_blocks = kv_max_blocks(f.block_rows, tokens, config.window_of(i), sliding_step);
    total += kv_blocks_at(tokens, f.block_rows, max_blocks) * block_bytes;
  }
  return total;
}

}  // namespace fathom
