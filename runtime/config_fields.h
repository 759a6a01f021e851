// The table of ARCREDUCE_* settings (runtime/settings.inc, one row per variable) as code: the
// variables' names, what each row accepts and how it reads, checks, shows and compares a value.
// Config::from_env() and Config::validate() (config.cc), must_match_settings() and arcrun's flags
// (launcher/runtime_flags.cc) are loops over settings::all(). The defaults stay Config's member
// initializers: a row reads them from a Config{}.
//
// Built into arcrun too, which links neither MPI nor the compressors: this file and config*.cc
// include only data headers of the floors below.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arcreduce/config.h"
#include "arcreduce/status.h"
#include "compressors/compressor_options.h"

namespace arcreduce {

// ARCREDUCE_CUDA_TRANSPORT's values (choose_cuda_transport() in ops/mpi_cuda_support.h says what
// each means).
enum class CudaTransport { kAuto, kNccl, kMpi };

// A choice's text and the enum value it stands for (settings::one_of()).
template <class E>
struct Named {
  const char* name;
  E value;
};

inline constexpr Named<FeedbackInit> kEfInitValues[] = {{"warm", FeedbackInit::kWarm},
                                                        {"zero", FeedbackInit::kZero}};
inline constexpr Named<CudaTransport> kCudaTransportValues[] = {
    {"auto", CudaTransport::kAuto}, {"nccl", CudaTransport::kNccl}, {"mpi", CudaTransport::kMpi}};
inline constexpr Named<CompressedBatching> kBatchCompressedValues[] = {
    {"0", CompressedBatching::kOff},
    {"1", CompressedBatching::kOn},
    {"auto", CompressedBatching::kAuto}};

// The variables' names: kEnv<Id> for each row of settings.inc (kEnvCompressRatio is
// "ARCREDUCE_COMPRESS_RATIO").
#define ARCREDUCE_SETTING(id, name, ...) inline constexpr const char* kEnv##id = name;
#define ARCREDUCE_PRESET_SETTING(id, name, ...) inline constexpr const char* kEnv##id = name;
#define ARCREDUCE_ALIAS_SETTING(id, name, ...) inline constexpr const char* kEnv##id = name;
#include "runtime/settings.inc"
#undef ARCREDUCE_SETTING
#undef ARCREDUCE_PRESET_SETTING
#undef ARCREDUCE_ALIAS_SETTING

// Every variable Config::from_env() accepts, in the table's order.
const std::vector<std::string>& config_variables();
// The choices of ARCREDUCE_COMPRESSOR (compressors/compressors.inc's rows),
// ARCREDUCE_ERROR_FEEDBACK (compressors/feedback_kinds.h), ARCREDUCE_LOG_LEVEL,
// ARCREDUCE_GRANULARITY and ARCREDUCE_CUDA_TRANSPORT, in the order messages list them.
const std::vector<std::string>& compressor_names();
const std::vector<std::string>& error_feedback_names();
const std::vector<std::string>& log_level_names();
const std::vector<std::string>& granularity_names();
const std::vector<std::string>& cuda_transport_names();

// "VAR=value" pairs of the kEveryRank rows, in the table's order: the settings that must be
// identical on every rank (fusion and the response cache are planned locally; shared randomness
// and algorithms must agree). Numbers are written with 17 significant digits, so that any two
// different values differ. The CUDA transport is compared as what it means in this build
// ("nccl" or "mpi"; "auto" is "nccl" in a build with NCCL): a rank in NCCL's All-Reduce and one
// in MPI's would wait for each other forever, whereas CUDA-aware MPI and staged MPI calls match
// each other.
std::vector<std::pair<std::string, std::string>> must_match_settings(const Config& config);
// "nccl" or "mpi": whether `cuda_transport` (a value of ARCREDUCE_CUDA_TRANSPORT) makes a build
// with (`nccl_built`) or without NCCL reduce dense CUDA buckets through NCCL.
std::string cuda_transport_family(const std::string& cuda_transport, bool nccl_built);

// The choices the runtime branches on, as enums, of a Config that validate() accepts (throw Error
// naming the variable for any other value).
FeedbackInit ef_init_of(const Config& config);
CudaTransport cuda_transport_of(const Config& config);

namespace settings {

// Whether the ranks must agree on a setting.
enum class Agreement {
  kPerRank,    // each rank may have its own value
  kEveryRank,  // compared against rank 0's at init() (must_match_settings())
};

// One end of a numeric range.
struct Bound {
  bool present = false;
  bool open = false;  // the value itself is outside
  long double value = 0;
};

// arcrun's flag in another unit than its variable: the flag's value times `scale` is the
// variable's; at most `max` units (so that the product fits the field).
struct FlagUnit {
  const char* unit = nullptr;  // null: the flag takes the variable's value as written
  long double scale = 1;
  long double max = 0;
};

// What a row accepts (settings.inc's header lists the constructors).
struct Kind {
  enum Type { kReal, kInteger, kBoolean, kPath, kChoice };
  Type type = kPath;
  // kReal, kInteger: the words that open "expected ..." ("a fraction", "microseconds"), its
  // bounds, and what follows the range: ", e.g. <example_text>" and " (<note_text>)".
  const char* unit = nullptr;
  Bound lo, hi;
  bool separate_ends = false;  // a message names the bound crossed, not the range
  const char* example_text = nullptr;
  const char* note_text = nullptr;
  FlagUnit flag;
  // kBoolean, kChoice: the accepted texts and, for one_of()'s enum values, the value of names()[i].
  const std::vector<std::string>& (*names)() = nullptr;
  int (*code)(size_t index) = nullptr;
  // What the ranks compare instead of the text (null: the text).
  std::string (*compare_as)(const std::string& value) = nullptr;
  // Whether this build can do what the value asks (null: it can), and "expected ..." otherwise.
  bool (*available)(const std::string& value) = nullptr;
  const char* unavailable = nullptr;

