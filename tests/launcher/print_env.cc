// Test program for arcrun's end-to-end tests (no MPI calls): every rank prints
//   rank R: NAME=VALUE      for each ARCREDUCE_* variable and each NAME given with --show NAME
//   rank R: arg=WORD        for each argument after the options
// in one write, then exits 0, or with code C on rank K when given --exit-on K C.
// The rank comes from the launcher's environment (Open MPI or MPICH Hydra).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

extern char** environ;

int main(int argc, char** argv) {
  const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank_text == nullptr) rank_text = std::getenv("PMI_RANK");
  const int rank = rank_text ? std::atoi(rank_text) : -1;
  const std::string prefix = "rank " + std::to_string(rank) + ": ";
  std::string out;
  int exit_rank = -1;
  int exit_code = 0;
  int i = 1;
  for (; i < argc; ++i) {
    if (std::strcmp(argv[i], "--exit-on") == 0 && i + 2 < argc) {
      exit_rank = std::atoi(argv[++i]);
      exit_code = std::atoi(argv[++i]);
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
  if (write(STDOUT_FILENO, out.data(), out.size()) < 0) return 1;
  return rank == exit_rank ? exit_code : 0;
}
