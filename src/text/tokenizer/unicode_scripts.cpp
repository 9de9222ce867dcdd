#include "text/tokenizer/unicode_scripts.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace fathom::tok {

namespace {

// Unicode 15's script names (Scripts.txt); the ones this PCRE2 does not know are left out.
constexpr const char* kScripts[] = {
    "Adlam", "Ahom", "Anatolian_Hieroglyphs", "Arabic", "Armenian", "Avestan", "Balinese", "Bamum", "Bassa_Vah",
    "Batak", "Bengali", "Bhaiksuki", "Bopomofo", "Brahmi", "Braille", "Buginese", "Buhid", "Canadian_Aboriginal",
    "Carian", "Caucasian_Albanian", "Chakma", "Cham", "Cherokee", "Chorasmian", "Common", "Coptic", "Cuneiform",
    "Cypriot", "Cypro_Minoan", "Cyrillic", "Deseret", "Devanagari", "Dives_Akuru", "Dogra", "Duployan",
    "Egyptian_Hieroglyphs", "Elbasan", "Elymaic", "Ethiopic", "Georgian", "Glagolitic", "Gothic", "Grantha",
    "Greek", "Gujarati", "Gunjala_Gondi", "Gurmukhi", "Han", "Hangul", "Hanifi_Rohingya", "Hanunoo", "Hatran",
    "Hebrew", "Hiragana", "Imperial_Aramaic", "Inherited", "Inscriptional_Pahlavi", "Inscriptional_Parthian",
    "Javanese", "Kaithi", "Kannada", "Katakana", "Kawi", "Kayah_Li", "Kharoshthi", "Khitan_Small_Script", "Khmer",
    "Khojki", "Khudawadi", "Lao", "Latin", "Lepcha", "Limbu", "Linear_A", "Linear_B", "Lisu", "Lycian", "Lydian",
    "Mahajani", "Makasar", "Malayalam", "Mandaic", "Manichaean", "Marchen", "Masaram_Gondi", "Medefaidrin",
    "Meetei_Mayek", "Mende_Kikakui", "Meroitic_Cursive", "Meroitic_Hieroglyphs", "Miao", "Modi", "Mongolian",
    "Mro", "Multani", "Myanmar", "Nabataean", "Nag_Mundari", "Nandinagari", "New_Tai_Lue", "Newa", "Nko", "Nushu",
    "Nyiakeng_Puachue_Hmong", "Ogham", "Ol_Chiki", "Old_Hungarian", "Old_Italic", "Old_North_Arabian",
    "Old_Permic", "Old_Persian", "Old_Sogdian", "Old_South_Arabian", "Old_Turkic", "Old_Uyghur", "Oriya", "Osage",
    "Osmanya", "Pahawh_Hmong", "Palmyrene", "Pau_Cin_Hau", "Phags_Pa", "Phoenician", "Psalter_Pahlavi", "Rejang",
    "Runic", "Samaritan", "Saurashtra", "Sharada", "Shavian", "Siddham", "SignWriting", "Sinhala", "Sogdian",
    "Sora_Sompeng", "Soyombo", "Sundanese", "Syloti_Nagri", "Syriac", "Tagalog", "Tagbanwa", "Tai_Le", "Tai_Tham",
    "Tai_Viet", "Takri", "Tamil", "Tangsa", "Tangut", "Telugu", "Thaana", "Thai", "Tibetan", "Tifinagh",
    "Tirhuta", "Toto", "Ugaritic", "Vai", "Vithkuqi", "Wancho", "Warang_Citi", "Yezidi", "Yi", "Zanabazar_Square",
    "Unknown"
};

// One capture group per known script: (\p{Adlam})|(\p{Ahom})|...; the group that took
// part in the match names the script.
struct Classifier {
  pcre2_code* code = nullptr;
  std::vector<int> group_script;  // capture group (1-based, minus one) -> index into kScripts
  Classifier() {
    std::string pattern;
    for (int i = 0; i < int(std::size(kScripts)); ++i) {
      const std::string one = std::string("\\p{") + kScripts[i] + "}";
      int error = 0;
      PCRE2_SIZE offset = 0;
      pcre2_code* probe = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(one.data()), one.size(), PCRE2_UTF | PCRE2_UCP,
                                        &error, &offset, nullptr);
      if (!probe) continue;  // a script newer than this PCRE2
      pcre2_code_free(probe);
      if (!pattern.empty()) pattern += '|';
      pattern += "(" + one + ")";
      group_script.push_back(i);
    }
    int error = 0;
    PCRE2_SIZE offset = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                         PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &error, &offset, nullptr);
    check(code != nullptr, "UnicodeScripts: cannot compile the script classifier (PCRE2 error ", error, ")");
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  }
  ~Classifier() { pcre2_code_free(code); }
};

const Classifier& classifier() {
  static const Classifier c;
  return c;
}

}  // namespace

int unicode_script(std::string_view s, size_t pos) {
  const Classifier& c = classifier();
  struct MatchData {  // one per thread, freed with it
    pcre2_match_data* md;
    explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {}
    ~MatchData() { pcre2_match_data_free(md); }
  };
  thread_local MatchData data(c.code);
  check(data.md != nullptr, "UnicodeScripts: out of memory for regex match data");
  const int rc = pcre2_match(c.code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos, PCRE2_NO_UTF_CHECK,
                             data.md, nullptr);
  if (rc <= 1) return -1;  // no script matched (cannot happen while Unknown is known)
  // rc is one more than the highest group set; that group is the only one set.
  return c.group_script[size_t(rc - 2)];
}

int script_id(std::string_view name) {
  for (int i = 0; i < int(std::size(kScripts)); ++i)
    if (name == kScripts[i]) return i;
  fail("unicode_script: no script named \"", name, "\"");
}

}  // namespace fathom::tok
