// PhaseLog: the phases one bucket went through (compress, communicate, decompress ...), with
// their times, for the timeline (runtime/timeline.h). Compressors and the executor mark where a
// phase begins; a phase ends where the next begins or at end(). Disabled logs (the default, no
// timeline) record nothing and read no clock.
#pragma once

#include <chrono>
#include <vector>

namespace arcreduce {

class PhaseLog {
 public:
  using Clock = std::chrono::steady_clock;
  struct Phase {
    const char* name;      // "sketch", "values collective", ... (string literals)
    const char* category;  // "fuse", "compress", "communicate", "decompress"
    Clock::time_point begin, end;
  };

  void enable(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  void clear() {
    phases_.clear();
    open_ = false;
  }
  // Ends the open phase (if any) and opens `name`.
  void begin(const char* name, const char* category) {
    if (!enabled_) return;
    const Clock::time_point now = Clock::now();
    if (open_) phases_.back().end = now;
    phases_.push_back({name, category, now, now});
    open_ = true;
  }
  // Ends the open phase (if any).
  void end() {
    if (!enabled_ || !open_) return;
    phases_.back().end = Clock::now();
    open_ = false;
  }
  const std::vector<Phase>& phases() const { return phases_; }

 private:
  bool enabled_ = false;
  bool open_ = false;
  std::vector<Phase> phases_;
};

}  // namespace arcreduce
