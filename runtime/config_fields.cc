#include "runtime/config_fields.h"

#include <sstream>

#include "arcreduce/build_config.h"

namespace arcreduce {

const std::vector<std::string>& config_variables() {
  static const std::vector<std::string> vars = {kEnvPreset,
                                                kEnvCompressor,
                                                kEnvCompressRatio,
                                                kEnvSketchRank,
                                                kEnvErrorFeedback,
                                                kEnvEfEta,
                                                kEnvEfMomentum,
                                                kEnvWarmupSteps,
                                                kEnvMinCompressElements,
                                                kEnvSeed,
                                                kEnvFusionThreshold,
                                                kEnvCycleTimeMs,
                                                kEnvCacheCapacity,
                                                kEnvTimeline,
                                                kEnvStallCheckSeconds,
                                                kEnvStallShutdownSeconds,
                                                kEnvLogLevel,
                                                kEnvAllreduceAlgorithm,
                                                kEnvGranularity,
                                                kEnvEfInit,
                                                kEnvCheckConsistency,
                                                kEnvEfMasking,
                                                kEnvRowLength,
                                                kEnvRandomRows,
                                                kEnvOkTopkTau,
                                                kEnvOkTopkTauPrime,
                                                kEnvOkTopkRebalance,
                                                kEnvPowerSgdRank,
                                                kEnvCudaTransport,
                                                kEnvWaitMode,
                                                kEnvWaitMaxSleepUs,
                                                kEnvWaitSpinUs,
                                                kEnvBatchGapUs,
                                                kEnvMinBucketBytes,
                                                kEnvBatchCompressed};
  return vars;
}

std::vector<std::pair<std::string, std::string>> must_match_settings(const Config& c) {
  auto str = [](auto v) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
  };
  return {
      {kEnvSketchRank, str(c.sketch_rank)},
      {kEnvEfEta, str(c.ef_momentum)},
      {kEnvWarmupSteps, str(c.warmup_steps)},
      {kEnvMinCompressElements, str(c.min_compress_elements)},
      {kEnvSeed, str(c.seed)},
      {kEnvFusionThreshold, str(c.fusion_threshold)},
      {kEnvCacheCapacity, str(c.cache_capacity)},
      {kEnvAllreduceAlgorithm, c.allreduce_algorithm},
      {kEnvEfInit, c.ef_init},
      {kEnvCheckConsistency, str(c.check_consistency)},
      {kEnvEfMasking, str(c.ef_masking)},
      {kEnvRowLength, str(c.row_length)},
      {kEnvRandomRows, str(c.random_rows)},
      {kEnvOkTopkTau, str(c.oktopk_tau)},
      {kEnvOkTopkTauPrime, str(c.oktopk_tau_prime)},
      {kEnvOkTopkRebalance, str(c.oktopk_rebalance)},
      {kEnvPowerSgdRank, str(c.powersgd_rank)},
      {kEnvCudaTransport, cuda_transport_family(c.cuda_transport, ARCREDUCE_NCCL != 0)},
  };
}

std::string cuda_transport_family(const std::string& cuda_transport, bool nccl_built) {
  const bool nccl = cuda_transport == "nccl" || (cuda_transport == "auto" && nccl_built);
  return nccl ? "nccl" : "mpi";
}

}  // namespace arcreduce
