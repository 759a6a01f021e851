// CPU an initialised but idle runtime takes: init(), then nothing submitted for --seconds, then
// the coordinator thread's CPU time (Stats::coordinator_cpu_seconds) and the whole process's
// (getrusage: Open MPI's threads included) as a share of one core, per rank. Run it with the
// launcher, e.g. `arcrun -np 4 -- build/bench/idle_bench --seconds 10`.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <mpi.h>
#include <CLI/CLI.hpp>

#include "arcreduce/arcreduce.h"

namespace {

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + 1e-6 * t.tv_usec; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("CPU use of an idle arcreduce runtime");
  double seconds = 10;
  app.add_option("--seconds", seconds, "idle wall time to measure")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  arcreduce::init();
  const arcreduce::Stats before = arcreduce::stats();
  const double process_before = process_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const arcreduce::Stats after = arcreduce::stats();
  std::vector<double> mine{(after.coordinator_cpu_seconds - before.coordinator_cpu_seconds) / wall,
                           (process_cpu_seconds() - process_before) / wall,
                           static_cast<double>(after.cycles - before.cycles) / wall};
  std::vector<double> all(mine.size() * arcreduce::size());
  MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
             static_cast<int>(mine.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (arcreduce::rank() == 0) {
    std::printf("idle runtime, %d ranks, %.1f s each\n", arcreduce::size(), wall);
    std::printf(
        "| rank | coordinator CPU (%% of a core) | process CPU (%% of a core) | cycles/s |\n");
    std::printf("|---|---|---|---|\n");
    for (int r = 0; r < arcreduce::size(); ++r) {
      const double* v = all.data() + r * mine.size();
      std::printf("| %d | %.3f | %.3f | %.1f |\n", r, 100 * v[0], 100 * v[1], v[2]);
    }
  }
  arcreduce::shutdown();
  return 0;
}
