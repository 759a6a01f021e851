#include "runtime/config_fields.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <spdlog/fmt/fmt.h>

#include "arcreduce/build_config.h"
#include "compressors/feedback_kinds.h"

namespace arcreduce {

// The registry's rows (compressors/compressors.inc), names only: arcrun builds this file without
// the compressors.
const std::vector<std::string>& compressor_names() {
  static const std::vector<std::string> names = {
#define ARCREDUCE_NATIVE_PATH(name, ...) name,
#define ARCREDUCE_COMPRESSOR(name, ...) name,
#include "compressors/compressors.inc"
#undef ARCREDUCE_NATIVE_PATH
#undef ARCREDUCE_COMPRESSOR
  };
  return names;
}

const std::vector<std::string>& error_feedback_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const FeedbackRow& row : kFeedbackRows) v.push_back(row.name);
    return v;
  }();
  return names;
}

const std::vector<std::string>& granularity_names() {
  static const std::vector<std::string> names = {"element", "row"};
  return names;
}

const std::vector<std::string>& cuda_transport_names() {
  return settings::names_of<kCudaTransportValues>();
}

const std::vector<std::string>& log_level_names() {
  static const std::vector<std::string> names = {"trace", "debug", "info", "warning", "error"};
  return names;
}

namespace {

std::optional<CudaTransport> cuda_transport_named(const std::string& value) {
  for (const auto& named : kCudaTransportValues) {
    if (value == named.name) return named.value;
  }
  return std::nullopt;
}

}  // namespace

std::string cuda_transport_family(const std::string& cuda_transport, bool nccl_built) {
  const std::optional<CudaTransport> t = cuda_transport_named(cuda_transport);
  const bool nccl = t == CudaTransport::kNccl || (t == CudaTransport::kAuto && nccl_built);
  return nccl ? "nccl" : "mpi";
}

namespace settings {
namespace {

static_assert(std::numeric_limits<long double>::digits >= 64,
              "Field::number must hold every 64-bit integer exactly");

// The choices that have no list of their own below the runtime. Config::preset() defines the
// presets; ops/mpi_wait.h (wait_mode_names()) and ops/allreduce_algorithm.h name the wait modes
// and algorithms too, but need MPI or are not built into arcrun: tests/runtime/config_test.cc
// checks that these lists are theirs.
const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names = {"default", "paper"};
  return names;
}
const std::vector<std::string>& wait_mode_choices() {
  static const std::vector<std::string> names = {"sleep", "yield", "busy"};
  return names;
}
const std::vector<std::string>& allreduce_algorithm_names() {
  static const std::vector<std::string> names = {"auto",     "ring",         "mpi",
                                                 "doubling", "rabenseifner", "thresholds"};
  return names;
}

const std::vector<std::string>& hierarchy_names() {
  static const std::vector<std::string> names = {"auto", "0", "1", "leader"};
  return names;
}

// ARCREDUCE_EF_MOMENTUM always held eta = 1 - momentum, which its name hid.
std::string ef_momentum_deprecation(const std::string& value, const Config& config) {
  char momentum[32];
  std::snprintf(momentum, sizeof momentum, "%g", 1.0 - config.ef_momentum);
  return std::string("it holds eta = 1 - momentum, as ") + kEnvEfEta + " does (" + kEnvEfMomentum +
         "=" + value + " means momentum " + momentum + ")";
}

// Ranks compare the CUDA transport as what it means in their build (must_match_settings()).
std::string cuda_transport_in_this_build(const std::string& value) {
  return cuda_transport_family(value, ARCREDUCE_NCCL != 0);
}

// Rejected at start-up rather than at the first CUDA bucket, where it would fail every op.
bool cuda_transport_built(const std::string& value) {
  return ARCREDUCE_NCCL || cuda_transport_named(value) != CudaTransport::kNccl;
}

std::optional<double> environment_real(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<long long> environment_integer(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) return std::nullopt;
  return v;
}

std::string integer_text(long double v) {
  return v < 0 ? std::to_string(static_cast<long long>(v))
               : std::to_string(static_cast<unsigned long long>(v));
}

// A bound as messages write it: "1048576", "0.5".
std::string bound_text(long double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e18L) return integer_text(v);
  return fmt::format("{}", static_cast<double>(v));
}

