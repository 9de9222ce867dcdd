#pragma once
// Stop strings over streamed text. Text that might be the start of a stop
// string is held back until it is known not to be, so a stop string never
// reaches the client even when it arrives split across tokens.
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Step {
    std::string emit;      // text that is now safe to send
    bool stopped = false;  // a stop string was found; emit ends right before it
    std::string matched;   // which one (the first listed, when several end at the same place)
  };
  // Feeds the next piece of generated text.
  Step push(std::string_view piece);
  // End of generation: whatever is still held back.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace fathom
