// What every benchmark table states besides its numbers (BENCHMARKS.md, "Rules"): robust
// statistics of repeated timings and a description of the run's date and machine.
#pragma once

#include <string>
#include <vector>

namespace arcreduce::bench {

struct Summary {
  double median = 0;
  double p90 = 0;  // nearest-rank 90th percentile
  double min = 0;
};

// Statistics of `samples` (all zeros when empty).
Summary summarize(std::vector<double> samples);

// "2025-01-31 12:00:00 UTC".
std::string utc_now();
// "2 CPUs (model name), 23.4 GiB" from sysconf and /proc/cpuinfo where present.
std::string machine_description();
// First line of MPI_Get_library_version (call after MPI_Init).
std::string mpi_library();

}  // namespace arcreduce::bench
