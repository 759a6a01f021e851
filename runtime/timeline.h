// Timeline: a Chrome-trace / Perfetto JSON file of what rank 0's runtime did with each tensor
// (ARCREDUCE_TIMELINE=path; docs/timeline.md).
//
// One row per tensor name: "queued" (submitted, waiting for the coordinator), "negotiated"
// (request sent, waiting for every rank), "allreduce" (ready until reduced) holding "fused" and
// the bucket's phases (compress: sketch/select/pack, communicate: sketch/values collective,
// decompress), then "callback". One row per bucket position in a cycle ("bucket 0", ...): the
// bucket's span with the same phases. Complete ("X") events, children inside their parents.
//
// The file is valid JSON after every flush(): events are appended before a closing "]" that is
// rewritten each time, so a job that aborts leaves a readable trace of everything flushed. The
// coordinator flushes once per cycle. Writing stops at kMaxBytes with a final marker event.
// Used by the coordinator thread only (not thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compressors/phase_log.h"

namespace arcreduce {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr uint64_t kMaxBytes = uint64_t{256} << 20;

  // Creates `path` (truncating it). Returns null with *error set if the file cannot be written.
  static std::unique_ptr<Timeline> open(const std::string& path, std::string* error);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // A complete event on `row` (created on first use, named after it). `args` is a JSON object's
  // members, e.g. "\"bytes\":12" (may be empty).
  void span(const std::string& row, const char* name, const char* category, Clock::time_point begin,
            Clock::time_point end, const std::string& args = "");
  // The phases of a bucket as children on `row`.
  void phases(const std::string& row, const PhaseLog& log);
  // An instant event (a marker) on `row`.
  void instant(const std::string& row, const char* name, Clock::time_point at,
               const std::string& args = "");
  // Writes what was recorded since the last flush; the file is valid JSON afterwards.
  void flush();

  const std::string& path() const { return path_; }

 private:
  Timeline(std::FILE* file, std::string path);
  int row_id(const std::string& row);
  void add(const std::string& event_json);
  double micros(Clock::time_point t) const;

  std::FILE* file_;
  std::string path_;
  Clock::time_point origin_;
  std::map<std::string, int> rows_;
  std::string pending_;     // events not yet written, each preceded by ",\n" but the file's first
  uint64_t written_ = 0;    // bytes of events in the file, before the closing "]"
  long close_at_ = 0;       // file offset of the closing "]"
  bool any_event_ = false;  // an event was recorded (the next one needs a comma)
  bool full_ = false;       // kMaxBytes reached: nothing more is recorded
};

// `text` as a JSON string literal (quoted and escaped).
std::string json_string(const std::string& text);

}  // namespace arcreduce
