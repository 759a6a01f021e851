// The checks a CUDA tensor passes at submission, against a fake CUDA runtime.
#include "ops/device_query.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace arcreduce {
namespace {

using ::testing::HasSubstr;

class FakeDeviceQuery : public DeviceQuery {
 public:
  int count = 2;
  std::string count_error;
  std::map<const void*, PointerInfo> pointers;

  int device_count(std::string* error) const override {
    if (!count_error.empty()) {
      *error = count_error;
      return 0;
    }
    return count;
  }
  PointerInfo pointer_info(const void* data) const override {
    auto it = pointers.find(data);
    return it == pointers.end() ? PointerInfo{} : it->second;
  }
};

const std::string kWho = "tensor 'w' on rank 3";

Tensor cuda_tensor(void* data, int device, std::vector<int64_t> shape = {4}) {
  return Tensor{data, DType::kFloat32, std::move(shape), Device{Device::kCUDA, device}};
}

TEST(CheckCudaTensor, AcceptsDeviceAndManagedMemoryOfItsDevice) {
  FakeDeviceQuery q;
  int a = 0, b = 0;
  q.pointers[&a] = {PointerKind::kDevice, 1};
  q.pointers[&b] = {PointerKind::kManaged, 0};
  EXPECT_EQ(check_cuda_tensor(cuda_tensor(&a, 1), kWho, &q, -1), "");
  EXPECT_EQ(check_cuda_tensor(cuda_tensor(&b, 0), kWho, &q, 0), "");
  // An empty tensor needs no memory.
  EXPECT_EQ(check_cuda_tensor(cuda_tensor(nullptr, 0, {0, 3}), kWho, &q, -1), "");
}

TEST(CheckCudaTensor, BuildWithoutCudaNamesTheTensorAndRank) {
  int a = 0;
  const std::string m = check_cuda_tensor(cuda_tensor(&a, 0), kWho, nullptr, -1);
  EXPECT_THAT(m, HasSubstr(kWho));
  EXPECT_THAT(m, HasSubstr("has no CUDA"));
}

TEST(CheckCudaTensor, NoUsableDeviceCarriesTheRuntimeError) {
  FakeDeviceQuery q;
  q.count_error = "cudaErrorNoDevice: no CUDA-capable device is detected";
  int a = 0;
  const std::string m = check_cuda_tensor(cuda_tensor(&a, 0), kWho, &q, -1);
  EXPECT_THAT(m, HasSubstr(kWho));
  EXPECT_THAT(m, HasSubstr("no CUDA device is usable"));
  EXPECT_THAT(m, HasSubstr("cudaErrorNoDevice"));
  q.count_error.clear();
  q.count = 0;
  EXPECT_THAT(check_cuda_tensor(cuda_tensor(&a, 0), kWho, &q, -1), HasSubstr("0 devices"));
}

TEST(CheckCudaTensor, BadDeviceIndexSaysWhatExists) {
  FakeDeviceQuery q;
  int a = 0;
  q.pointers[&a] = {PointerKind::kDevice, 0};
  for (int index : {-1, 2, 7}) {
    const std::string m = check_cuda_tensor(cuda_tensor(&a, index), kWho, &q, -1);
    EXPECT_THAT(m, HasSubstr(kWho));
    EXPECT_THAT(m, HasSubstr("index " + std::to_string(index) + " is out of range"));
    EXPECT_THAT(m, HasSubstr("sees 2 devices, 0..1"));
  }
}

TEST(CheckCudaTensor, HostOrUnknownPointerIsNotDeviceMemory) {
  FakeDeviceQuery q;
  int host = 0, unknown = 0;
  q.pointers[&host] = {PointerKind::kHost, -1};
  std::string m = check_cuda_tensor(cuda_tensor(&host, 0), kWho, &q, -1);
  EXPECT_THAT(m, HasSubstr(kWho));
  EXPECT_THAT(m, HasSubstr("data is host memory"));
  m = check_cuda_tensor(cuda_tensor(&unknown, 0), kWho, &q, -1);
  EXPECT_THAT(m, HasSubstr("not memory the CUDA runtime knows"));
}

TEST(CheckCudaTensor, PointerOnAnotherDeviceThanTheTensorSays) {
  FakeDeviceQuery q;
  int a = 0;
  q.pointers[&a] = {PointerKind::kDevice, 1};
  EXPECT_THAT(check_cuda_tensor(cuda_tensor(&a, 0), kWho, &q, -1),
              HasSubstr("data lives on CUDA device 1 but the tensor says device 0"));
}

TEST(CheckCudaTensor, OneGpuPerProcess) {
  FakeDeviceQuery q;
  int a = 0;
  q.pointers[&a] = {PointerKind::kDevice, 1};
  const std::string m = check_cuda_tensor(cuda_tensor(&a, 1), kWho, &q, 0);
  EXPECT_THAT(m, HasSubstr(kWho));
  EXPECT_THAT(m, HasSubstr("this process reduces on device 0"));
  EXPECT_EQ(check_cuda_tensor(cuda_tensor(&a, 1), kWho, &q, 1), "");
}

}  // namespace
}  // namespace arcreduce
