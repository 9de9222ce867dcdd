// Unit tests of each piece of the tokenizer pipeline on hand-made cases whose expected
// results follow Hugging Face tokenizers' documented behaviour.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/tokenizer/bpe_model.h"
#include "text/tokenizer/decoders.h"
#include "text/tokenizer/normalizers.h"
#include "text/tokenizer/pre_tokenizers.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/split.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/unicode.h"
#include "text/tokenizer/utf8.h"

namespace fathom::tok {
namespace {

using nlohmann::json;
const std::string kFFFD = "\xEF\xBF\xBD";

// ---------------------------------------------------------------- UTF-8 and regex

TEST(Utf8, LossyReplacesMaximalInvalidSubparts) {
  EXPECT_EQ(utf8_lossy("plain ascii"), "plain ascii");
  EXPECT_EQ(utf8_lossy("caf\xC3\xA9"), "café");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98" "a"), kFFFD + "a");  // truncated 4-byte sequence: one U+FFFD
  EXPECT_EQ(utf8_lossy("\xE0\x80"), kFFFD + kFFFD);          // E0 needs A0..BF next
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), kFFFD + kFFFD);          // overlong lead byte
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);  // a surrogate
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD);  // above U+10FFFF
  EXPECT_EQ(utf8_lossy("\x80\x80"), kFFFD + kFFFD);
  EXPECT_EQ(utf8_lossy("\xE2\x82"), kFFFD);
}

TEST(Utf8, FirstInvalidByte) {
  EXPECT_FALSE(first_invalid_utf8("日本語 😀"));
  EXPECT_EQ(first_invalid_utf8("ab\xFF"), 2u);
  EXPECT_EQ(first_invalid_utf8("a\xE6\x97"), 1u);
}

TEST(Regex, WhitespaceMeansOniguruma) {
  const Regex s = Regex::compile("\\s", "test");
  EXPECT_EQ(s.find_all("\xE1\xA0\x8E").size(), 0u) << "U+180E is not White_Space";
  for (const char* ws : {"\xE3\x80\x80", "\xC2\x85", "\xE2\x80\xA8", "\xC2\xA0", "\t", "\v"})
    EXPECT_EQ(s.find_all(ws).size(), 1u) << ws;
  EXPECT_EQ(onig_compatible_pattern("[^\\s\\p{L}]\\s+(?!\\S)"),
            "[^\\t-\\r\\x{85}\\p{Z}\\p{L}][\\t-\\r\\x{85}\\p{Z}]+(?![^\\t-\\r\\x{85}\\p{Z}])");
  EXPECT_EQ(onig_compatible_pattern("[]\\s]"), "[]\\t-\\r\\x{85}\\p{Z}]");
  EXPECT_EQ(onig_compatible_pattern("\\\\s"), "\\\\s");  // an escaped backslash, then 's'
}

TEST(Regex, UnicodeClassesAndCaseInsensitiveGroups) {
  const Regex r = Regex::compile("(?i:'s|'t)|\\p{L}+|\\p{N}", "test");
  using R = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(r.find_all("IT'S 42"), (R{{0, 2}, {2, 4}, {5, 6}, {6, 7}}));
  EXPECT_EQ(r.find_all("日本"), (R{{0, 6}}));
}

TEST(Regex, EmptyMatchesFollowOnigurumaIteration) {
  const Regex r = Regex::compile("a*", "test");
  using R = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(r.find_all("baa"), (R{{0, 0}, {1, 3}}));
  EXPECT_EQ(r.find_all("aab"), (R{{0, 2}, {3, 3}}));
  EXPECT_EQ(Regex::literal("a.b", "test").find_all("axb a.b"), (R{{4, 7}}));
}

