#include "text/tokenizer/pre_tokenizers.h"

#include <utf8proc.h>

#include <optional>

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/json_util.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/split.h"
#include "text/tokenizer/unicode.h"
#include "text/tokenizer/unicode_scripts.h"
#include "text/tokenizer/utf8.h"

namespace fathom::tok {

namespace {

// Replaces each piece by the ranges `cut` returns, keeping non-empty ones.
template <typename Cut>
void split_pieces(std::vector<PreToken>& pieces, Cut cut) {
  std::vector<PreToken> out;
  out.reserve(pieces.size() * 2);
  for (auto& piece : pieces) {
    const Ranges ranges = cut(piece.text);
    for (const auto& [b, e] : ranges) {
      if (b == e) continue;
      if (b == 0 && e == piece.text.size()) {
        out.push_back(std::move(piece));
        break;
      }
      out.push_back({piece.text.substr(b, e - b), piece.at_input_start && b == 0});
    }
  }
  pieces = std::move(out);
}

// Hugging Face's ByteLevel regex (GPT-2's), used when use_regex is true.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class ByteLevelPre final : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {
    if (use_regex_) regex_ = Regex::compile(kGpt2Pattern, "ByteLevel pre-tokenizer");
  }
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    // Hugging Face prepends to a non-empty piece only (an empty one has no character to
    // align the space with).
    if (add_prefix_space_)
      for (auto& p : pieces)
        if (!p.text.empty() && p.text[0] != ' ') p.text.insert(0, 1, ' ');
    if (use_regex_) {
      split_pieces(pieces, [&](const std::string& s) {
        return apply_split_behavior(spans_from_matches(s.size(), regex_.find_all(s)), SplitBehavior::Isolated);
      });
    } else {
      std::erase_if(pieces, [](const PreToken& p) { return p.text.empty(); });
    }
    for (auto& p : pieces) p.text = bytes_to_byte_level(p.text);
  }

 private:
  bool add_prefix_space_, use_regex_;
  Regex regex_;
};

class SplitPre final : public PreTokenizer {
 public:
  SplitPre(Regex regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, [&](const std::string& s) {
      auto spans = spans_from_matches(s.size(), regex_.find_all(s));
      if (invert_) invert_spans(spans);
      return apply_split_behavior(spans, behavior_);
    });
  }

 private:
  Regex regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class PredicatePre final : public PreTokenizer {
 public:
  PredicatePre(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, [&](const std::string& s) { return apply_split_behavior(spans_from_predicate(s, pred_), behavior_); });
  }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

class MetaspacePre final : public PreTokenizer {
 public:
  enum class Prepend { Always, First, Never };
  MetaspacePre(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {
    size_t pos = 0;
    replacement_char_ = next_code_point(replacement_, pos);
  }
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    std::erase_if(pieces, [](const PreToken& p) { return p.text.empty(); });  // nothing to prepend to
    for (auto& p : pieces) {
      std::string replaced;
      replaced.reserve(p.text.size() + replacement_.size());
      for (char c : p.text) {
        if (c == ' ') replaced.append(replacement_);
        else replaced.push_back(c);
      }
      const bool starts = replaced.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (prepend_ == Prepend::Always || (prepend_ == Prepend::First && p.at_input_start)))
        replaced.insert(0, replacement_);
      p.text = std::move(replaced);
    }
    if (split_) {
      const char32_t r = replacement_char_;
      split_pieces(pieces, [&](const std::string& s) {
        return apply_split_behavior(spans_from_predicate(s, [r](char32_t c) { return c == r; }),
                                    SplitBehavior::MergedWithNext);
      });
    }
  }

 private:
  std::string replacement_;
  char32_t replacement_char_;
  Prepend prepend_;
  bool split_;
};

class WhitespacePre final : public PreTokenizer {
 public:
  WhitespacePre() : regex_(Regex::compile("\\w+|[^\\w\\s]+", "Whitespace pre-tokenizer")) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, [&](const std::string& s) {
      auto spans = spans_from_matches(s.size(), regex_.find_all(s));
      invert_spans(spans);
      return apply_split_behavior(spans, SplitBehavior::Removed);
    });
  }

 private:
  Regex regex_;
};

// Hugging Face's UnicodeScripts: a piece ends where the Unicode Script changes. A space
// (U+0020) has no script and joins either side; Hiragana, Katakana and U+30FC count as
// Han. As there, text before the first character with a script is dropped.
class UnicodeScriptsPre final : public PreTokenizer {
 public:
  UnicodeScriptsPre() : han_(script_id("Han")), hiragana_(script_id("Hiragana")), katakana_(script_id("Katakana")) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, [&](const std::string& s) {
      std::vector<size_t> cuts;
      std::optional<int> last;
      for (size_t pos = 0; pos < s.size();) {
        const size_t start = pos;
        const char32_t c = next_code_point(s, pos);
        if (c == U' ') continue;
        const int script = fixed_script(c, s, start);
        if (last != script) cuts.push_back(start);
        last = script;
      }
      cuts.push_back(s.size());
      Ranges out;
      for (size_t i = 0; i + 1 < cuts.size(); ++i) out.emplace_back(cuts[i], cuts[i + 1]);
      return out;
    });
  }

 private:
  int fixed_script(char32_t c, const std::string& s, size_t pos) const {
    if (c == 0x30FC) return han_;
    const int script = unicode_script(s, pos);
    return script == hiragana_ || script == katakana_ ? han_ : script;
  }
  int han_, hiragana_, katakana_;
};