  constexpr Kind above(long double v) const { return with_lo({true, true, v}); }
  constexpr Kind at_least(long double v) const { return with_lo({true, false, v}); }
  constexpr Kind below(long double v) const { return with_hi({true, true, v}); }
  constexpr Kind at_most(long double v) const { return with_hi({true, false, v}); }
  constexpr Kind one_end_per_message() const {
    Kind k = *this;
    k.separate_ends = true;
    return k;
  }
  constexpr Kind example(const char* text) const {
    Kind k = *this;
    k.example_text = text;
    return k;
  }
  constexpr Kind note(const char* text) const {
    Kind k = *this;
    k.note_text = text;
    return k;
  }
  constexpr Kind flag_in(const char* unit_name, long double scale, long double max) const {
    Kind k = *this;
    k.flag = {unit_name, scale, max};
    return k;
  }
  constexpr Kind compared_as(std::string (*f)(const std::string&)) const {
    Kind k = *this;
    k.compare_as = f;
    return k;
  }
  constexpr Kind available_if(bool (*f)(const std::string&), const char* expected) const {
    Kind k = *this;
    k.available = f;
    k.unavailable = expected;
    return k;
  }

  // -1 below the lower bound (or not a number), 1 above the upper one, 0 within.
  int outside(long double v) const;

 private:
  constexpr Kind with_lo(Bound b) const {
    Kind k = *this;
    k.lo = b;
    return k;
  }
  constexpr Kind with_hi(Bound b) const {
    Kind k = *this;
    k.hi = b;
    return k;
  }
};

constexpr Kind real(const char* unit) {
  Kind k;
  k.type = Kind::kReal;
  k.unit = unit;
  return k;
}
constexpr Kind integer(const char* unit) {
  Kind k;
  k.type = Kind::kInteger;
  k.unit = unit;
  return k;
}
const std::vector<std::string>& zero_one_names();
constexpr Kind boolean() {
  Kind k;
  k.type = Kind::kBoolean;
  k.names = zero_one_names;
  return k;
}
constexpr Kind path() {
  return Kind{};
}
constexpr Kind choice(const std::vector<std::string>& (*names)()) {
  Kind k;
  k.type = Kind::kChoice;
  k.names = names;
  return k;
}
template <const auto& kValues>
const std::vector<std::string>& names_of() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& named : kValues) v.push_back(named.name);
    return v;
  }();
  return names;
}
template <const auto& kValues>
int code_of(size_t index) {
  return static_cast<int>(kValues[index].value);
}
template <const auto& kValues>
Kind one_of() {
  Kind k = choice(names_of<kValues>);
  k.code = code_of<kValues>;
  return k;
}

