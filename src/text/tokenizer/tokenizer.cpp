#include "text/tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/json_file.h"
#include "text/tokenizer/added_tokens.h"
#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/model.h"
#include "text/tokenizer/decoders.h"
#include "text/tokenizer/json_util.h"
#include "text/tokenizer/normalizers.h"
#include "text/tokenizer/post_processors.h"
#include "text/tokenizer/pre_tokenizers.h"
#include "text/tokenizer/tokenizer_config.h"
#include "text/tokenizer/utf8.h"

namespace fathom {

using tok::json;

struct Tokenizer::Impl {
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::Model> model;
  tok::AddedVocabulary added;
  std::unique_ptr<tok::PostProcessor> post_processor;
  std::unique_ptr<tok::Decoder> decoder;
  std::string bos_token, eos_token;
  std::optional<int32_t> bos_id, eos_id;
  std::vector<bool> special_by_id;  // Hugging Face skips a token on decode when its string is special
  // The string each id decodes from (nullptr: none), filled once the vocabularies are
  // final: decode looks ids up here instead of asking the added tokens and the model.
  std::vector<const std::string*> string_by_id;
  int64_t vocab_size = 0;
  bool byte_level_decoder = false;  // the decoder maps GPT-2's alphabet back to bytes

  const std::string* token_string(int32_t id) const {
    return id >= 0 && size_t(id) < string_by_id.size() ? string_by_id[size_t(id)] : nullptr;
  }
  const std::string* lookup_token_string(int32_t id) const {
    if (const std::string* s = added.decode_form(id)) return s;
    return model->id_to_token(id);
  }
  std::optional<int32_t> find_id(std::string_view token) const {
    if (auto id = added.token_to_id(token)) return id;
    return model->token_to_id(token);
  }
  void tokenize_text(std::string text, bool at_input_start, std::vector<int32_t>& ids) const;
};

namespace {

bool has_byte_level_decoder(const json& decoder) {
  if (!decoder.is_object()) return false;
  const auto type = decoder.find("type");
  if (type != decoder.end() && *type == "ByteLevel") return true;
  const auto parts = decoder.find("decoders");
  if (parts == decoder.end() || !parts->is_array()) return false;
  return std::any_of(parts->begin(), parts->end(), has_byte_level_decoder);
}

// "<0x41>" → 0x41, the form of SentencePiece's byte-fallback pieces.
std::optional<uint8_t> byte_fallback_piece(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return std::nullopt;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  const int hi = hex(s[3]), lo = hex(s[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return uint8_t(hi * 16 + lo);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "tokenizer: cannot open ", path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

tok::AddedToken parse_added_token(const json& t, size_t index) {
  const std::string what = "tokenizer.json: added_tokens[" + std::to_string(index) + "]";
  tok::AddedToken a;
  a.content = tok::require_string(t, "content", what);
  a.id = tok::require_token_id(tok::require_field(t, "id", what), what + ": \"id\"");
  a.single_word = tok::bool_or(t, "single_word", false, what);
  a.lstrip = tok::bool_or(t, "lstrip", false, what);
  a.rstrip = tok::bool_or(t, "rstrip", false, what);
  a.special = tok::bool_or(t, "special", false, what);
  a.normalized = tok::bool_or(t, "normalized", true, what);  // Hugging Face's default when the field is absent
  return a;
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  const fs::path tokenizer_path = dir / "tokenizer.json";
  check(fs::exists(tokenizer_path), "tokenizer: ", tokenizer_path.string(),
        " not found (fathom reads Hugging Face tokenizer.json files)");
  const std::string tokenizer_text = read_file(tokenizer_path);
  const fs::path config_path = dir / "tokenizer_config.json";
  const std::string config_text = fs::exists(config_path) ? read_file(config_path) : std::string();
  try {
    return from_json(tokenizer_text, config_text);
  } catch (const Error& e) {
    fail(model_dir, ": ", e.what());
  }
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json) {
  try {
    return build(tokenizer_json, config_json);
  } catch (const json::exception& e) {  // a field of an unexpected JSON type that no check caught
    fail("tokenizer.json: unexpected structure: ", e.what());
  }
}

Tokenizer Tokenizer::build(std::string_view tokenizer_json, std::string_view config_json) {
  const json j = parse_json_bounded(tokenizer_json, "tokenizer.json");
  check(j.is_object(), "tokenizer.json: expected a JSON object");
  const json config_j = config_json.empty() ? json() : parse_json_bounded(config_json, "tokenizer_config.json");
  const tok::TokenizerConfig config = tok::parse_tokenizer_config(config_j);

  auto impl = std::make_shared<Impl>();
  auto field = [&](const char* key) -> const json& {
    static const json null_value;
    const auto it = j.find(key);
    return it == j.end() ? null_value : *it;
  };
  impl->normalizer = tok::make_normalizer(field("normalizer"));
  impl->pre_tokenizer = tok::make_pre_tokenizer(field("pre_tokenizer"));
  impl->model = tok::make_model(tok::require_field(j, "model", "tokenizer.json"));
  impl->decoder = tok::make_decoder(field("decoder"));
  impl->byte_level_decoder = has_byte_level_decoder(field("decoder"));
  impl->post_processor = tok::make_post_processor(field("post_processor"));
  // "truncation" and "padding" are batch settings: transformers turns both off unless a call
  // asks for them, so a prompt is never cut or padded by what the file says. Ignored here too.

  const json& added = field("added_tokens");
  check(added.is_null() || added.is_array(), "tokenizer.json: \"added_tokens\" must be an array");
  size_t index = 0;
  for (const auto& t : added) impl->added.add(parse_added_token(t, index++), impl->normalizer.get());

  // transformers marks every token the config names as special; one that is only in the
  // model vocabulary becomes an added token (so it is split out of text like the others).
  for (const std::string& name : config.named_special_tokens) {
    if (auto id = impl->added.token_to_id(name)) {
      impl->added.mark_special(*id);
    } else if (auto mid = impl->model->token_to_id(name)) {
      tok::AddedToken t;
      t.content = name;
      t.id = *mid;
      t.special = true;
      impl->added.add(t, impl->normalizer.get());
    }
    // A named token in neither vocabulary is ignored (transformers would append a new id).
  }
  impl->added.build_tries();

  if (config.bos_token) {
    impl->bos_token = *config.bos_token;
    impl->bos_id = impl->find_id(impl->bos_token);
  }
  if (config.eos_token) {
    impl->eos_token = *config.eos_token;
    impl->eos_id = impl->find_id(impl->eos_token);
  }
  // tokenizer.json's post-processor decides what add_special_tokens adds, as in Hugging
  // Face's tokenizers and transformers 5 (DeepSeek-V3's config says add_bos_token: true over
  // a ByteLevel post-processor, and neither adds a BOS). Only a file without one gets a
  // BOS/EOS template from add_bos_token/add_eos_token.
  if (!impl->post_processor) {
    std::vector<int32_t> before, after;
    if (config.add_bos_token.value_or(false) && impl->bos_id) before.push_back(*impl->bos_id);
    if (config.add_eos_token.value_or(false) && impl->eos_id) after.push_back(*impl->eos_id);
    impl->post_processor = tok::make_bos_eos_template(std::move(before), std::move(after));
  }

  int32_t max_id = impl->model->max_id();
  for (const auto& t : impl->added.tokens()) max_id = std::max(max_id, t.id);
  tok::check_id_space(max_id, size_t(impl->model->vocab_size()) + impl->added.tokens().size(),
                      "tokenizer.json added_tokens");
  impl->special_by_id.assign(size_t(max_id + 1), false);
  impl->string_by_id.assign(size_t(max_id + 1), nullptr);
  int64_t distinct = 0;
  for (int32_t id = 0; id <= max_id; ++id) {
    const std::string* s = impl->lookup_token_string(id);
    impl->string_by_id[size_t(id)] = s;
    if (!s) continue;
    ++distinct;
    impl->special_by_id[size_t(id)] = impl->added.is_special_content(*s);
  }
  impl->vocab_size = distinct;

  // The ids the post-processor adds reach the model as they are: each must name a token.
  std::vector<int32_t> added_ids;
  if (impl->post_processor) impl->post_processor->process(added_ids, /*add_special_tokens=*/true);
  for (const int32_t id : added_ids)
    check(impl->token_string(id) != nullptr, "tokenizer.json: post_processor adds id ", id,
          ", which names no token (largest id ", max_id, ")");
  return Tokenizer(std::move(impl));
}

void Tokenizer::Impl::tokenize_text(std::string text, bool at_input_start, std::vector<int32_t>& ids) const {
  std::vector<tok::PreToken> pieces;
  pieces.push_back({std::move(text), at_input_start});
  if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
  for (const auto& p : pieces) model->tokenize(p.text, ids);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& im = *impl_;
  check(text.size() <= kMaxEncodeBytes, "Tokenizer::encode: the text is ", text.size(), " bytes, more than the ",
        kMaxEncodeBytes, " a tokenizer accepts");
  if (const auto bad = tok::first_invalid_utf8(text))
    fail("Tokenizer::encode: the text is not valid UTF-8 (byte ", *bad, " of ", text.size(), ")");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const tok::Segment& seg : im.added.split(text, /*normalized_tokens=*/false)) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    if (seg.begin == seg.end) continue;
    std::string piece(text.substr(seg.begin, seg.end - seg.begin));
    if (im.normalizer) im.normalizer->normalize(piece);
    if (piece.empty()) continue;
    const bool at_start = seg.begin == 0;
    if (!im.added.has_normalized_tokens()) {
      im.tokenize_text(std::move(piece), at_start, ids);
      continue;
    }
    for (const tok::Segment& sub : im.added.split(piece, /*normalized_tokens=*/true)) {
      if (sub.id >= 0) ids.push_back(sub.id);
      else if (sub.begin != sub.end)
        im.tokenize_text(piece.substr(sub.begin, sub.end - sub.begin), at_start && sub.begin == 0, ids);
    }
  }
  if (im.post_processor) im.post_processor->process(ids, add_special_tokens);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& im = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::string* s = im.token_string(id);
    if (!s) continue;
    if (skip_special_tokens && im.special_by_id[size_t(id)]) continue;
    tokens.push_back(*s);
  }
  if (!im.decoder) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) joined.push_back(' ');
      joined.append(tokens[i]);
    }
    return joined;
  }
  im.decoder->decode_chain(tokens);
  std::string text;
  for (const auto& t : tokens) text.append(t);
  return text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->find_id(token); }

