#include "text/stop_strings.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) check(!s.empty(), "stop strings must not be empty");
}

StopStringMatcher::Step StopStringMatcher::push(std::string_view piece) {
  Step step;
  if (stopped_) return step;
  pending_ += piece;
  // The earliest complete stop string wins.
  size_t first = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = pending_.find(s);
    if (at < first) first = at, step.matched = s;
  }
  if (first != std::string::npos) {
    step.emit = pending_.substr(0, first);
    step.stopped = stopped_ = true;
    pending_.clear();
    return step;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  step.emit = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return step;
}

std::string StopStringMatcher::flush() {
  std::string rest = stopped_ ? std::string() : pending_;
  pending_.clear();
  return rest;
}

}  // namespace fathom
