#include "launcher/runtime_flags.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "arcreduce/config.h"
#include "arcreduce/status.h"
#include "launcher/launch_options.h"
#include "launcher/numbers.h"
#include "runtime/config_fields.h"

namespace arcreduce::launcher {
namespace {

using settings::Setting;

// arcrun's numbers: the whole text, no leading blanks (launcher/numbers.h).
const settings::Syntax kFlagSyntax{parse_number, parse_integer, "a number", "an integer"};

// A flag in another unit than its variable (--fusion-threshold-mb): a number of those units,
// within the variable's range and at most the flag's maximum, rounded to the variable's unit.
void read_in_flag_unit(const Setting& s, const std::string& text, Config* config) {
  const settings::FlagUnit& in = s.kind.flag;
  const std::optional<double> units = parse_number(text);
  if (!units) settings::reject(s.name, text, kFlagSyntax.real_expected);
  if (s.kind.outside(*units * in.scale) != 0 || !(*units <= in.max)) {
    settings::reject(s.name, text, s.expected(0, &in));
  }
  s.field.set_number(config, std::llround(*units * in.scale));
}

[[noreturn]] void reject(const RuntimeFlag& flag, const std::string& value,
                         const std::string& expected) {
  throw UsageError(std::string(flag.flag) + " '" + value + "' is invalid (" + flag.variable +
                   "): expected " + expected);
}

}  // namespace

const std::vector<RuntimeFlag>& runtime_flags() {
  static const std::vector<RuntimeFlag> flags = [] {
    std::vector<RuntimeFlag> list;
    for (const Setting& s : settings::all()) {
      if (s.flag) list.push_back({s.flag, s.name, s.flag_help});
    }
    return list;
  }();
  return flags;
}

// The value is read into an otherwise default Config, which Config::validate() then checks: the
// runtime's accepted values and wording, with arcrun's stricter number syntax.
std::string variable_value(const RuntimeFlag& flag, const std::string& value) {
  const Setting* s = settings::find(flag.variable);
  if (!s || !s->flag || std::strcmp(s->flag, flag.flag) != 0) {
    throw UsageError(std::string("internal: unknown runtime flag ") + flag.flag);
  }
  Config config;
  try {
    if (s->kind.flag.unit) {
      read_in_flag_unit(*s, value, &config);
    } else if (s->kind.type == settings::Kind::kPath && value.empty()) {
      // Unset is how the variable says "off"; an empty flag is a mistake.
      settings::reject(s->name, value, s->expected());
    } else {
      s->read(value, &config, kFlagSyntax);
    }
    config.validate();
  } catch (const settings::InvalidSetting& e) {
    reject(flag, value, e.expected());
  } catch (const Error& e) {
    reject(flag, value, e.what());
  }
  return s->kind.flag.unit ? s->text(config) : value;
}

}  // namespace arcreduce::launcher
