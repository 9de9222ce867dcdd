#pragma once
// Wall time per backend op as its caller sees it, for `fathom bench
// --profile-ops`. Off unless a profile is attached (one branch per op). On the
// CPU an op's time is its whole work, waiting for the pool included; on CUDA
// it is the launch, unless the op synchronizes.
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace fathom {

struct OpProfile {
  struct Entry {
    int64_t calls = 0;
    double seconds = 0.0;
  };
  std::map<std::string, Entry> ops;
  double total_seconds() const {
    double s = 0.0;
    for (const auto& [name, e] : ops) s += e.seconds;
    return s;
  }
};

// Adds the time from construction to destruction to `op` of the profile, if any.
class OpScope {
 public:
  OpScope(OpProfile* profile, const char* op) : profile_(profile), op_(op) {
    if (profile_) start_ = std::chrono::steady_clock::now();
  }
  ~OpScope() {
    if (!profile_) return;
    OpProfile::Entry& e = profile_->ops[op_];
    ++e.calls;
    e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpProfile* profile_;
  const char* op_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace fathom
