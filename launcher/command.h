// Turns parsed options into the mpirun command (argv array plus mpirun's own environment), and
// prints such a command for --dry-run / --verbose. Pure functions: everything about the machine
// and the caller comes in through LaunchContext.
#pragma once

#include <string>

#include "launcher/launch_options.h"

namespace arcreduce::launcher {

// Builds the command for context.flavor. Throws UsageError for requests that cannot run: more
// ranks than the slots of the given hosts without --oversubscribe, or an option the flavour
// does not support (docs/launcher.md, "MPICH").
//
// Variables reach the ranks in this order of precedence, later winning: the caller's ARCREDUCE_*
// variables and ARCRUN_ELASTIC_DIR (forwarded by name), -x NAME[=VALUE], the runtime flags, then
// arcrun's own: ARCRUN_ELASTIC_DIR=options.elastic_dir where that is set, and
// ARCRUN_RESTART=options.restart when options.restarts > 0. They are emitted sorted by name so
// that the command is deterministic.
Command build_command(const LaunchOptions& options, const LaunchContext& context);

// Quotes `word` for a POSIX shell: unchanged when it holds only safe characters, otherwise in
// single quotes (a quote inside becomes '\'').
std::string shell_quote(const std::string& word);

// "VAR=value ... argv0 argv1 ...", every word shell-quoted: pasting it into a shell runs exactly
// what arcrun execs.
std::string format_command(const Command& command);

}  // namespace arcreduce::launcher
