#include "text/stop_strings.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"

namespace fathom {
namespace {

// Feeds `text` in random-sized pieces; returns what was emitted and whether it stopped.
std::pair<std::string, bool> stream(const std::vector<std::string>& stops, const std::string& text,
                                    std::mt19937_64& rng) {
  StopStringMatcher m(stops);
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = 1 + rng() % 4;
    const auto step = m.push(std::string_view(text).substr(pos, n));
    out += step.emit;
    pos += n;
    if (step.stopped) return {out, true};
  }
  return {out + m.flush(), false};
}

TEST(StopStrings, EndsRightBeforeTheEarliestStopWhateverTheSplit) {
  auto rng = testing::fresh_rng();
  for (int trial = 0; trial < 200; ++trial) {
    EXPECT_EQ(stream({"</s>", "STOP"}, "hello wor</s>ld STOP", rng), std::make_pair(std::string("hello wor"), true));
    EXPECT_EQ(stream({"ab", "b"}, "xxab", rng), std::make_pair(std::string("xx"), true));
    EXPECT_EQ(stream({"\n\n"}, "line\nmore\n", rng), std::make_pair(std::string("line\nmore\n"), false));
    EXPECT_EQ(stream({"abc"}, "ababab", rng), std::make_pair(std::string("ababab"), false));
  }
}

TEST(StopStrings, NameTheStopThatMatched) {
  StopStringMatcher m({"STOP", "</s>"});
  EXPECT_EQ(m.push("hello </").matched, "");
  const auto step = m.push("s> and STOP");
  EXPECT_TRUE(step.stopped);
  EXPECT_EQ(step.matched, "</s>");  // the earliest in the text, not the first listed
  StopStringMatcher tie({"b", "ab"});
  EXPECT_EQ(tie.push("xxab").matched, "ab");  // "ab" starts first
}

TEST(StopStrings, HoldsBackOnlyWhatCouldStartAStop) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(m.push("text E").emit, "text ");
  EXPECT_EQ(m.push("N").emit, "");
  EXPECT_EQ(m.push("x").emit, "ENx");
  EXPECT_THROW(StopStringMatcher({""}), Error);
}

}  // namespace
}  // namespace fathom
