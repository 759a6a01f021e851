#include "ops/allreduce_algorithm.h"

#include <algorithm>
#include <cctype>

#include "arcreduce/status.h"

namespace arcreduce {

const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kAuto:
      return "auto";
    case AllreduceAlgorithm::kRing:
      return "ring";
    case AllreduceAlgorithm::kMpi:
      return "mpi";
    case AllreduceAlgorithm::kDoubling:
      return "doubling";
    case AllreduceAlgorithm::kRabenseifner:
      return "rabenseifner";
    case AllreduceAlgorithm::kThresholds:
      return "thresholds";
  }
  return "unknown";
}

namespace {

std::string trimmed_lower(const std::string& value) {
  size_t begin = 0, end = value.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(value[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(value[end - 1]))) --end;
  std::string lower;
  for (size_t i = begin; i < end; ++i) {
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(value[i])));
  }
  return lower;
}

}  // namespace

AllreduceAlgorithm parse_allreduce_algorithm(const std::string& value,
                                             const std::string& variable) {
  const std::string lower = trimmed_lower(value);
  for (AllreduceAlgorithm a :
       {AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kRing, AllreduceAlgorithm::kMpi,
        AllreduceAlgorithm::kDoubling, AllreduceAlgorithm::kRabenseifner,
        AllreduceAlgorithm::kThresholds}) {
    if (lower == allreduce_algorithm_name(a)) return a;
  }
  throw Error(variable + "='" + value +
                  "' is not a valid allreduce algorithm; accepted: auto, "
                  "ring, mpi, doubling, rabenseifner, thresholds",
              StatusCode::kInvalidArgument);
}

const char* hierarchy_name(Hierarchy hierarchy) {
  switch (hierarchy) {
    case Hierarchy::kAuto:
      return "auto";
    case Hierarchy::kOff:
      return "0";
    case Hierarchy::kOn:
      return "1";
    case Hierarchy::kLeader:
      return "leader";
  }
  return "unknown";
}

Hierarchy parse_hierarchy(const std::string& value, const std::string& variable) {
  const std::string lower = trimmed_lower(value);
  if (lower == "auto") return Hierarchy::kAuto;
  if (lower == "0" || lower == "off" || lower == "false") return Hierarchy::kOff;
  if (lower == "1" || lower == "on" || lower == "true") return Hierarchy::kOn;
  if (lower == "leader") return Hierarchy::kLeader;
  throw Error(variable + "='" + value + "' is not valid; accepted: auto, 0, 1, leader",
              StatusCode::kInvalidArgument);
}

AllreduceAlgorithm resolve_allreduce_algorithm(AllreduceAlgorithm algorithm, size_t bytes, int size,
                                               int local_size, size_t ring_threshold_bytes) {
  if (algorithm != AllreduceAlgorithm::kAuto && algorithm != AllreduceAlgorithm::kThresholds) {
    return algorithm;
  }
  // On one host the MPI library's shared-memory allreduce is at least as good as ours, and its
  // waits poll no sockets. Across hosts its default choice for large messages is markedly slower
  // than the ring, and its non-blocking collectives make every wait for small ones poll in
  // bursts (docs/design/communicators-allreduce.md).
  if (local_size >= size) return AllreduceAlgorithm::kMpi;
  if (bytes >= ring_threshold_for(size, ring_threshold_bytes)) return AllreduceAlgorithm::kRing;
  return size > 2 && bytes >= ring_threshold_bytes ? AllreduceAlgorithm::kRabenseifner
                                                   : AllreduceAlgorithm::kDoubling;
}

size_t ring_threshold_for(int size, size_t ring_threshold_bytes) {
  if (size == 2) return kTwoRankRingThresholdBytes;
  if (size <= kRingThresholdRanks) return ring_threshold_bytes;
  return ring_threshold_bytes / kRingThresholdRanks * static_cast<size_t>(size);
}

bool allreduce_by_host(Hierarchy hierarchy, size_t bytes, int hosts, size_t ring_threshold_bytes) {
  if (hierarchy == Hierarchy::kOff || hosts < 2) return false;
  if (hierarchy == Hierarchy::kOn) return true;
  return resolve_allreduce_algorithm(AllreduceAlgorithm::kThresholds, bytes, hosts, 1,
                                     ring_threshold_bytes) == AllreduceAlgorithm::kRing;
}

size_t ring_segment_bytes_for(size_t requested, int local_size, int size,
                              size_t max_message_bytes) {
  if (requested == 0) {
    requested = local_size < size ? kMultiHostRingSegmentBytes : kSingleHostRingSegmentBytes;
  }
  return std::clamp<size_t>(requested, 1, std::max<size_t>(max_message_bytes, 1));
}

}  // namespace arcreduce
