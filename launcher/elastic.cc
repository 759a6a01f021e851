#include "launcher/elastic.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "launcher/hosts.h"
#include "launcher/mpi_flavor.h"

extern char** environ;

namespace arcreduce::launcher {
namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr size_t kMaxDiscoveryOutput = 1 << 20;

volatile sig_atomic_t g_stop = 0;           // the first stop signal
volatile sig_atomic_t g_child = 0;          // the process stop signals are forwarded to, 0: none
volatile sig_atomic_t g_child_session = 0;  // 1: g_child leads a session of its own
bool g_handled[NSIG] = {};                  // stop signals whose handler is arcrun's

void on_stop(int sig, siginfo_t* info, void*) {
  if (g_stop == 0) g_stop = sig;
  const pid_t child = g_child;
  // A child in a session of its own gets every signal from arcrun alone, exactly once. One in
  // arcrun's process group got a signal the kernel sent to the group (a terminal's Ctrl-C) too.
  if (child > 0 && (g_child_session != 0 || info->si_code != SI_KERNEL)) kill(child, sig);
}

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kStopSignals) sigaddset(&set, sig);
  return set;
}

// Blocks the stop signals for its lifetime, so that the handler never sees g_child half-set.
class StopSignalsBlocked {
 public:
  StopSignalsBlocked() {
    const sigset_t set = stop_set();
    sigprocmask(SIG_BLOCK, &set, &old_);
  }
  ~StopSignalsBlocked() { sigprocmask(SIG_SETMASK, &old_, nullptr); }
  StopSignalsBlocked(const StopSignalsBlocked&) = delete;
  StopSignalsBlocked& operator=(const StopSignalsBlocked&) = delete;
  const sigset_t& old() const { return old_; }

 private:
  sigset_t old_;
};

std::vector<std::string> current_environment() {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) entries.push_back(*entry);
  return entries;
}

std::string count(int n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// Whether `pid` has ended, without reaping it.
bool has_ended(pid_t pid) {
  siginfo_t info;
  info.si_pid = 0;
  return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid != 0;
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_sigaction = on_stop;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int sig : kStopSignals) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    // nohup: SIGHUP stays ignored, by arcrun and by the job. SIGINT and SIGTERM do not: a shell
    // ignores SIGINT in a job it starts in the background, but mpirun handles both anyway,
    // so arcrun must see them to tell a stop from a failure.
    if (sig == SIGHUP && old.sa_handler == SIG_IGN) continue;
    sigaction(sig, &action, nullptr);
    g_handled[sig] = true;
  }
}

int stop_signal() {
  return g_stop;
}

pid_t start_process(const std::vector<std::string>& argv, const std::vector<std::string>& envp,
                    int stdout_fd, bool own_session, const std::string& what, int exit_code) {
  std::vector<char*> args;
  std::vector<char*> env;
  for (const std::string& word : argv) args.push_back(const_cast<char*>(word.c_str()));
  for (const std::string& entry : envp) env.push_back(const_cast<char*>(entry.c_str()));
  args.push_back(nullptr);
  env.push_back(nullptr);
  int report[2];  // the child's errno when execve fails; closed by a successful one
  if (pipe2(report, O_CLOEXEC) != 0)
    throw UsageError(what + ": " + std::strerror(errno), exit_code);
  pid_t pid = -1;
  int fork_error = 0;
  {
    StopSignalsBlocked blocked;
    pid = fork();
    if (pid == 0) {
      for (int sig : kStopSignals) {
        if (g_handled[sig]) signal(sig, SIG_DFL);
      }
      if (stdout_fd >= 0) dup2(stdout_fd, STDOUT_FILENO);
      if (own_session) setsid();
      sigprocmask(SIG_SETMASK, &blocked.old(), nullptr);
      execve(args[0], args.data(), env.data());
      const int error = errno;
      if (write(report[1], &error, sizeof(error)) < 0) _exit(127);
      _exit(127);
    }
    fork_error = errno;
    if (pid > 0) {
      g_child = pid;
      g_child_session = own_session ? 1 : 0;
    }
  }
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    throw UsageError(what + ": " + std::strerror(fork_error), exit_code);
  }
  int error = 0;
  ssize_t got = 0;
  do {
    got = read(report[0], &error, sizeof(error));
  } while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(error))) {
    wait_process(pid);
    throw UsageError(what + ": " + std::strerror(error), exit_code);
  }
  return pid;
}

int wait_process(pid_t pid) {
  siginfo_t info;
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  StopSignalsBlocked blocked;  // no forwarding to a pid that is reaped (and may be reused)
  if (g_child == pid) g_child = 0;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127 << 8;
  }
  return status;
}

std::string describe_status(int wait_status) {
  if (WIFSIGNALED(wait_status)) return "signal " + std::to_string(WTERMSIG(wait_status));
  return "status " + std::to_string(WEXITSTATUS(wait_status));
}