std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* s = impl_->token_string(id);
  check(s != nullptr, "Tokenizer::id_to_token: id ", id, " names no token (vocabulary size ", impl_->vocab_size, ")");
  return *s;
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::vector<std::string> Tokenizer::token_bytes() const {
  const Impl& im = *impl_;
  static const std::string kSpaceMark = "\xe2\x96\x81";  // ▁, SentencePiece's space
  std::vector<std::string> out(im.string_by_id.size());
  for (size_t id = 0; id < out.size(); ++id) {
    const std::string* s = im.string_by_id[id];
    if (!s || im.special_by_id[id]) continue;
    std::string bytes;
    if (im.byte_level_decoder) {
      for (size_t i = 0; i < s->size();) {
        const size_t start = i;
        const int b = tok::unicode_to_byte(tok::next_code_point(*s, i));
        if (b < 0) {  // not in GPT-2's alphabet: the text itself
          bytes.append(*s, start, i - start);
        } else {
          bytes.push_back(char(b));
        }
      }
    } else if (const auto b = byte_fallback_piece(*s)) {
      bytes.push_back(char(*b));
    } else {
      for (size_t i = 0; i < s->size();) {
        if (s->compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
          bytes.push_back(' ');
          i += kSpaceMark.size();
        } else {
          bytes.push_back((*s)[i++]);
        }
      }
    }
    out[id] = std::move(bytes);
  }
  return out;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->special_by_id.size() && impl_->special_by_id[size_t(id)];
}

std::vector<int32_t> Tokenizer::special_ids() const {
  std::vector<int32_t> out;
  for (size_t id = 0; id < impl_->special_by_id.size(); ++id)
    if (impl_->special_by_id[id]) out.push_back(int32_t(id));
  return out;
}

const std::string& Tokenizer::bos_token() const { return impl_->bos_token; }
const std::string& Tokenizer::eos_token() const { return impl_->eos_token; }
std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos_id; }

std::vector<int32_t> Tokenizer::eos_ids() const {
  if (impl_->eos_id) return {*impl_->eos_id};
  return {};
}

}  // namespace fathom
