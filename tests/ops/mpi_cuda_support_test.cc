// Which transport device buffers take: the CUDA-aware detection and its fallbacks.
#include "ops/mpi_cuda_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "arcreduce/status.h"
#include "ops/loopback_communicator.h"

namespace arcreduce {
namespace {

using ::testing::HasSubstr;

TEST(DeviceTransport, CudaAwareOnlyWhenHeadersAndLibraryBothSaySo) {
  std::string reason;
  EXPECT_EQ(choose_device_transport(1, 1, &reason), DeviceTransport::kCudaAwareMpi);
  EXPECT_THAT(reason, HasSubstr("go to MPI directly"));
  for (int compiled : {-1, 0, 1}) {
    for (int runtime : {-1, 0, 1}) {
      if (compiled == 1 && runtime == 1) continue;
      EXPECT_EQ(choose_device_transport(compiled, runtime, &reason),
                DeviceTransport::kPinnedStaging)
          << compiled << " " << runtime;
      EXPECT_THAT(reason, HasSubstr("staged through pinned host memory"));
    }
  }
  choose_device_transport(1, 0, &reason);
  EXPECT_THAT(reason, HasSubstr("headers CUDA-aware: yes, loaded MPI library CUDA-aware: no"));
  choose_device_transport(-1, -1, &reason);
  EXPECT_THAT(reason, HasSubstr("unknown"));
  EXPECT_EQ(choose_device_transport(1, 1, nullptr), DeviceTransport::kCudaAwareMpi);
  EXPECT_STREQ(device_transport_name(DeviceTransport::kPinnedStaging), "pinned-staging");
}

TEST(DeviceTransport, DeviceBufferOnlyThroughMpiOwnSum) {
  const ScalarType types[] = {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16,
                              ScalarType::kBFloat16};
  const AllreduceAlgorithm algorithms[] = {AllreduceAlgorithm::kMpi, AllreduceAlgorithm::kRing};
  for (bool aware : {false, true}) {
    for (ScalarType type : types) {
      for (AllreduceAlgorithm algorithm : algorithms) {
        const bool expect = aware && algorithm == AllreduceAlgorithm::kMpi &&
                            (type == ScalarType::kFloat32 || type == ScalarType::kFloat64);
        EXPECT_EQ(mpi_takes_device_buffer(aware, type, algorithm), expect)
            << aware << " " << scalar_type_name(type) << " " << allreduce_algorithm_name(algorithm);
      }
    }
  }
}

TEST(DeviceTransport, NcclDataTypesAreNcclsValuesForTheFourFloatTypes) {
  // ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 in nccl.h (the NCCL
  // build also checks these at compile time).
  EXPECT_EQ(nccl_data_type(ScalarType::kFloat16), 6);
  EXPECT_EQ(nccl_data_type(ScalarType::kFloat32), 7);
  EXPECT_EQ(nccl_data_type(ScalarType::kFloat64), 8);
  EXPECT_EQ(nccl_data_type(ScalarType::kBFloat16), 9);
  for (ScalarType type :
       {ScalarType::kInt32, ScalarType::kInt64, ScalarType::kUInt8, ScalarType::kUInt64}) {
    EXPECT_EQ(nccl_data_type(type), -1) << scalar_type_name(type);
  }
  EXPECT_STREQ(device_transport_name(DeviceTransport::kNccl), "nccl");
  EXPECT_STREQ(device_transport_name(DeviceTransport::kCudaAwareMpi), "cuda-aware-mpi");
}

// Every combination of setting, build, communicator kind, MPI's answer and type.
TEST(DeviceTransport, CudaTransportChoiceForEveryCombination) {
  const ScalarType types[] = {ScalarType::kFloat32,  ScalarType::kFloat64, ScalarType::kFloat16,
                              ScalarType::kBFloat16, ScalarType::kInt32,   ScalarType::kInt64,
                              ScalarType::kUInt8,    ScalarType::kUInt64};
  for (const std::string setting : {"auto", "nccl", "mpi"}) {
    for (bool nccl_built : {false, true}) {
      for (bool processes : {false, true}) {
        for (bool mpi_takes : {false, true}) {
          for (ScalarType type : types) {
            const std::string where = setting + " nccl_built=" + std::to_string(nccl_built) +
                                      " processes=" + std::to_string(processes) +
                                      " mpi_takes=" + std::to_string(mpi_takes) + " " +
                                      scalar_type_name(type);
            const bool float_type = type == ScalarType::kFloat32 || type == ScalarType::kFloat64 ||
                                    type == ScalarType::kFloat16 || type == ScalarType::kBFloat16;
            const DeviceTransport mpi =
                mpi_takes ? DeviceTransport::kCudaAwareMpi : DeviceTransport::kPinnedStaging;
            if (setting == "nccl" && !nccl_built) {
              try {
                choose_cuda_transport(setting, nccl_built, processes, mpi_takes, type);
                ADD_FAILURE() << "no error: " << where;
              } catch (const Error& e) {
                EXPECT_THAT(e.what(), HasSubstr("ARCREDUCE_CUDA_TRANSPORT='nccl' is invalid"));
                EXPECT_THAT(e.what(), HasSubstr("no NCCL"));
              }
              continue;
            }
            bool nccl = false;
            if (setting == "nccl") nccl = float_type;
            if (setting == "auto") nccl = nccl_built && processes && float_type;
            std::string reason;
            EXPECT_EQ(
                choose_cuda_transport(setting, nccl_built, processes, mpi_takes, type, &reason),
                nccl ? DeviceTransport::kNccl : mpi)
                << where;
            EXPECT_THAT(reason,
                        HasSubstr(device_transport_name(nccl ? DeviceTransport::kNccl : mpi)))
                << where;
          }
        }
      }
    }
  }
}

TEST(DeviceTransport, CudaTransportReasonsSayWhy) {
  std::string reason;
  choose_cuda_transport("auto", false, true, false, ScalarType::kFloat32, &reason);
  EXPECT_THAT(reason, HasSubstr("no NCCL"));
  EXPECT_THAT(reason, HasSubstr("staged"));
  choose_cuda_transport("auto", true, false, true, ScalarType::kFloat32, &reason);
  EXPECT_THAT(reason, HasSubstr("loopback"));
  EXPECT_THAT(reason, HasSubstr("MPI takes the device buffer"));
  choose_cuda_transport("mpi", true, true, false, ScalarType::kFloat16, &reason);
  EXPECT_THAT(reason, HasSubstr("ARCREDUCE_CUDA_TRANSPORT=mpi"));
  choose_cuda_transport("nccl", true, true, false, ScalarType::kInt32, &reason);
  EXPECT_THAT(reason, HasSubstr("NCCL does not sum int32"));
}

TEST(DeviceTransport, UnknownCudaTransportSettingThrows) {
  try {
    choose_cuda_transport("gloo", true, true, true, ScalarType::kFloat32);
    FAIL() << "accepted 'gloo'";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("ARCREDUCE_CUDA_TRANSPORT='gloo'"));
    EXPECT_THAT(e.what(), HasSubstr("auto, nccl, mpi"));
  }
}

TEST(DeviceTransport, CompiledAnswerIsKnownValue) {
  const int compiled = mpi_cuda_support_compiled();
  EXPECT_TRUE(compiled == -1 || compiled == 0 || compiled == 1) << compiled;
}

TEST(DeviceTransport, LoopbackNeverTakesDeviceMemory) {
  LoopbackWorld world(2);
  std::unique_ptr<Communicator> comm = world.communicator(0);
  EXPECT_FALSE(comm->allreduce_accepts_device_memory(ScalarType::kFloat32, 1024));
}

}  // namespace
}  // namespace arcreduce
