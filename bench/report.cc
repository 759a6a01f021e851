#include "bench/report.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>

namespace arcreduce::bench {

Summary summarize(std::vector<double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.min = samples.front();
  s.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  const size_t rank90 = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n)));
  s.p90 = samples[std::max<size_t>(rank90, 1) - 1];
  return s;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

namespace {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "unknown CPU";
}

}  // namespace

std::string machine_description() {
  const double memory_gib = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                            static_cast<double>(sysconf(_SC_PAGE_SIZE)) / (1 << 30);
  std::ostringstream out;
  out.precision(3);
  out << sysconf(_SC_NPROCESSORS_ONLN) << " CPUs (" << cpu_model() << "), " << memory_gib << " GiB";
  return out.str();
}

std::string mpi_library() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<size_t>(length));
  const size_t end = text.find_first_of(",\n");
  return text.substr(0, end);
}

}  // namespace arcreduce::bench