std::vector<Host> discover_hosts(const std::string& script, const std::string& path,
                                 int timeout_ms) {
  const std::string where = "--host-discovery-script '" + script + "'";
  const std::string program = find_executable(script, path);
  if (program.empty()) throw UsageError(where + " cannot be run: no executable file of that name");
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    throw UsageError(where + " cannot be run: " + std::strerror(errno));
  }
  pid_t pid = -1;
  try {
    pid = start_process({program}, current_environment(), out[1], /*own_session=*/false,
                        where + " cannot be run", 2);
  } catch (...) {
    close(out[0]);
    close(out[1]);
    throw;
  }
  close(out[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string text;
  bool eof = false;
  bool ended = false;
  std::string failure;
  while (!(eof && ended) && failure.empty()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%g", timeout_ms / 1000.0);
      failure = where + " did not finish within " + seconds + " s (it was killed)";
      break;
    }
    if (!eof) {
      pollfd readable{out[0], POLLIN, 0};
      // Once the script has ended, take what its pipe holds: a process it left behind may
      // keep the pipe open.
      const int ready = poll(&readable, 1, ended ? 0 : 50);
      if (ready > 0) {
        char buffer[4096];
        const ssize_t got = read(out[0], buffer, sizeof(buffer));
        if (got > 0) {
          text.append(buffer, static_cast<size_t>(got));
          if (text.size() > kMaxDiscoveryOutput) failure = where + " printed more than 1 MiB";
        } else if (got == 0 || errno != EINTR) {
          eof = true;
        }
      } else if (ready == 0 && ended) {
        eof = true;
      }
    } else {
      poll(nullptr, 0, 10);
    }
    if (!ended) ended = has_ended(pid);
  }
  close(out[0]);
  if (!ended) kill(pid, SIGKILL);
  const int status = wait_process(pid);
  if (!failure.empty()) throw UsageError(failure);
  if (WIFSIGNALED(status) || WEXITSTATUS(status) != 0) {
    throw UsageError(where + " ended with " + describe_status(status) + " (expected 0)");
  }
  return parse_discovered_hosts(text, where);
}

LaunchOptions place_on_hosts(const LaunchOptions& options, const std::vector<Host>& hosts) {
  const int slots = total_slots(hosts);
  const int fewest = options.min_ranks.value_or(options.ranks);
  const int most = options.max_ranks.value_or(options.ranks);
  if (slots < fewest) {
    throw UsageError("--min-np " + std::to_string(fewest) +
                     (options.min_ranks ? "" : " (-np, as --min-np is not given)") +
                     ": the hosts of --host-discovery-script have " + count(slots, "slot") + " (" +
                     format_host_list(hosts) + "); not starting the job with fewer than " +
                     std::to_string(fewest) + " ranks");
  }
  LaunchOptions launch = options;
  launch.hosts = hosts;
  launch.ranks = std::min(slots, most);
  return launch;
}

bool needs_elastic_dir(const LaunchOptions& options, const std::vector<std::string>& environment) {
  if (options.restarts == 0 || !options.elastic_dir.empty()) return false;
  for (const EnvSetting& setting : options.exported) {
    if (setting.name == kElasticDirVariable) return false;
  }
  const std::string prefix = std::string(kElasticDirVariable) + "=";
  return std::none_of(environment.begin(), environment.end(), [&prefix](const std::string& e) {
    return e.rfind(prefix, 0) == 0 && e.size() > prefix.size();
  });
}

std::string elastic_dir_template() {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = (tmp != nullptr && tmp[0] != '\0') ? tmp : "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return base + "/arcrun-elastic-XXXXXX";
}

std::string make_elastic_dir() {
  std::string path = elastic_dir_template();
  if (mkdtemp(path.data()) == nullptr) {
    throw UsageError("cannot create a directory for " + std::string(kElasticDirVariable) + " (" +
                         elastic_dir_template() + "): " + std::strerror(errno) +
                         "; name one with --elastic-dir",
                     1);
  }
  return path;
}

std::string restart_message(int wait_status, const LaunchOptions& launch) {
  const std::string where = launch.hosts.empty()
                                ? "on this machine"
                                : "on " + count(static_cast<int>(launch.hosts.size()), "host");
  return "the job ended with " + describe_status(wait_status) + " (restart " +
         std::to_string(launch.restart) + " of " + std::to_string(launch.restarts) +
         "): starting it again " + where + ", " + count(launch.ranks, "rank");
}

std::string give_up_message(const std::vector<int>& wait_statuses, int restarts) {
  // Runs of one status are written once with their length: "status 3 (x4), signal 9".
  std::string list;
  for (size_t i = 0; i < wait_statuses.size();) {
    size_t end = i + 1;
    while (end < wait_statuses.size() && wait_statuses[end] == wait_statuses[i]) ++end;
    list += (list.empty() ? "" : ", ") + describe_status(wait_statuses[i]);
    if (end - i > 1) list += " (x" + std::to_string(end - i) + ")";
    i = end;
  }
  const int launches = static_cast<int>(wait_statuses.size());
  return "the job failed " + count(launches, "time") + " (" + list + "), on its first launch and " +
         count(launches - 1, "restart") + " (--restarts " + std::to_string(restarts) +
         "): not starting it again";
}

}  // namespace arcreduce::launcher
