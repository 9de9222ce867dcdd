#include "server/reasoning.h"

#include <gtest/gtest.h>

namespace fathom::server {

namespace {
// Feeds `text` one byte at a time, as the worst case of token boundaries.
ReasoningSplitter::Parts feed_bytewise(ReasoningSplitter& s, const std::string& text) {
  ReasoningSplitter::Parts all;
  for (char c : text) {
    auto p = s.push(std::string(1, c));
    all.reasoning += p.reasoning;
    all.content += p.content;
  }
  auto p = s.flush();
  all.reasoning += p.reasoning;
  all.content += p.content;
  return all;
}
}  // namespace

TEST(Reasoning, SplitsThinkBlockEvenAcrossTokenBoundaries) {
  ReasoningSplitter s;
  const auto parts = feed_bytewise(s, "<think>\nI should greet.\n</think>\n\nHello!");
  EXPECT_EQ(parts.reasoning, "\nI should greet.\n");
  EXPECT_EQ(parts.content, "Hello!");
}

TEST(Reasoning, TextWithoutThinkIsContent) {
  ReasoningSplitter s;
  const auto parts = feed_bytewise(s, "<thin air> is not a tag");
  EXPECT_EQ(parts.reasoning, "");
  EXPECT_EQ(parts.content, "<thin air> is not a tag");
}

TEST(Reasoning, PromptThatOpensThinking) {
  EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  ReasoningSplitter s(/*starts_inside=*/true);
  const auto parts = feed_bytewise(s, "hmm</think>answer");
  EXPECT_EQ(parts.reasoning, "hmm");
  EXPECT_EQ(parts.content, "answer");
}

TEST(Reasoning, UnfinishedThinkingIsAllReasoning) {
  ReasoningSplitter s;
  const auto parts = feed_bytewise(s, "<think>still going </thi");
  EXPECT_EQ(parts.reasoning, "still going </thi");
  EXPECT_EQ(parts.content, "");
  EXPECT_TRUE(template_has_thinking("{{ '<think>' }} ... {{ '</think>' }}"));
  EXPECT_FALSE(template_has_thinking("{{ messages }}"));
}

}  // namespace fathom::server