TEST(Regex, BadPatternNamesTheConstruct) {
  try {
    Regex::compile("(unclosed", "pre_tokenizer Split");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer Split: cannot compile regex \"(unclosed\""), std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------- split behaviours

std::vector<std::string> cut(const std::string& s, SplitBehavior b) {
  std::vector<std::string> out;
  for (const auto& [x, y] : apply_split_behavior(spans_from_predicate(s, [](char32_t c) { return c == '-'; }), b))
    if (x != y) out.push_back(s.substr(x, y - x));
  return out;
}

TEST(SplitBehavior, AllFiveOnHuggingFacesExample) {
  using V = std::vector<std::string>;
  const std::string s = "the-final--countdown";
  EXPECT_EQ(cut(s, SplitBehavior::Removed), (V{"the", "final", "countdown"}));
  EXPECT_EQ(cut(s, SplitBehavior::Isolated), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(cut(s, SplitBehavior::MergedWithPrevious), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(cut(s, SplitBehavior::MergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(cut(s, SplitBehavior::Contiguous), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_THROW(parse_split_behavior("Sideways", "test"), Error);
}

// ---------------------------------------------------------------- normalizers

std::string normalize(const json& j, std::string s) {
  make_normalizer(j)->normalize(s);
  return s;
}

TEST(Normalizers, UnicodeForms) {
  EXPECT_EQ(normalize({{"type", "NFC"}}, "cafe\xCC\x81"), "café");
  EXPECT_EQ(normalize({{"type", "NFD"}}, "café"), "cafe\xCC\x81");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\xEF\xAC\x81nance \xE2\x91\xA0 \xEF\xBC\xA1"), "finance 1 A");
  EXPECT_EQ(normalize({{"type", "NFKD"}}, "é\xEF\xAC\x81"), "e\xCC\x81" "fi");
  EXPECT_EQ(normalize({{"type", "NFC"}}, "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB"), "한");  // conjoining jamo
  EXPECT_EQ(normalize({{"type", "NFC"}}, "\xE2\x84\xAB"), "Å");  // Angstrom sign
}

TEST(Normalizers, LowercaseIsFullUnicode) {
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "HeLLo ÀÉÎ"), "hello àéî");
  // Character by character, as Hugging Face: no final sigma (tokenizers gives "σασ").
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "ΟΔΟΣ ΣΑΣ"), "οδοσ σασ");
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "İ"), "i\xCC\x87");
}

TEST(Normalizers, ReplacePrependStrip) {
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}};
  EXPECT_EQ(normalize(replace, "a b  c"), "a▁b▁▁c");
  const json regex = {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}};
  EXPECT_EQ(normalize(regex, "a \t\n b"), "a b");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "▁"}}, "abc"), "▁abc");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "▁"}}, ""), "");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, "  \xE3\x80\x80hi \n"), "hi");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, "  hi \n"), "hi \n");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}, "  hi \n"), "  hi");
  EXPECT_EQ(normalize({{"type", "Strip"}}, " \t "), "");
}

TEST(Normalizers, SequenceStripAccentsByteLevel) {
  const json seq = {{"type", "Sequence"},
                    {"normalizers", json::array({{{"type", "NFD"}}, {{"type", "StripAccents"}}, {{"type", "Lowercase"}}})}};
  EXPECT_EQ(normalize(seq, "Café Ñandú"), "cafe nandu");
  EXPECT_EQ(normalize({{"type", "ByteLevel"}}, " a\n"), "ĠaĊ");
  EXPECT_EQ(make_normalizer(json()), nullptr);
}

// ---------------------------------------------------------------- pre-tokenizers

std::vector<std::string> pre(const json& j, const std::string& s, bool at_start = true) {
  std::vector<PreToken> pieces{{s, at_start}};
  make_pre_tokenizer(j)->pre_tokenize(pieces);
  std::vector<std::string> out;
  for (auto& p : pieces) out.push_back(p.text);
  return out;
}
using V = std::vector<std::string>;

TEST(PreTokenizers, UnicodeScriptsAndFixedLength) {
  const json scripts = {{"type", "UnicodeScripts"}};
  // Spaces join either side; kana count as Han; leading spaces (no script yet) are dropped.
  EXPECT_EQ(pre(scripts, "  abc 漢字かなカナー def"), (V{"abc ", "漢字かなカナー ", "def"}));
  EXPECT_EQ(pre(scripts, "Привет, мир"), (V{"Привет", ", ", "мир"}));
  EXPECT_EQ(pre(scripts, "e\xCC\x81"), (V{"e", "\xCC\x81"}));  // a combining mark is Inherited
  EXPECT_EQ(pre(scripts, "   "), V{});
  EXPECT_EQ(pre({{"type", "FixedLength"}, {"length", 2}}, "añbcé"), (V{"añ", "bc", "é"}));
}