// The Config member a row sets, reached through its type: numbers as long double (exact for
// every 64-bit integer), booleans and enums as int codes, strings as themselves.
struct Field {
  enum Type { kNone, kFloating, kIntegral, kBool, kEnum, kString };
  Type type = kNone;
  long double (*number)(const Config&) = nullptr;         // kFloating, kIntegral
  void (*set_number)(Config*, long double) = nullptr;     // kIntegral: a value in [min, max]
  long double min = 0, max = 0;                           // kIntegral: the type's range
  int (*code)(const Config&) = nullptr;                   // kBool, kEnum
  void (*set_code)(Config*, int) = nullptr;               // kBool, kEnum
  const std::string& (*string)(const Config&) = nullptr;  // kString
  void (*set_string)(Config*, const std::string&) = nullptr;
};

// How a text becomes a number: the environment's syntax (environment_syntax()) or arcrun's
// stricter one, and what each failure says is expected.
struct Syntax {
  std::optional<double> (*real)(const std::string& text);
  std::optional<long long> (*integer)(const std::string& text);
  const char* real_expected;
  const char* integer_expected;
};
// strtod (finite, no overflow) and strtoll over the whole text: "a finite number", "an integer".
const Syntax& environment_syntax();

// One row of settings.inc.
struct Setting {
  enum Role {
    kField,   // sets `field`
    kPreset,  // replaces the whole Config by Config::preset(text)
    kAlias,   // a former name of `alias_of`: sets its field
  };
  const char* name;
  Role role;
  Kind kind;
  Field field;
  Agreement agreement;
  const char* alias_of;  // kAlias
  // kAlias: the reason its warning gives, for `value` as read into `config`.
  std::string (*deprecation)(const std::string& value, const Config& config);
  const char* flag;  // arcrun's flag, or null
  const char* flag_help;
  const char* doc;

  // Reads `text` into `config`. Throws InvalidSetting where it does not parse, is not one of an
  // enum's or a boolean's texts, or (for a field narrower than 64 bits) is out of range; range
  // and string choices are validate()'s (check()), so that they apply to every Config.
  void read(const std::string& text, Config* config,
            const Syntax& syntax = environment_syntax()) const;
  // Throws InvalidSetting if `config`'s value is out of range or not a choice; the message quotes
  // `written` when given (the value as the user wrote it), else text().
  void check(const Config& config, const std::string* written) const;
  // Throws InvalidSetting if this build cannot do what `config`'s value asks.
  void check_available(const Config& config, const std::string* written) const;
  // The value as a user writes it: the shortest text that reads back as the same value.
  std::string text(const Config& config) const;
  // The value as the ranks compare it (must_match_settings()).
  std::string agreed(const Config& config) const;
  // What "expected ..." says: for a range, the bound crossed (`end` -1 lower, 1 upper, 0 the
  // whole range); in `in`'s unit where given (an arcrun flag's).
  std::string expected(int end = 0, const FlagUnit* in = nullptr) const;
  // The accepted texts of a choice, a boolean or a preset; empty for the others.
  const std::vector<std::string>& choices() const;
  // Texts read() or check() refuse (out of range, unparsable, not a choice); none for a path.
  std::vector<std::string> invalid_texts() const;
};

// Thrown for a value a row does not accept: "VAR='value' is invalid: expected ...".
class InvalidSetting : public Error {
 public:
  InvalidSetting(const std::string& variable, const std::string& value,
                 const std::string& expected);
  const std::string& expected() const { return expected_; }

 private:
  std::string expected_;
};
[[noreturn]] void reject(const std::string& variable, const std::string& value,
                         const std::string& expected);

// Every row, in settings.inc's order.
const std::vector<Setting>& all();
// The row of `variable`; null for any other name.
const Setting* find(const std::string& variable);

}  // namespace settings
}  // namespace arcreduce