// Pieces of `length` characters (the last may be shorter).
class FixedLengthPre final : public PreTokenizer {
 public:
  explicit FixedLengthPre(size_t length) : length_(length) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, [&](const std::string& s) {
      Ranges out;
      size_t start = 0, count = 0, pos = 0;
      while (pos < s.size()) {
        next_code_point(s, pos);
        if (++count == length_) {
          out.emplace_back(start, pos);
          start = pos;
          count = 0;
        }
      }
      if (start < s.size()) out.emplace_back(start, s.size());
      return out;
    });
  }

 private:
  size_t length_;
};

class SequencePre final : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    for (const auto& s : steps_) s->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

bool is_punctuation(char32_t c) {
  if (c < 0x80) return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
  switch (utf8proc_category(utf8proc_int32_t(c))) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

Regex split_pattern(const json& j, std::string_view what) {
  const json& pattern = require_field(j, "pattern", what);
  check(pattern.is_object(), what, ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
  if (pattern.contains("String")) return Regex::literal(require_string(pattern, "String", what), what);
  if (pattern.contains("Regex")) return Regex::compile(require_string(pattern, "Regex", what), what);
  fail(what, ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, "pre_tokenizer");
  const std::string what = "pre_tokenizer " + type;
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(bool_or(j, "add_prefix_space", true, what), bool_or(j, "use_regex", true, what));
  if (type == "Split") {
    return std::make_unique<SplitPre>(split_pattern(j, what),
                                      parse_split_behavior(require_string(j, "behavior", what), what),
                                      bool_or(j, "invert", false, what));
  }
  if (type == "Digits") {
    const bool individual = bool_or(j, "individual_digits", false, what);
    return std::make_unique<PredicatePre>(is_numeric, individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  }
  if (type == "Metaspace") {
    const std::string replacement = require_string(j, "replacement", what);
    check(!replacement.empty() && code_point_count(replacement) == 1, what, ": \"replacement\" must be one character");
    MetaspacePre::Prepend prepend = MetaspacePre::Prepend::Always;
    if (auto scheme = optional_string(j, "prepend_scheme", what)) {
      if (*scheme == "always") prepend = MetaspacePre::Prepend::Always;
      else if (*scheme == "first") prepend = MetaspacePre::Prepend::First;
      else if (*scheme == "never") prepend = MetaspacePre::Prepend::Never;
      else fail(what, ": unsupported prepend_scheme \"", *scheme, "\"");
    }
    if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean() && !j["add_prefix_space"].get<bool>())
      prepend = MetaspacePre::Prepend::Never;
    return std::make_unique<MetaspacePre>(replacement, prepend, bool_or(j, "split", true, what));
  }
  if (type == "FixedLength") {
    const int64_t length = int_or(j, "length", 5, what);
    check(length > 0, what, ": \"length\" must be positive, got ", length);
    return std::make_unique<FixedLengthPre>(size_t(length));
  }
  if (type == "UnicodeScripts") return std::make_unique<UnicodeScriptsPre>();
  if (type == "Whitespace") return std::make_unique<WhitespacePre>();
  if (type == "WhitespaceSplit") return std::make_unique<PredicatePre>(is_whitespace, SplitBehavior::Removed);
  if (type == "Punctuation") {
    const auto behavior = optional_string(j, "behavior", what);
    return std::make_unique<PredicatePre>(is_punctuation,
                                          behavior ? parse_split_behavior(*behavior, what) : SplitBehavior::Isolated);
  }
  if (type == "CharDelimiterSplit") {
    const std::string d = require_string(j, "delimiter", what);
    check(!d.empty() && code_point_count(d) == 1, what, ": \"delimiter\" must be one character");
    size_t pos = 0;
    const char32_t delim = next_code_point(d, pos);
    return std::make_unique<PredicatePre>([delim](char32_t c) { return c == delim; }, SplitBehavior::Removed);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    steps.push_back(std::make_unique<PredicatePre>(is_whitespace, SplitBehavior::Removed));
    steps.push_back(std::make_unique<PredicatePre>(is_punctuation, SplitBehavior::Isolated));
    return std::make_unique<SequencePre>(std::move(steps));
  }
  if (type == "Sequence") {
    const json& list = require_field(j, "pretokenizers", what);
    check(list.is_array(), what, ": \"pretokenizers\" must be an array");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const auto& item : list) {
      auto step = make_pre_tokenizer(item);
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequencePre>(std::move(steps));
  }
  fail("unsupported pre_tokenizer type \"", type, "\"");
}

}  // namespace fathom::tok
