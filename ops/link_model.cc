#include "ops/link_model.h"

#include <cmath>
#include <cstdio>

namespace arcreduce {
namespace {

int log2_floor(int value) {
  int log = 0;
  while ((2 << log) <= value) ++log;
  return log;
}

const AlgorithmCost* measured_cost(AllreduceAlgorithm algorithm, const LinkModel& link) {
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
      return &link.ring;
    case AllreduceAlgorithm::kRabenseifner:
      return &link.rabenseifner;
    case AllreduceAlgorithm::kDoubling:
      return &link.doubling;
    default:
      return nullptr;
  }
}

double textbook_seconds(AllreduceAlgorithm algorithm, size_t bytes, int size,
                        const LinkModel& link) {
  const double b = static_cast<double>(bytes);
  const double a = link.latency_seconds, beta = link.seconds_per_byte;
  const double gamma = link.reduce_seconds_per_byte;
  const int log_p = log2_floor(size);
  const double p = static_cast<double>(1 << log_p), n = static_cast<double>(size);
  const double fold = (1 << log_p) == size ? 0 : 2 * (a + b * beta + b * gamma);
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
      return 2 * (n - 1) * a + 2 * (n - 1) / n * b * beta + (n - 1) / n * b * gamma;
    case AllreduceAlgorithm::kDoubling:
      return log_p * (a + b * beta + b * gamma) + fold;
    case AllreduceAlgorithm::kRabenseifner:
      return 2 * log_p * a + 2 * (p - 1) / p * b * beta + (p - 1) / p * b * gamma + fold;
    default:
      return -1;
  }
}

}  // namespace

double predicted_allreduce_seconds(AllreduceAlgorithm algorithm, size_t bytes, int size,
                                   const LinkModel& link) {
  if (size <= 1 || bytes == 0) return 0;
  const AlgorithmCost* cost = measured_cost(algorithm, link);
  if (cost && size == link.ranks && (cost->fixed_seconds > 0 || cost->seconds_per_byte > 0)) {
    return cost->fixed_seconds + static_cast<double>(bytes) * cost->seconds_per_byte;
  }
  return textbook_seconds(algorithm, bytes, size, link);
}

AllreduceAlgorithm choose_allreduce_algorithm(AllreduceAlgorithm requested, size_t bytes, int size,
                                              int local_size, size_t ring_threshold_bytes,
                                              const LinkModel& link) {
  if (requested != AllreduceAlgorithm::kAuto || !link.measured || local_size >= size) {
    const AllreduceAlgorithm thresholds =
        requested == AllreduceAlgorithm::kAuto ? AllreduceAlgorithm::kThresholds : requested;
    return resolve_allreduce_algorithm(thresholds, bytes, size, local_size, ring_threshold_bytes);
  }
  // Whether the ring runs stays the thresholds' decision, a function of the message size and the
  // rank count alone: the ring sums in another order than the trees, and a choice that followed
  // the measurement across that line would make the same job's results differ from run to run.
  // Below it, the model picks between doubling and Rabenseifner, which give the same bits.
  const AllreduceAlgorithm fixed = resolve_allreduce_algorithm(
      AllreduceAlgorithm::kThresholds, bytes, size, local_size, ring_threshold_bytes);
  if (fixed == AllreduceAlgorithm::kRing || fixed == AllreduceAlgorithm::kMpi) return fixed;
  // At two ranks Rabenseifner sends what doubling sends in one more round: never faster.
  if (size == 2) return AllreduceAlgorithm::kDoubling;
  const double doubling =
      predicted_allreduce_seconds(AllreduceAlgorithm::kDoubling, bytes, size, link);
  const double raben =
      predicted_allreduce_seconds(AllreduceAlgorithm::kRabenseifner, bytes, size, link);
  return doubling < raben ? AllreduceAlgorithm::kDoubling : AllreduceAlgorithm::kRabenseifner;
}

std::string describe_link(const LinkModel& link) {
  if (!link.measured) return "not measured";
  char text[128];
  const double mbit = link.seconds_per_byte > 0 ? 8e-6 / link.seconds_per_byte : INFINITY;
  const double reduce_gb =
      link.reduce_seconds_per_byte > 0 ? 1e-9 / link.reduce_seconds_per_byte : INFINITY;
  std::snprintf(text, sizeof text, "latency %.0f us, %.1f Mbit/s, reduce %.2f GB/s",
                link.latency_seconds * 1e6, mbit, reduce_gb);
  return text;
}

}  // namespace arcreduce