TEST(PreTokenizers, ByteLevel) {
  const json gpt2 = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(pre(gpt2, "Hello world"), (V{"ĠHello", "Ġworld"}));
  const json no_prefix = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  EXPECT_EQ(pre(no_prefix, "Hello  world's 42!"), (V{"Hello", "Ġ", "Ġworld", "'s", "Ġ42", "!"}));
  const json bytes_only = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  EXPECT_EQ(pre(bytes_only, "a b\né"), (V{"aĠbĊÃ©"}));
}

TEST(PreTokenizers, SplitWithQwenRegexThenByteLevel) {
  const json qwen = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern",
                      {{"Regex",
                        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  EXPECT_EQ(pre(qwen, "I'm 123 fine!!\n\n"), (V{"I", "'m", "Ġ", "1", "2", "3", "Ġfine", "!!ĊĊ"}));
  EXPECT_EQ(pre(qwen, "a   b"), (V{"a", "ĠĠ", "Ġb"}));
}

TEST(PreTokenizers, SplitInvertAndLiteral) {
  const json inv = {{"type", "Split"}, {"pattern", {{"Regex", "\\d+"}}}, {"behavior", "Removed"}, {"invert", true}};
  EXPECT_EQ(pre(inv, "ab12cd345"), (V{"12", "345"}));
  const json lit = {{"type", "Split"}, {"pattern", {{"String", "."}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
  EXPECT_EQ(pre(lit, "a.b.c"), (V{"a.", "b.", "c"}));
}

TEST(PreTokenizers, DigitsWhitespacePunctuation) {
  EXPECT_EQ(pre({{"type", "Digits"}, {"individual_digits", false}}, "abc123def45"), (V{"abc", "123", "def", "45"}));
  EXPECT_EQ(pre({{"type", "Digits"}, {"individual_digits", true}}, "ab12٣"), (V{"ab", "1", "2", "٣"}));
  EXPECT_EQ(pre({{"type", "WhitespaceSplit"}}, "  a  b\tc \xE3\x80\x80"), (V{"a", "b", "c"}));
  EXPECT_EQ(pre({{"type", "Whitespace"}}, "Hey man!!"), (V{"Hey", "man", "!!"}));
  EXPECT_EQ(pre({{"type", "Punctuation"}}, "a,b¿"), (V{"a", ",", "b", "¿"}));
  EXPECT_EQ(pre({{"type", "BertPreTokenizer"}}, "Hey, you!"), (V{"Hey", ",", "you", "!"}));
}

TEST(PreTokenizers, Metaspace) {
  const json always = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(pre(always, "Hey friend"), (V{"▁Hey", "▁friend"}));
  EXPECT_EQ(pre(always, "Hey friend", false), (V{"▁Hey", "▁friend"}));
  const json first = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}};
  EXPECT_EQ(pre(first, "Hey friend", true), (V{"▁Hey", "▁friend"}));
  EXPECT_EQ(pre(first, "Hey friend", false), (V{"Hey", "▁friend"}));
  const json nosplit = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "never"}, {"split", false}};
  EXPECT_EQ(pre(nosplit, "a  b"), (V{"a▁▁b"}));
}

// ---------------------------------------------------------------- decoders

std::string decode(const json& j, std::vector<std::string> tokens) {
  make_decoder(j)->decode_chain(tokens);
  std::string out;
  for (auto& t : tokens) out += t;
  return out;
}

TEST(Decoders, ByteLevel) {
  const json bl = {{"type", "ByteLevel"}};
  EXPECT_EQ(decode(bl, {"Hello", "Ġworld", "ĊĠ"}), "Hello world\n ");
  EXPECT_EQ(decode(bl, {"Ã", "¤"}), "ä");
  EXPECT_EQ(decode(bl, {"Ã"}), kFFFD);
  EXPECT_EQ(decode(bl, {"a", "中"}), "a中");  // a token outside the byte alphabet passes through
}

TEST(Decoders, ByteFallbackKeepsTokensAndReplacesBadRuns) {
  const json bf = {{"type", "ByteFallback"}};
  std::vector<std::string> t = {"<0x61>", "b"};
  make_decoder(bf)->decode_chain(t);
  EXPECT_EQ(t, (V{"a", "b"}));
  EXPECT_EQ(decode(bf, {"<0xE5>", "<0x8f>", "<0xab>", "a"}), "叫a");
  EXPECT_EQ(decode(bf, {"<0xE5>", "<0x8f>", "a"}), kFFFD + kFFFD + "a");  // one U+FFFD per byte
  EXPECT_EQ(decode(bf, {"<0xE5>"}), kFFFD);
  EXPECT_EQ(decode(bf, {"<0xZZ>", "<0x4>"}), "<0xZZ><0x4>");
}

TEST(Decoders, FuseStripReplaceMetaspace) {
  EXPECT_EQ(decode({{"type", "Fuse"}}, {"a", "b"}), "ab");
  const json strip = {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}};
  std::vector<std::string> t = {" hey", "  x", ""};
  make_decoder(strip)->decode_chain(t);
  EXPECT_EQ(t, (V{"hey", " x", ""}));
  EXPECT_EQ(decode({{"type", "Strip"}, {"content", " "}, {"start", 0}, {"stop", 2}}, {"ab   "}), "ab ");
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}};
  EXPECT_EQ(decode(replace, {"▁Hey", "▁friend"}), " Hey friend");
  const json meta = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(decode(meta, {"▁Hey", "▁friend", "▁"}), "Hey friend ");
  const json never = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "never"}, {"split", true}};
  EXPECT_EQ(decode(never, {"▁Hey", "▁friend"}), " Hey friend");
}

