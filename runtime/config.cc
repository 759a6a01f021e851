#include "arcreduce/config.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "arcreduce/status.h"
#include "runtime/config_fields.h"

extern char** environ;

namespace arcreduce {
namespace {

using settings::Setting;

// Range and choice checks of every row (settings.inc), shared by validate() and from_env();
// `written` holds the environment's spelling of a value so that messages quote what the user
// wrote. What this build can do is checked after what every build accepts.
void validate_config(const Config& c, const std::map<std::string, std::string>& written) {
  auto as_written = [&](const Setting& s) -> const std::string* {
    auto it = written.find(s.name);
    return it != written.end() ? &it->second : nullptr;
  };
  for (const Setting& s : settings::all()) {
    if (s.role == Setting::kField) s.check(c, as_written(s));
  }
  for (const Setting& s : settings::all()) {
    if (s.role == Setting::kField) s.check_available(c, as_written(s));
  }
}

// A former name (`alias`, set to `value`, already read into `c`): refused where the variable that
// replaces it is set to a different value; otherwise a warning, once per process and name
// (bindings read the configuration at every step).
void accept_former_name(const Setting& alias, const std::string& value,
                        const std::map<std::string, std::string>& env, const Config& c) {
  const Setting& renamed = *settings::find(alias.alias_of);
  auto it = env.find(renamed.name);
  if (it != env.end()) {
    Config replacing;
    renamed.read(it->second, &replacing);
    // Numbers compare as numbers ("0.05" and "5e-2" agree).
    const bool numeric = alias.field.type == settings::Field::kFloating ||
                         alias.field.type == settings::Field::kIntegral;
    const bool same = numeric ? renamed.field.number(replacing) == alias.field.number(c)
                              : renamed.text(replacing) == alias.text(c);
    if (!same) {
      settings::reject(
          alias.name, value,
          std::string("the value of ") + renamed.name + ", which replaces it (both are set)");
    }
  }
  static std::mutex mutex;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.insert(alias.name).second) return;
  }
  std::fprintf(stderr, "arcreduce: warning: %s is deprecated: %s; use %s\n", alias.name,
               alias.deprecation(value, c).c_str(), renamed.name);
}

}  // namespace

void Config::validate() const {
  validate_config(*this, {});
}

Config Config::preset(const std::string& name) {
  Config c;
  if (name == "default") return c;
  if (name != "paper") settings::reject(kEnvPreset, name, settings::find(kEnvPreset)->expected());
  // ARC-Top-K as its paper runs it. The paper does not give EF21M's eta or how its state starts:
  // those keep the runtime's defaults (ef_momentum, ef_init).
  c.compressor = "arctopk";
  c.compress_ratio = 0.2;
  c.sketch_rank = 4;
  c.row_length = 0;  // the tensor's natural rows
  c.random_rows = 0;
  c.error_feedback = "ef21m";
  c.warmup_steps = 1000;
  return c;
}

Config Config::from_env() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq || std::strncmp(*e, "ARCREDUCE_", 10) != 0) continue;
    env.emplace(std::string(*e, eq - *e), std::string(eq + 1));
  }
  for (const auto& kv : env) {
    if (settings::find(kv.first)) continue;
    std::string list;
    for (const auto& k : config_variables()) list += (list.empty() ? "" : ", ") + k;
    throw Error(kv.first + "='" + kv.second + "' is not an arcreduce variable (known: " + list +
                ")");
  }
  Config c;
  // The preset first, so that the variables it sets can still be set one by one.
  for (const Setting& s : settings::all()) {
    auto it = env.find(s.name);
    if (s.role == Setting::kPreset && it != env.end()) s.read(it->second, &c);
  }
  for (const Setting& s : settings::all()) {
    auto it = env.find(s.name);
    if (s.role == Setting::kPreset || it == env.end()) continue;
    s.read(it->second, &c);
    if (s.role == Setting::kAlias) accept_former_name(s, it->second, env, c);
  }
  // A compressor, ratio or preset the user chose is obeyed as chosen, unless they also asked for
  // the automatic choice.
  const auto preset = env.find("ARCREDUCE_PRESET");
  const bool chosen = env.count("ARCREDUCE_COMPRESSOR") || env.count("ARCREDUCE_COMPRESS_RATIO") ||
                      (preset != env.end() && preset->second != "default");
  if (chosen && !env.count("ARCREDUCE_AUTO_COMPRESS")) c.auto_compress = false;
  validate_config(c, env);
  return c;
}

}  // namespace arcreduce
