// Which transport device buffers take: the CUDA-aware detection and its fallbacks.
#include "ops/mpi_cuda_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
