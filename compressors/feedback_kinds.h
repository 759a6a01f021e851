// The error feedbacks (error_feedback.h says what each computes), one row each, and sets of them
// for the compressors' rows (registry.h). Data only, without dependencies: runtime/config.cc,
// which arcrun also builds, reads the names (ARCREDUCE_ERROR_FEEDBACK's choices, in this order).
#pragma once

#include <string>

namespace arcreduce {

enum class FeedbackKind { kNone, kEf14, kEf21, kEf21m, kEfm };

struct FeedbackRow {
  const char* name;
  FeedbackKind kind;
  // Runs the ARCREDUCE_WARMUP_STEPS itself, so the executor sends every step of its tensors
  // through it: efm sends its warm-up densely but keeps the momentum, which the user's optimizer
  // no longer has and a plain dense warm-up would drop.
  bool does_own_warmup;
};

inline constexpr FeedbackRow kFeedbackRows[] = {
    {"none", FeedbackKind::kNone, false}, {"ef14", FeedbackKind::kEf14, false},
    {"ef21", FeedbackKind::kEf21, false}, {"ef21m", FeedbackKind::kEf21m, false},
    {"efm", FeedbackKind::kEfm, true},
};

// The row of `name`; null for any other name.
inline const FeedbackRow* find_feedback(const std::string& name) {
  for (const FeedbackRow& row : kFeedbackRows) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

// A set of feedback kinds (CompressorTraits::feedbacks).
using FeedbackSet = unsigned;
constexpr FeedbackSet feedback_bit(FeedbackKind kind) {
  return FeedbackSet{1} << static_cast<unsigned>(kind);
}
// Nothing wraps the compressor: only "none".
constexpr FeedbackSet kNoFeedback = feedback_bit(FeedbackKind::kNone);
constexpr FeedbackSet kAnyFeedback =
    kNoFeedback | feedback_bit(FeedbackKind::kEf14) | feedback_bit(FeedbackKind::kEf21) |
    feedback_bit(FeedbackKind::kEf21m) | feedback_bit(FeedbackKind::kEfm);

}  // namespace arcreduce
