#include "text/tokenizer/normalizers.h"

#include <vector>

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/json_util.h"
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

class StripAccentsNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t start = pos;
      if (!is_combining_mark(next_code_point(text, pos))) out.append(text, start, pos - start);
    }
    text = std::move(out);
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