// "a, b or c".
std::string or_list(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return list;
}

// "a, b, c".
std::string comma_list(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  return list;
}

template <auto kMember>
Field field_of() {
  using T = std::remove_cv_t<std::remove_reference_t<decltype(std::declval<Config&>().*kMember)>>;
  Field f;
  if constexpr (std::is_same_v<T, bool>) {
    f.type = Field::kBool;
    f.code = [](const Config& c) { return c.*kMember ? 1 : 0; };
    f.set_code = [](Config* c, int v) { c->*kMember = v != 0; };
  } else if constexpr (std::is_enum_v<T>) {
    f.type = Field::kEnum;
    f.code = [](const Config& c) { return static_cast<int>(c.*kMember); };
    f.set_code = [](Config* c, int v) { c->*kMember = static_cast<T>(v); };
  } else if constexpr (std::is_integral_v<T>) {
    f.type = Field::kIntegral;
    f.number = [](const Config& c) { return static_cast<long double>(c.*kMember); };
    f.set_number = [](Config* c, long double v) { c->*kMember = static_cast<T>(v); };
    f.min = static_cast<long double>(std::numeric_limits<T>::min());
    f.max = static_cast<long double>(std::numeric_limits<T>::max());
  } else if constexpr (std::is_floating_point_v<T>) {
    f.type = Field::kFloating;
    f.number = [](const Config& c) { return static_cast<long double>(c.*kMember); };
    f.set_number = [](Config* c, long double v) { c->*kMember = static_cast<T>(v); };
  } else {
    static_assert(std::is_same_v<T, std::string>,
                  "a setting's field is a number, a bool, an enum or a string");
    f.type = Field::kString;
    f.string = [](const Config& c) -> const std::string& { return c.*kMember; };
    f.set_string = [](Config* c, const std::string& v) { c->*kMember = v; };
  }
  return f;
}

bool kind_fits_field(const Kind& kind, const Field& field) {
  switch (kind.type) {
    case Kind::kReal:
      return field.type == Field::kFloating;
    case Kind::kInteger:
      return field.type == Field::kIntegral;
    case Kind::kBoolean:
      return field.type == Field::kBool;
    case Kind::kPath:
      return field.type == Field::kString;
    case Kind::kChoice:
      return field.type == Field::kString || (field.type == Field::kEnum && kind.code);
  }
  return false;
}

template <auto kMember>
Setting field_row(const char* name, Kind kind, Agreement agreement, const char* flag,
                  const char* flag_help, const char* doc) {
  const Setting s{name,    Setting::kField, kind, field_of<kMember>(), agreement,
                  nullptr, nullptr,         flag, flag_help,           doc};
  if (!kind_fits_field(s.kind, s.field)) {
    throw std::logic_error(std::string("runtime/settings.inc: the kind of ") + name +
                           " does not fit the type of its field");
  }
  return s;
}

Setting preset_row(const char* name, const std::vector<std::string>& (*names)(), const char* flag,
                   const char* flag_help, const char* doc) {
  return Setting{name,    Setting::kPreset, choice(names), Field{},   Agreement::kPerRank,
                 nullptr, nullptr,          flag,          flag_help, doc};
}

// A former name reads as the row it renames, which comes before it and alone is compared across
// ranks.
Setting alias_row(const std::vector<Setting>& before, const char* name, const char* of,
                  std::string (*deprecation)(const std::string&, const Config&), const char* flag,
                  const char* flag_help, const char* doc) {
  auto renamed = std::find_if(before.begin(), before.end(),
                              [&](const Setting& s) { return std::string(s.name) == of; });
  if (renamed == before.end()) {
    throw std::logic_error(std::string("runtime/settings.inc: ") + name + " must follow " + of);
  }
  Setting s = *renamed;
  s.name = name;
  s.role = Setting::kAlias;
  s.agreement = Agreement::kPerRank;
  s.alias_of = of;
  s.deprecation = deprecation;
  s.flag = flag;
  s.flag_help = flag_help;
  s.doc = doc;
  return s;
}

}  // namespace

const std::vector<std::string>& zero_one_names() {
  static const std::vector<std::string> names = {"0", "1"};
  return names;
}

