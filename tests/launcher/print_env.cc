// Test program for arcrun's end-to-end tests (no MPI calls): every rank prints
//   rank R: NAME=VALUE      for each ARCREDUCE_* variable and each NAME given with --show NAME
//   rank R: arg=WORD        for each argument after the options
// in one write, then exits 0, or with code C on rank K when given --exit-on K C.
// With --fail-launches K, rank 0 counts the launches of a job that arcrun restarts, in the file
// "launches" of $ARCRUN_ELASTIC_DIR (one byte appended per launch), prints
//   rank 0: launch=N
// and exits with 3 while N <= K. --sleep S adds "rank R: pid=P" and sleeps S seconds after the
// write.
// The rank comes from the launcher's environment (Open MPI or MPICH Hydra).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// Appends one byte to $ARCRUN_ELASTIC_DIR/launches and returns the file's size after it; 0
// when the variable is missing or the file cannot be written.
long count_launch() {
  const char* dir = std::getenv("ARCRUN_ELASTIC_DIR");
  if (dir == nullptr) return 0;
  const std::string path = std::string(dir) + "/launches";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return 0;
  struct stat info;
  const bool ok = write(fd, "x", 1) == 1 && fstat(fd, &info) == 0;
  close(fd);
  return ok ? static_cast<long>(info.st_size) : 0;
}

}  // namespace

extern char** environ;

int main(int argc, char** argv) {
  const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank_text == nullptr) rank_text = std::getenv("PMI_RANK");
  const int rank = rank_text ? std::atoi(rank_text) : -1;
  const std::string prefix = "rank " + std::to_string(rank) + ": ";
  std::string out;
  int exit_rank = -1;
  int exit_code = 0;
  long fail_launches = -1;
  int sleep_seconds = 0;
  int i = 1;
  for (; i < argc; ++i) {
    if (std::strcmp(argv[i], "--exit-on") == 0 && i + 2 < argc) {
      exit_rank = std::atoi(argv[++i]);
      exit_code = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--fail-launches") == 0 && i + 1 < argc) {
      fail_launches = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--sleep") == 0 && i + 1 < argc) {
      sleep_seconds = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--show") == 0 && i + 1 < argc) {
      const char* value = std::getenv(argv[++i]);
      if (value != nullptr) out += prefix + argv[i] + "=" + value + "\n";
    } else {
      break;
    }
  }
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "ARCREDUCE_", 10) == 0) out += prefix + *entry + "\n";
  }
  for (; i < argc; ++i) out += prefix + "arg=" + argv[i] + "\n";
  if (sleep_seconds > 0) out += prefix + "pid=" + std::to_string(getpid()) + "\n";
  long launch = 0;
  if (fail_launches >= 0 && rank == 0) {
    launch = count_launch();
    out += prefix + "launch=" + std::to_string(launch) + "\n";
  }
  if (write(STDOUT_FILENO, out.data(), out.size()) < 0) return 1;
  if (sleep_seconds > 0) sleep(static_cast<unsigned>(sleep_seconds));
  if (fail_launches >= 0 && rank == 0 && launch <= fail_launches) return 3;
  return rank == exit_rank ? exit_code : 0;
}
