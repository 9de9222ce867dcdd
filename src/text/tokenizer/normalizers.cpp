#include "text/tokenizer/normalizers.h"

#include <vector>

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/json_util.h"
#include "text/tokenizer/precompiled.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/unicode.h"
#include "text/tokenizer/utf8.h"

namespace fathom::tok {

namespace {

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = normalize_unicode(text, form_); }

 private:
  NormalForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override { text = lowercase(text); }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Regex regex, std::string content) : regex_(std::move(regex)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    const auto matches = regex_.find_all(text);
    if (matches.empty()) return;
    std::string out;
    out.reserve(text.size() + matches.size() * content_.size());
    size_t prev = 0;
    for (const auto& [b, e] : matches) {
      out.append(text, prev, b - prev);
      out.append(content_);
      prev = e;
    }
    out.append(text, prev, std::string::npos);
    text = std::move(out);
  }

 private:
  Regex regex_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t start = pos;
        if (!is_whitespace(next_code_point(text, pos))) {
          begin = start;
          break;
        }
        begin = pos;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t pos = start;
        if (!is_whitespace(next_code_point(text, pos))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Removes the characters `drop` selects.
template <typename Pred>
void remove_chars(std::string& text, Pred drop) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    if (!drop(next_code_point(text, pos))) out.append(text, start, pos - start);
  }
  text = std::move(out);
}

// Hugging Face's StripAccents removes every mark (Mn, Mc, Me: Devanagari vowel signs and
// the keycap U+20E3 too); BertNormalizer's strip_accents only the nonspacing ones (Mn).
class StripAccentsNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override { remove_chars(text, is_combining_mark); }
};

// Rewrites each character to zero, one or more: `f(c, out)` appends what c becomes.
template <typename F>
void map_chars(std::string& text, F f) {
  std::string out;
  out.reserve(text.size() + 8);
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t c = next_code_point(text, pos);
    f(c, std::string_view(text).substr(start, pos - start), out);
  }
  text = std::move(out);
}

// BERT's normalizer: drop NUL, U+FFFD and control characters and turn whitespace into a
// space (clean_text); put spaces around CJK ideographs (handle_chinese_chars); NFD and
// drop nonspacing marks (strip_accents, which defaults to `lowercase`); lowercase.
class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese_chars, bool strip_accents, bool lowercase)
      : clean_text_(clean_text), chinese_chars_(chinese_chars), strip_accents_(strip_accents), lowercase_(lowercase) {}
  void normalize(std::string& text) const override {
    if (clean_text_) {
      map_chars(text, [](char32_t c, std::string_view bytes, std::string& out) {
        // Controls go first: U+0085 is White_Space but also Cc, and BERT drops it.
        const bool tab_or_newline = c == '\t' || c == '\n' || c == '\r';
        if (c == 0 || c == 0xFFFD || (!tab_or_newline && is_other(c))) return;
        if (tab_or_newline || is_whitespace(c)) out.push_back(' ');
        else out.append(bytes);
      });
    }
    if (chinese_chars_) {
      map_chars(text, [](char32_t c, std::string_view bytes, std::string& out) {
        if (!is_cjk_ideograph(c)) {
          out.append(bytes);
          return;
        }
        out.push_back(' ');
        out.append(bytes);
        out.push_back(' ');
      });
    }
    if (strip_accents_) {
      text = normalize_unicode(text, NormalForm::NFD);
      remove_chars(text, is_nonspacing_mark);
    }
    if (lowercase_) text = lowercase(text);
  }

 private:
  // The CJK Unified Ideographs blocks BERT's tokenizer calls "Chinese characters".
  static bool is_cjk_ideograph(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
  }
  bool clean_text_, chinese_chars_, strip_accents_, lowercase_;
};

// SentencePiece's NMT normalization (nmt_nfkc without the NFKC): drop most C0 controls and
// turn the remaining layout characters into spaces.
class NmtNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    map_chars(text, [](char32_t c, std::string_view bytes, std::string& out) {
      if ((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F)
        return;
      const bool space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
                         c == 0x2028 || c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
      if (space) out.push_back(' ');
      else out.append(bytes);
    });
  }
};

class ByteLevelNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override { text = bytes_to_byte_level(text); }
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& s : steps_) s->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, "normalizer");
  const std::string what = "normalizer " + type;
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Replace") {
    const json& pattern = require_field(j, "pattern", what);
    check(pattern.is_object(), what, ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
    std::string content = require_string(j, "content", what);
    if (pattern.contains("String"))
      return std::make_unique<ReplaceNormalizer>(Regex::literal(require_string(pattern, "String", what), what), content);
    if (pattern.contains("Regex"))
      return std::make_unique<ReplaceNormalizer>(Regex::compile(require_string(pattern, "Regex", what), what), content);
    fail(what, ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(require_string(j, "prepend", what));
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(bool_or(j, "strip_left", true, what), bool_or(j, "strip_right", true, what));
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "BertNormalizer") {
    const bool lower = bool_or(j, "lowercase", true, what);
    // strip_accents: null means "as lowercase".
    return std::make_unique<BertNormalizer>(bool_or(j, "clean_text", true, what),
                                            bool_or(j, "handle_chinese_chars", true, what),
                                            bool_or(j, "strip_accents", lower, what), lower);
  }
  if (type == "Nmt") return std::make_unique<NmtNormalizer>();
  if (type == "Precompiled") return make_precompiled_normalizer(j);
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (type == "Sequence") {
    const json& list = require_field(j, "normalizers", what);
    check(list.is_array(), what, ": \"normalizers\" must be an array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& item : list) {
      auto step = make_normalizer(item);
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  fail("unsupported normalizer type \"", type, "\"");
}

}  // namespace fathom::tok
