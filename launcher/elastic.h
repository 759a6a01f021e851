// Restarts of a failed job (docs/launcher.md, "Restarts"): the processes arcrun starts and waits
// for when it may launch a job again (mpirun, the host discovery script), signals that stop it,
// where each launch runs, and arcrun's messages about it. arcrun.cc runs the launches.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/launch_options.h"

namespace arcreduce::launcher {

// How long a host discovery script may run before arcrun gives up on it.
inline constexpr int kDiscoveryTimeoutMs = 60 * 1000;

// SIGINT, SIGTERM and SIGHUP stop arcrun instead of ending it: the process it runs gets the
// signal too (forwarded; to a process in arcrun's own process group only when it was not the
// kernel's to the whole group, as a terminal's Ctrl-C is, so that it arrives once), and no job
// is started after it. An ignored SIGHUP (nohup) stays ignored.
void install_stop_handlers();

// The first stop signal received, 0 while none has arrived.
int stop_signal();

// Starts argv[0] (a path) with `envp` ("NAME=VALUE" entries) and, where stdout_fd >= 0, stdout
// on that descriptor; with own_session, in a session of its own (setsid), out of reach of the
// terminal's and the process group's signals, so that it gets each stop signal once, from
// arcrun. Stop signals are forwarded to it until wait_process() reaps it. Throws UsageError
// with `exit_code` and the message `what`: <reason>, when it cannot be executed.
pid_t start_process(const std::vector<std::string>& argv, const std::vector<std::string>& envp,
                    int stdout_fd, bool own_session, const std::string& what, int exit_code);

// Waits for `pid` (retrying on signals) and returns its wait status.
int wait_process(pid_t pid);

// "status 3" for an exit code, "signal 9" for a process ended by a signal.
std::string describe_status(int wait_status);

// Runs the host discovery script: no shell and no arguments (a name without '/' is looked up
// in `path`, as a shell would), with arcrun's environment. Returns the hosts it printed
// (parse_discovered_hosts). Throws UsageError naming --host-discovery-script when it cannot be
// run, runs past timeout_ms (it is killed), exits other than with 0 or prints no usable host.
std::vector<Host> discover_hosts(const std::string& script, const std::string& path,
                                 int timeout_ms);

// Where a launch runs on the discovered hosts: ranks = their slots, at most --max-np (default
// -np); fewer than --min-np (default -np) is refused with UsageError naming the numbers. Returns
// `options` with those hosts and that rank count.
LaunchOptions place_on_hosts(const LaunchOptions& options, const std::vector<Host>& hosts);

// Whether arcrun creates ARCRUN_ELASTIC_DIR: restarts are enabled and the caller named no
// directory (--elastic-dir, -x ARCRUN_ELASTIC_DIR, or the variable in `environment`).
bool needs_elastic_dir(const LaunchOptions& options, const std::vector<std::string>& environment);

// Creates an empty directory for the job's commits under $TMPDIR (else /tmp) and returns its
// path; throws UsageError (exit code 1) when it cannot.
std::string make_elastic_dir();

// What mkdtemp's template would look like, for --dry-run (which creates nothing).
std::string elastic_dir_template();

// "the job ended with status 3 (restart 1 of 2): starting it again on 2 hosts, 4 ranks"
std::string restart_message(int wait_status, const LaunchOptions& launch);

// "the job failed 3 times (status 3, status 75, signal 9), the first launch and 2 restarts
// (--restarts 2): not starting it again"
std::string give_up_message(const std::vector<int>& wait_statuses, int restarts);

}  // namespace arcreduce::launcher
