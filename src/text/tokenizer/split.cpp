#include "text/tokenizer/split.h"

#include <algorithm>

#include "core/error.h"
#include "text/tokenizer/utf8.h"

namespace fathom::tok {

SplitBehavior parse_split_behavior(std::string_view name, std::string_view what) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  fail(what, ": unsupported split behavior \"", name, "\"");
}

std::vector<Span> spans_from_matches(size_t length, const Ranges& matches) {
  if (length == 0) return {{0, 0, false}};
  std::vector<Span> spans;
  spans.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != length) spans.push_back({prev, length, false});
  return spans;
}

std::vector<Span> spans_from_predicate(std::string_view s, const std::function<bool(char32_t)>& pred) {
  if (s.empty()) return {{0, 0, false}};
  std::vector<Span> spans;
  size_t last = 0, pos = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    const char32_t c = next_code_point(s, pos);
    if (pred(c)) {
      if (last < start) spans.push_back({last, start, false});
      spans.push_back({start, pos, true});
      last = pos;
    }
  }
  if (last < s.size()) spans.push_back({last, s.size(), false});
  return spans;
}

void invert_spans(std::vector<Span>& spans) {
  for (auto& s : spans) s.is_match = !s.is_match;
}

Ranges apply_split_behavior(const std::vector<Span>& spans, SplitBehavior behavior) {
  Ranges out;
  out.reserve(spans.size());
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const auto& s : spans) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::Removed:
      for (const auto& s : spans)
        if (!s.is_match) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::Contiguous: {
      bool previous_match = false;
      for (const auto& s : spans) {
        if (s.is_match == previous_match && !out.empty()) out.back().second = s.end;
        else out.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      bool previous_match = false;
      for (const auto& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) out.back().second = s.end;
        else out.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) out.back().first = it->begin;
        else out.emplace_back(it->begin, it->end);
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
  }
  return out;
}

}  // namespace fathom::tok
