#pragma once
// How a pattern's matches cut a string, as Hugging Face's SplitDelimiterBehavior:
// a pattern yields spans that cover the whole string, each a match or not, and a
// behavior decides which spans become pieces and what is merged with what.
#include <cstddef>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

namespace fathom::tok {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Accepts the serialized names ("Removed", "Isolated", ...); `what` names the construct.
SplitBehavior parse_split_behavior(std::string_view name, std::string_view what);

struct Span {
  size_t begin;
  size_t end;
  bool is_match;
};
using Ranges = std::vector<std::pair<size_t, size_t>>;

// Spans of a string of `length` bytes around the given (ordered, disjoint) matches.
std::vector<Span> spans_from_matches(size_t length, const Ranges& matches);

// Spans where each character satisfying `pred` is a match of its own.
std::vector<Span> spans_from_predicate(std::string_view s, const std::function<bool(char32_t)>& pred);

// Flips every span's is_match (the Split pre-tokenizer's `invert`).
void invert_spans(std::vector<Span>& spans);

// The byte ranges of the pieces to keep, in order (empty ones included; callers drop them).
Ranges apply_split_behavior(const std::vector<Span>& spans, SplitBehavior behavior);

}  // namespace fathom::tok
