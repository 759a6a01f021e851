// Names of the ARCREDUCE_* variables (one place, so messages, docs and launchers agree) and
// the must-match subset that every rank has to share.
#pragma once

#include <string>
#include <vector>

#include "arcreduce/config.h"

namespace arcreduce {

constexpr const char* kEnvPreset = "ARCREDUCE_PRESET";
constexpr const char* kEnvCompressor = "ARCREDUCE_COMPRESSOR";
constexpr const char* kEnvCompressRatio = "ARCREDUCE_COMPRESS_RATIO";
constexpr const char* kEnvSketchRank = "ARCREDUCE_SKETCH_RANK";
constexpr const char* kEnvErrorFeedback = "ARCREDUCE_ERROR_FEEDBACK";
constexpr const char* kEnvEfEta = "ARCREDUCE_EF_ETA";
// The former name of ARCREDUCE_EF_ETA (it always held eta = 1 - momentum, which the name hid):
// still read, with a warning; an error where both are set to different values.
constexpr const char* kEnvEfMomentum = "ARCREDUCE_EF_MOMENTUM";
constexpr const char* kEnvWarmupSteps = "ARCREDUCE_WARMUP_STEPS";
constexpr const char* kEnvMinCompressElements = "ARCREDUCE_MIN_COMPRESS_ELEMENTS";
constexpr const char* kEnvSeed = "ARCREDUCE_SEED";
constexpr const char* kEnvFusionThreshold = "ARCREDUCE_FUSION_THRESHOLD";
constexpr const char* kEnvCycleTimeMs = "ARCREDUCE_CYCLE_TIME_MS";
constexpr const char* kEnvCacheCapacity = "ARCREDUCE_CACHE_CAPACITY";
constexpr const char* kEnvTimeline = "ARCREDUCE_TIMELINE";
constexpr const char* kEnvStallCheckSeconds = "ARCREDUCE_STALL_CHECK_SECONDS";
constexpr const char* kEnvStallShutdownSeconds = "ARCREDUCE_STALL_SHUTDOWN_SECONDS";
constexpr const char* kEnvLogLevel = "ARCREDUCE_LOG_LEVEL";
constexpr const char* kEnvAllreduceAlgorithm = "ARCREDUCE_ALLREDUCE_ALGORITHM";
constexpr const char* kEnvGranularity = "ARCREDUCE_GRANULARITY";
constexpr const char* kEnvEfInit = "ARCREDUCE_EF_INIT";
constexpr const char* kEnvCheckConsistency = "ARCREDUCE_CHECK_CONSISTENCY";
constexpr const char* kEnvEfMasking = "ARCREDUCE_EF_MASKING";
constexpr const char* kEnvRowLength = "ARCREDUCE_ROW_LENGTH";
constexpr const char* kEnvRandomRows = "ARCREDUCE_RANDOM_ROWS";
constexpr const char* kEnvOkTopkTau = "ARCREDUCE_OKTOPK_TAU";
constexpr const char* kEnvOkTopkTauPrime = "ARCREDUCE_OKTOPK_TAU_PRIME";
constexpr const char* kEnvOkTopkRebalance = "ARCREDUCE_OKTOPK_REBALANCE";
constexpr const char* kEnvPowerSgdRank = "ARCREDUCE_POWERSGD_RANK";
constexpr const char* kEnvCudaTransport = "ARCREDUCE_CUDA_TRANSPORT";
constexpr const char* kEnvWaitMode = "ARCREDUCE_WAIT_MODE";
constexpr const char* kEnvWaitMaxSleepUs = "ARCREDUCE_WAIT_MAX_SLEEP_US";
constexpr const char* kEnvWaitSpinUs = "ARCREDUCE_WAIT_SPIN_US";
constexpr const char* kEnvBatchGapUs = "ARCREDUCE_BATCH_GAP_US";
constexpr const char* kEnvMinBucketBytes = "ARCREDUCE_MIN_BUCKET_BYTES";
constexpr const char* kEnvBatchCompressed = "ARCREDUCE_BATCH_COMPRESSED";

// Every variable Config::from_env() accepts.
const std::vector<std::string>& config_variables();
const std::vector<std::string>& compressor_names();
const std::vector<std::string>& error_feedback_names();
const std::vector<std::string>& log_level_names();
const std::vector<std::string>& granularity_names();
// ARCREDUCE_CUDA_TRANSPORT: "auto", "nccl", "mpi" (choose_cuda_transport() in
// ops/mpi_cuda_support.h says what each means).
const std::vector<std::string>& cuda_transport_names();

// "VAR=value" lines of the settings that must be identical on every rank (fusion and the
// response cache are planned locally; shared randomness and algorithms must agree). The CUDA
// transport is compared as what it means in this build ("nccl" or "mpi"; "auto" is "nccl" in a
// build with NCCL): a rank in NCCL's All-Reduce and one in MPI's would wait for each other
// forever, whereas CUDA-aware MPI and staged MPI calls match each other.
std::vector<std::pair<std::string, std::string>> must_match_settings(const Config& config);
// "nccl" or "mpi": whether `cuda_transport` (a value of ARCREDUCE_CUDA_TRANSPORT) makes a build
// with (`nccl_built`) or without NCCL reduce dense CUDA buckets through NCCL.
std::string cuda_transport_family(const std::string& cuda_transport, bool nccl_built);

}  // namespace arcreduce
