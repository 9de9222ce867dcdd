#include "text/tokenizer/decoders.h"

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/json_util.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/utf8.h"

namespace fathom::tok {

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    std::string token_bytes;
    for (const auto& t : tokens) {
      token_bytes.clear();
      bool all_mapped = true;
      size_t pos = 0;
      while (pos < t.size()) {
        const int b = unicode_to_byte(next_code_point(t, pos));
        if (b < 0) {
          all_mapped = false;
          break;
        }
        token_bytes.push_back(char(b));
      }
      bytes.append(all_mapped ? token_bytes : t);  // a token with other characters passes through
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (!first_invalid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back(kReplacementChar);  // one U+FFFD per byte
      }
      pending.clear();
    };
    for (auto& t : tokens) {
      if (const int b = byte_token_value(t); b >= 0) {
        pending.push_back(char(b));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }

 private:
  // <0xAB> -> 0xAB; -1 for anything else.
  static int byte_token_value(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const auto& t : tokens) joined.append(t);
    tokens.assign(1, std::move(joined));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<size_t> starts;  // byte offset of each character
      for (size_t pos = 0; pos < t.size();) {
        starts.push_back(pos);
        next_code_point(t, pos);
      }
      const size_t n = starts.size();
      auto char_at = [&](size_t i) {
        size_t p = starts[i];
        return next_code_point(t, p);
      };
      size_t start_cut = 0;
      for (size_t i = 0; i < std::min(start_, n) && char_at(i) == content_; ++i) start_cut = i + 1;
      size_t stop_cut = n;
      for (size_t i = 0; i < std::min(stop_, n); ++i) {
        const size_t index = n - i - 1;
        if (char_at(index) != content_) break;
        stop_cut = index;
      }
      if (stop_cut < start_cut) stop_cut = start_cut;
      const size_t b = start_cut < n ? starts[start_cut] : t.size();
      const size_t e = stop_cut < n ? starts[stop_cut] : t.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Regex regex, std::string content) : regex_(std::move(regex)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      const auto matches = regex_.find_all(t);
      if (matches.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (const auto& [b, e] : matches) {
        out.append(t, prev, b - prev);
        out.append(content_);
        prev = e;
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  Regex regex_;
  std::string content_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first) : replacement_(replacement), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t pos = 0; pos < t.size();) {
        const size_t start = pos;
        if (next_code_point(t, pos) == replacement_) {
          if (!(i == 0 && strip_first_)) out.push_back(' ');
        } else {
          out.append(t, start, pos - start);
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool strip_first_;
};

class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (suffix_.empty()) return;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string with = i + 1 == tokens.size() ? "" : " ";
      std::string out;
      const std::string& t = tokens[i];
      size_t prev = 0;
      for (size_t at = t.find(suffix_); at != std::string::npos; at = t.find(suffix_, prev)) {
        out.append(t, prev, at - prev).append(with);
        prev = at + suffix_.size();
      }
      out.append(t, prev, std::string::npos);
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string suffix_;
};

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (!prefix_.empty() && t.compare(0, prefix_.size(), prefix_) == 0) t.erase(0, prefix_.size());
        else t.insert(0, 1, ' ');
      }
      if (cleanup_) t = clean_up_tokenization(std::move(t));
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

// Connectionist temporal classification output: repeated tokens collapse to one, the
// pad token disappears, and with cleanup the word delimiter becomes a space.
class CtcDecoder final : public Decoder {
 public:
  CtcDecoder(std::string pad, std::string delimiter, bool cleanup)
      : pad_(std::move(pad)), delimiter_(std::move(delimiter)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 && tokens[i] == tokens[i - 1]) continue;
      std::string t = tokens[i];
      if (!pad_.empty()) replace_all(t, pad_, "");
      if (cleanup_) {
        t = clean_up_tokenization(std::move(t));
        if (!delimiter_.empty()) replace_all(t, delimiter_, " ");
      }
      if (!t.empty()) out.push_back(std::move(t));
    }
    tokens = std::move(out);
  }

 private:
  std::string pad_, delimiter_;
  bool cleanup_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& s : steps_) s->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

char32_t single_char(const std::string& s, const std::string& what, const char* field) {
  check(!s.empty() && code_point_count(s) == 1, what, ": \"", field, "\" must be one character");
  size_t pos = 0;
  return next_code_point(s, pos);
}


}  // namespace

std::string clean_up_tokenization(std::string text) {
  static const std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},         {" ?", "?"},   {" !", "!"},   {" ,", ","},   {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"},       {" do not", " don't"},        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) replace_all(text, from, to);
  return text;
}

std::unique_ptr<Decoder> make_decoder(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, "decoder");
  const std::string what = "decoder " + type;
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const int64_t start = int_or(j, "start", 0, what), stop = int_or(j, "stop", 0, what);
    check(start >= 0 && stop >= 0, what, ": start and stop must not be negative");
    return std::make_unique<StripDecoder>(single_char(require_string(j, "content", what), what, "content"), size_t(start),
                                          size_t(stop));
  }
  if (type == "Replace") {
    const json& pattern = require_field(j, "pattern", what);
    check(pattern.is_object(), what, ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
    std::string content = require_string(j, "content", what);
    if (pattern.contains("String"))
      return std::make_unique<ReplaceDecoder>(Regex::literal(require_string(pattern, "String", what), what), content);
    if (pattern.contains("Regex"))
      return std::make_unique<ReplaceDecoder>(Regex::compile(require_string(pattern, "Regex", what), what), content);
    fail(what, ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
  }
  if (type == "Metaspace") {
    const char32_t r = single_char(require_string(j, "replacement", what), what, "replacement");
    bool strip_first = true;  // prepend_scheme "always" (the default) or "first"
    if (auto scheme = optional_string(j, "prepend_scheme", what)) {
      check(*scheme == "always" || *scheme == "first" || *scheme == "never", what, ": unsupported prepend_scheme \"",
            *scheme, "\"");
      strip_first = *scheme != "never";
    }
    if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean() && !j["add_prefix_space"].get<bool>())
      strip_first = false;
    return std::make_unique<MetaspaceDecoder>(r, strip_first);
  }
  if (type == "CTC")
    return std::make_unique<CtcDecoder>(optional_string(j, "pad_token", what).value_or("<pad>"),
                                        optional_string(j, "word_delimiter_token", what).value_or("|"),
                                        bool_or(j, "cleanup", true, what));
  if (type == "BPEDecoder") return std::make_unique<BpeSuffixDecoder>(optional_string(j, "suffix", what).value_or("</w>"));
  if (type == "WordPiece")
    return std::make_unique<WordPieceDecoder>(optional_string(j, "prefix", what).value_or("##"),
                                              bool_or(j, "cleanup", true, what));
  if (type == "Sequence") {
    const json& list = require_field(j, "decoders", what);
    check(list.is_array(), what, ": \"decoders\" must be an array");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const auto& item : list) {
      auto step = make_decoder(item);
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  fail("unsupported decoder type \"", type, "\"");
}

}  // namespace fathom::tok