const Syntax& environment_syntax() {
  static const Syntax syntax{environment_real, environment_integer, "a finite number",
                             "an integer"};
  return syntax;
}

int Kind::outside(long double v) const {
  if (lo.present && !(lo.open ? v > lo.value : v >= lo.value)) return -1;
  if (hi.present && !(hi.open ? v < hi.value : v <= hi.value)) return 1;
  return 0;
}

InvalidSetting::InvalidSetting(const std::string& variable, const std::string& value,
                               const std::string& expected)
    : Error(variable + "='" + value + "' is invalid: expected " + expected), expected_(expected) {}

void reject(const std::string& variable, const std::string& value, const std::string& expected) {
  throw InvalidSetting(variable, value, expected);
}

const std::vector<Setting>& all() {
  static const std::vector<Setting> rows = [] {
    std::vector<Setting> r;
#define ARCREDUCE_SETTING(id, name, field, kind, agreement, flag, flag_help, doc) \
  r.push_back(field_row<&Config::field>(name, kind, Agreement::agreement, flag, flag_help, doc));
#define ARCREDUCE_PRESET_SETTING(id, name, names, flag, flag_help, doc) \
  r.push_back(preset_row(name, names, flag, flag_help, doc));
#define ARCREDUCE_ALIAS_SETTING(id, name, of, deprecation, flag, flag_help, doc) \
  r.push_back(alias_row(r, name, kEnv##of, deprecation, flag, flag_help, doc));
#include "runtime/settings.inc"
#undef ARCREDUCE_SETTING
#undef ARCREDUCE_PRESET_SETTING
#undef ARCREDUCE_ALIAS_SETTING
    return r;
  }();
  return rows;
}

const Setting* find(const std::string& variable) {
  for (const Setting& s : all()) {
    if (variable == s.name) return &s;
  }
  return nullptr;
}

void Setting::read(const std::string& text, Config* config, const Syntax& syntax) const {
  switch (role == kPreset ? Field::kNone : field.type) {
    case Field::kNone:
      *config = Config::preset(text);
      return;
    case Field::kFloating: {
      const std::optional<double> v = syntax.real(text);
      if (!v) reject(name, text, syntax.real_expected);
      field.set_number(config, *v);
      return;
    }
    case Field::kIntegral: {
      const std::optional<long long> v = syntax.integer(text);
      if (!v) reject(name, text, syntax.integer_expected);
      // A field narrower than the parsed integer (an int, an unsigned) is range-checked before
      // the value is narrowed into it; the others in check().
      if (field.min > LLONG_MIN || field.max < LLONG_MAX) {
        if (const int end = kind.outside(*v)) reject(name, text, expected(end));
        if (*v < field.min || *v > field.max) reject(name, text, expected());
      }
      field.set_number(config, *v);
      return;
    }
    case Field::kBool:
    case Field::kEnum: {
      const std::vector<std::string>& names = choices();
      for (size_t i = 0; i < names.size(); ++i) {
        if (text != names[i]) continue;
        field.set_code(config, kind.code ? kind.code(i) : static_cast<int>(i));
        return;
      }
      reject(name, text, expected());
    }
    case Field::kString:
      field.set_string(config, text);
      return;
  }
}

void Setting::check(const Config& config, const std::string* written) const {
  auto refuse = [&](int end) { reject(name, written ? *written : text(config), expected(end)); };
  if (field.type == Field::kFloating || field.type == Field::kIntegral) {
    if (const int end = kind.outside(field.number(config))) refuse(end);
  } else if (field.type == Field::kString && kind.names) {
    const std::vector<std::string>& names = kind.names();
    if (std::find(names.begin(), names.end(), field.string(config)) == names.end()) refuse(0);
  }
}

void Setting::check_available(const Config& config, const std::string* written) const {
  if (kind.available && !kind.available(text(config))) {
    reject(name, written ? *written : text(config), kind.unavailable);
  }
}

std::string Setting::text(const Config& config) const {
  switch (field.type) {
    case Field::kFloating:
      return fmt::format("{}", static_cast<double>(field.number(config)));
    case Field::kIntegral:
      return integer_text(field.number(config));
    case Field::kBool:
    case Field::kEnum: {
      const int code = field.code(config);
      const std::vector<std::string>& names = choices();
      for (size_t i = 0; i < names.size(); ++i) {
        if ((kind.code ? kind.code(i) : static_cast<int>(i)) == code) return names[i];
      }
      return std::to_string(code);
    }
    case Field::kString:
      return field.string(config);
    case Field::kNone:
      break;
  }
  return "";
}

std::string Setting::agreed(const Config& config) const {
  if (field.type == Field::kFloating) {
    std::ostringstream os;
    os.precision(17);
    os << static_cast<double>(field.number(config));
    return os.str();
  }
  const std::string value = text(config);
  return kind.compare_as ? kind.compare_as(value) : value;
}

std::string Setting::expected(int end, const FlagUnit* in) const {
  switch (kind.type) {
    case Kind::kPath:
      return "a path";
    case Kind::kBoolean:
      return or_list(choices());
    case Kind::kChoice:
      // A string field is checked by validate(), which lists the names; an enum (or a preset)
      // as it is read.
      return field.type == Field::kString ? "one of " + comma_list(choices()) : or_list(choices());
    case Kind::kReal:
    case Kind::kInteger:
      break;
  }
  const long double scale = in ? in->scale : 1;
  auto bound = [&](const Bound& b) { return bound_text(b.value / scale); };
  std::string s = in ? in->unit : kind.unit;
  if (kind.separate_ends && end != 0) {
    const Bound& b = end < 0 ? kind.lo : kind.hi;
    s += (end < 0 ? (b.open ? " > " : " >= ") : (b.open ? " < " : " <= ")) + bound(b);
  } else if (kind.lo.present && kind.hi.present) {
    s += std::string(" in ") + (kind.lo.open ? "(" : "[") + bound(kind.lo) + ", " + bound(kind.hi) +
         (kind.hi.open ? ")" : "]");
  } else if (kind.lo.present) {
    s += (kind.lo.open ? " > " : " >= ") + bound(kind.lo);
  } else if (kind.hi.present) {
    s += (kind.hi.open ? " < " : " <= ") + bound(kind.hi);
  }
  // The example is in the variable's unit.
  if (kind.example_text && !in) s += std::string(", e.g. ") + kind.example_text;
  if (kind.note_text) s += std::string(" (") + kind.note_text + ")";
  return s;
}

const std::vector<std::string>& Setting::choices() const {
  static const std::vector<std::string> none;
  return kind.names ? kind.names() : none;
}

std::vector<std::string> Setting::invalid_texts() const {
  std::vector<std::string> texts;
  if (field.type == Field::kFloating || field.type == Field::kIntegral) {
    texts.push_back("1x");
    if (kind.lo.present) texts.push_back(bound_text(kind.lo.value - (kind.lo.open ? 0 : 1)));
    if (kind.hi.present) texts.push_back(bound_text(kind.hi.value + (kind.hi.open ? 0 : 1)));
  } else if (!choices().empty()) {
    texts.push_back("not-" + choices().front());
  }
  return texts;
}

}  // namespace settings

const std::vector<std::string>& config_variables() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const settings::Setting& s : settings::all()) v.push_back(s.name);
    return v;
  }();
  return names;
}

std::vector<std::pair<std::string, std::string>> must_match_settings(const Config& config) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const settings::Setting& s : settings::all()) {
    if (s.role == settings::Setting::kField && s.agreement == settings::Agreement::kEveryRank) {
      pairs.emplace_back(s.name, s.agreed(config));
    }
  }
  return pairs;
}

namespace {

// The enum value of `variable`'s text `value` (a row of one_of()).
int enum_code(const char* variable, const std::string& value) {
  const settings::Setting& s = *settings::find(variable);
  const std::vector<std::string>& names = s.choices();
  for (size_t i = 0; i < names.size(); ++i) {
    if (value == names[i]) return s.kind.code(i);
  }
  settings::reject(variable, value, s.expected());
}

}  // namespace

FeedbackInit ef_init_of(const Config& config) {
  return static_cast<FeedbackInit>(enum_code(kEnvEfInit, config.ef_init));
}

CudaTransport cuda_transport_of(const Config& config) {
  return static_cast<CudaTransport>(enum_code(kEnvCudaTransport, config.cuda_transport));
}

}  // namespace arcreduce