TEST(Decoders, SequenceBpeWordPiece) {
  const json gemma = {{"type", "Sequence"},
                      {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                                                {{"type", "ByteFallback"}},
                                                {{"type", "Fuse"}}})}};
  EXPECT_EQ(decode(gemma, {"▁Hi", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"}), " Hi😀");
  EXPECT_EQ(decode({{"type", "BPEDecoder"}, {"suffix", "</w>"}}, {"hel", "lo</w>", "wor", "ld</w>"}), "hello world");
  EXPECT_EQ(decode({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}, {"un", "##aff", "##able", "."}),
            "unaffable.");
  EXPECT_EQ(clean_up_tokenization("a , b . c n't d 's"), "a, b. cn't d's");
}

// ---------------------------------------------------------------- BPE model

std::vector<int32_t> bpe(const json& model, const std::string& word) {
  std::vector<int32_t> ids;
  BpeModel::from_json(model)->tokenize(word, ids);
  return ids;
}
using I = std::vector<int32_t>;

json small_vocab() { return {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"<unk>", 6}, {"abab", 7}}; }

TEST(BpeModel, MergesInRankOrderBothForms) {
  const json m = {{"type", "BPE"}, {"vocab", small_vocab()}, {"merges", json::array({"a b", json::array({"ab", "c"})})}};
  EXPECT_EQ(bpe(m, "abc"), (I{5}));
  EXPECT_EQ(bpe(m, "abcb"), (I{5, 1}));
  EXPECT_EQ(bpe(m, "abab"), (I{3, 3}));
  const json m2 = {{"type", "BPE"}, {"vocab", small_vocab()}, {"merges", json::array({"b c", "a b"})}};
  EXPECT_EQ(bpe(m2, "abc"), (I{0, 4}));  // "b c" outranks "a b"
}

TEST(BpeModel, IgnoreMergesTakesWholeWords) {
  json m = {{"type", "BPE"}, {"vocab", small_vocab()}, {"merges", json::array({"a b"})}, {"ignore_merges", true}};
  EXPECT_EQ(bpe(m, "abab"), (I{7}));
  m["ignore_merges"] = false;
  EXPECT_EQ(bpe(m, "abab"), (I{3, 3}));
}

TEST(BpeModel, UnknownCharacters) {
  json m = {{"type", "BPE"}, {"vocab", small_vocab()}, {"merges", json::array()}, {"unk_token", "<unk>"}, {"fuse_unk", true}};
  EXPECT_EQ(bpe(m, "axyb"), (I{0, 6, 1}));
  m["fuse_unk"] = false;
  EXPECT_EQ(bpe(m, "axyb"), (I{0, 6, 6, 1}));
  m.erase("unk_token");
  EXPECT_EQ(bpe(m, "axyb"), (I{0, 1}));  // no unk token: dropped, as Hugging Face does
}

TEST(BpeModel, ByteFallback) {
  json vocab = small_vocab();
  vocab["<0x78>"] = 10;
  vocab["<0xC3>"] = 11;
  vocab["<0xA9>"] = 12;
  const json m = {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b"})}, {"byte_fallback", true},
                  {"unk_token", "<unk>"}};
  EXPECT_EQ(bpe(m, "abxé"), (I{3, 10, 11, 12}));
  EXPECT_EQ(bpe(m, "a中"), (I{0, 6}));  // its bytes have no tokens: unk
}

TEST(BpeModel, SubwordPrefixAndSuffix) {
  const json pre = {{"type", "BPE"}, {"vocab", {{"a", 0}, {"##b", 1}, {"ab", 2}}},
                    {"merges", json::array({json::array({"a", "##b"})})}, {"continuing_subword_prefix", "##"}};
  EXPECT_EQ(bpe(pre, "ab"), (I{2}));
  const json suf = {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b</w>", 1}, {"ab</w>", 2}}},
                    {"merges", json::array({"a b</w>"})}, {"end_of_word_suffix", "</w>"}};
  EXPECT_EQ(bpe(suf, "ab"), (I{2}));
}

TEST(BpeModel, LongWordIsFast) {
  json vocab = small_vocab();
  const json m = {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b", "ab c"})}};
  std::string word;
  for (int i = 0; i < 200000; ++i) word += "abc";
  const auto ids = bpe(m, word);
  EXPECT_EQ(ids.size(), 200000u);
  EXPECT_EQ(ids.front(), 5);
}

// ---------------------------------------------------------------- added tokens, templates, config

// A tiny character-level tokenizer.json around the given added tokens.
json tiny(json added, json normalizer = nullptr, json post = nullptr) {
  json vocab = json::object();
  int id = 0;
  for (const char* c : {"a", "b", "e", "n", "o", "s", "y", " ", "<", ">", "x", "m", "k", "h", "l"}) vocab[c] = id++;
  vocab["</s>"] = id++;
  return {{"normalizer", normalizer}, {"pre_tokenizer", nullptr}, {"post_processor", post}, {"decoder", {{"type", "Fuse"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}, {"added_tokens", added}};
}

json added(const std::string& content, int id, bool special, json extra = json::object()) {
  json t = {{"content", content}, {"id", id}, {"special", special}, {"normalized", !special},
            {"lstrip", false}, {"rstrip", false}, {"single_word", false}};
  for (auto& [k, v] : extra.items()) t[k] = v;
  return t;
}

TEST(AddedTokens, SplitLeftmostLongestWithOptions) {
  const Tokenizer tok = Tokenizer::from_json(
      tiny(json::array({added("<s>", 100, true), added("<a>", 101, true), added("<a><b>", 102, true),
                        added("<m>", 103, true, {{"lstrip", true}}), added("<r>", 104, true, {{"rstrip", true}}),
                        added("yes", 105, false, {{"single_word", true}, {"normalized", false}})}))
          .dump());
  EXPECT_EQ(tok.encode("a<s>b", false), (I{0, 100, 1}));
  EXPECT_EQ(tok.encode("<a><b>", false), (I{102}));
  EXPECT_EQ(tok.encode("<a>b", false), (I{101, 1}));
  EXPECT_EQ(tok.encode("a  <m> b", false), (I{0, 103, 7, 1}));  // lstrip swallows the spaces before
  EXPECT_EQ(tok.encode("<r>  b", false), (I{104, 1}));          // rstrip swallows the spaces after
  EXPECT_EQ(tok.encode("yes no", false), (I{105, 7, 3, 4}));
  EXPECT_EQ(tok.encode("eyes", false), (I{2, 6, 2, 5}));  // single_word: not inside a word
  EXPECT_EQ(tok.decode(I{0, 100, 1}), "a<s>b");
  EXPECT_EQ(tok.decode(I{0, 100, 1}, true), "ab");
  EXPECT_EQ(tok.decode(I{0, 105, 1}, true), "ayesb");  // not special: kept
  EXPECT_EQ(tok.decode(I{0, 9999, 1}), "ab");          // unknown ids are skipped
  EXPECT_TRUE(tok.is_special(100));
  EXPECT_FALSE(tok.is_special(105));
}

TEST(AddedTokens, NormalizedTokensMatchNormalizedText) {
  const Tokenizer tok =
      Tokenizer::from_json(tiny(json::array({added("hello", 100, false)}), {{"type", "Lowercase"}}).dump());
  EXPECT_EQ(tok.encode("HELLO", false), (I{100}));
  EXPECT_EQ(tok.encode("aHeLLob", false), (I{0, 100, 1}));
}

TEST(PostProcessor, TemplateAddsBosAndEos) {
  const json post = {{"type", "TemplateProcessing"},
                     {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                             {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
                     {"pair", json::array()},
                     {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {100}}, {"tokens", {"<s>"}}}},
                                         {"</s>", {{"id", "</s>"}, {"ids", {15}}, {"tokens", {"</s>"}}}}}}};
  const Tokenizer tok = Tokenizer::from_json(tiny(json::array({added("<s>", 100, true)}), nullptr, post).dump());
  EXPECT_EQ(tok.encode("ab", true), (I{100, 0, 1, 15}));
  EXPECT_EQ(tok.encode("ab", false), (I{0, 1}));
  EXPECT_EQ(tok.encode("", true), (I{100, 15}));
  const json seq = {{"type", "Sequence"}, {"processors", json::array({{{"type", "ByteLevel"}, {"trim_offsets", false}}, post})}};
  EXPECT_EQ(Tokenizer::from_json(tiny(json::array({added("<s>", 100, true)}), nullptr, seq).dump()).encode("a", true),
            (I{100, 0, 15}));
}

TEST(TokenizerConfig, NamedSpecialTokensAndBosEosSwitches) {
  // "</s>" is only in the model vocabulary; the config names it, so it becomes a special
  // added token, split out of text; add_bos_token rebuilds the template.
  const std::string config = json{{"bos_token", "<s>"},
                                  {"eos_token", {{"content", "</s>"}, {"__type", "AddedToken"}}},
                                  {"add_bos_token", true},
                                  {"add_eos_token", true}}
                                 .dump();
  const Tokenizer tok = Tokenizer::from_json(tiny(json::array({added("<s>", 100, true)})).dump(), config);
  EXPECT_EQ(tok.bos_token(), "<s>");
  EXPECT_EQ(tok.eos_token(), "</s>");
  EXPECT_EQ(tok.bos_token_id(), 100);
  EXPECT_EQ(tok.eos_token_id(), 15);
  EXPECT_EQ(tok.eos_ids(), (I{15}));
  EXPECT_EQ(tok.encode("a</s>", false), (I{0, 15}));
  EXPECT_EQ(tok.encode("a", true), (I{100, 0, 15}));
  EXPECT_TRUE(tok.is_special(15));
  EXPECT_EQ(tok.decode(I{100, 0, 15}, true), "a");
  const Tokenizer plain = Tokenizer::from_json(tiny(json::array({added("<s>", 100, true)})).dump());
  EXPECT_EQ(plain.encode("a", true), (I{0}));  // no post-processor and no switches: nothing added
  EXPECT_EQ(plain.bos_token(), "");
  EXPECT_FALSE(plain.eos_token_id());
  EXPECT_EQ(plain.vocab_size(), 17);
}

}  // namespace
}  // namespace fathom::tok
