// The coordinator's deferred completion of device buckets, driven by a fake DeviceExecutor whose
// "device work" finishes when the test says so. Runs in every build: it needs no CUDA.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "loopback_harness.h"
#include "runtime/coordinator.h"
#include "runtime/device_executor.h"

namespace arcreduce {
namespace {

using ::testing::HasSubstr;

// What the fake device does; shared by the executor, its completions and the test.
struct FakeDevice {
  std::atomic<bool> finish{false};  // the device work of every bucket so far is done
  std::atomic<bool> fail{false};    // ready()/wait() report a device failure instead
  std::atomic<int> buckets{0};
};

// The device "unpacks" (writes 2x the input) only when the test lets it finish.
class FakeCompletion : public DeviceCompletion {
 public:
  FakeCompletion(FakeDevice& device, std::vector<float*> data, std::vector<size_t> sizes)
      : device_(device), data_(std::move(data)), sizes_(std::move(sizes)) {}
  bool ready() override {
    if (device_.fail) throw Error("device exploded", StatusCode::kInternal);
    if (!device_.finish) return false;
    unpack();
    return true;
  }
  void wait() override {
    while (!device_.finish && !device_.fail) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!ready()) throw Error("unreachable", StatusCode::kInternal);
  }

 private:
  void unpack() {
    if (unpacked_) return;
    unpacked_ = true;
    for (size_t i = 0; i < data_.size(); ++i) {
      for (size_t j = 0; j < sizes_[i]; ++j) data_[i][j] *= 2.0f;
    }
  }
  FakeDevice& device_;
  std::vector<float*> data_;
  std::vector<size_t> sizes_;
  bool unpacked_ = false;
};

class FakeDeviceExecutor : public DeviceExecutor {
 public:
  explicit FakeDeviceExecutor(FakeDevice& device) : device_(device) {}
  std::unique_ptr<DeviceCompletion> run(const std::vector<TensorEntry*>& entries,
                                        const TensorSignature&, Stats&, CompressorStats&, PhaseLog&,
                                        const HostPath&) override {
    ++device_.buckets;
    std::vector<float*> data;
    std::vector<size_t> sizes;
    for (TensorEntry* e : entries) {
      data.push_back(static_cast<float*>(e->tensor.data));
      sizes.push_back(static_cast<size_t>(e->signature.elements()));
    }
    return std::make_unique<FakeCompletion>(device_, std::move(data), std::move(sizes));
  }

 private:
  FakeDevice& device_;
};

// One rank: a coordinator over a loopback world of one, with the fake device.
class DeviceCompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.config = testing::test_config();
    ctx_.comm = world_.communicator(0);
    ctx_.log = make_logger(0, "error");
    ctx_.device_executor_factory = [this](Context&) {
      return std::make_unique<FakeDeviceExecutor>(device_);
    };
    coordinator_ = std::make_unique<Coordinator>(ctx_, queue_, state_);
    coordinator_->start();
  }
  void TearDown() override {
    device_.finish = true;
    coordinator_.reset();
  }

  Handle submit(const std::string& name, std::vector<float>& data, Device::Kind kind,
                std::function<void(const Status&)> callback = {}) {
    TensorEntry e;
    e.name = name;
    e.tensor =
        Tensor{data.data(), DType::kFloat32, {static_cast<int64_t>(data.size())}, Device{kind, 0}};
    e.signature.dtype = DType::kFloat32;
    e.signature.shape = e.tensor.shape;
    e.signature.device = kind;
    e.signature.op = ReduceOp::kSum;
    e.signature.compression.compressor = "none";
    e.signature.compression.error_feedback = "none";
    e.callback = std::move(callback);
    e.submitted = Clock::now();
    return queue_.submit(std::move(e));
  }

  LoopbackWorld world_{1};
  Context ctx_;
  TensorQueue queue_;
  StateStore state_;
  FakeDevice device_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(DeviceCompletionTest, CallbackWaitsForTheDeviceAndSeesTheResult) {
  std::vector<float> data = {1.0f, 2.0f, 3.0f};
  std::atomic<int> fired{0};
  std::vector<float> seen;
  Handle h = submit("g", data, Device::kCUDA, [&](const Status& s) {
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(coordinator_->on_coordinator_thread());
    seen = data;
    ++fired;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(device_.buckets.load(), 1);  // the collectives ran ...
  EXPECT_FALSE(queue_.poll(h));          // ... but the op waits for the device
  EXPECT_EQ(fired.load(), 0);
  device_.finish = true;
  EXPECT_TRUE(queue_.synchronize(h).ok());
  EXPECT_EQ(fired.load(), 1);
  EXPECT_EQ(seen, (std::vector<float>{2.0f, 4.0f, 6.0f}));
}

TEST_F(DeviceCompletionTest, CoordinatorIsNotBlockedByPendingDeviceWork) {
  std::vector<float> gpu = {1.0f}, cpu = {5.0f};
  Handle a = submit("on_gpu", gpu, Device::kCUDA);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Handle b = submit("on_cpu", cpu, Device::kCPU);
  EXPECT_TRUE(queue_.synchronize(b).ok());  // completes while the device bucket is pending
  EXPECT_EQ(cpu[0], 5.0f);
  EXPECT_FALSE(queue_.poll(a));
  device_.finish = true;
  EXPECT_TRUE(queue_.synchronize(a).ok());
  EXPECT_EQ(gpu[0], 2.0f);
}

TEST_F(DeviceCompletionTest, DeviceFailureFailsThatBucketAndTheRuntimeGoesOn) {
  std::vector<float> gpu = {1.0f}, cpu = {5.0f};
  std::atomic<int> fired{0};
  Handle a = submit("doomed", gpu, Device::kCUDA, [&](const Status&) { ++fired; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  device_.fail = true;
  const Status s = queue_.synchronize(a);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("CUDA device work failed: device exploded"));
  EXPECT_EQ(fired.load(), 1);
  device_.fail = false;
  EXPECT_TRUE(queue_.synchronize(submit("later", cpu, Device::kCPU)).ok());
}

TEST_F(DeviceCompletionTest, ShutdownWaitsForPendingDeviceWork) {
  std::vector<float> gpu = {3.0f};
  std::atomic<int> fired{0};
  Handle a = submit("pending", gpu, Device::kCUDA, [&](const Status&) { ++fired; });
  while (device_.buckets.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    device_.finish = true;
  });
  coordinator_->shutdown();  // returns only after the pending bucket completed
  release.join();
  EXPECT_TRUE(queue_.poll(a));
  EXPECT_TRUE(queue_.synchronize(a).ok());  // its work was done: not a shutdown error
  EXPECT_EQ(fired.load(), 1);
  EXPECT_EQ(gpu[0], 6.0f);
}

TEST_F(DeviceCompletionTest, BucketsCompleteInOrder) {
  std::vector<std::vector<float>> data(5, std::vector<float>(4, 1.0f));
  std::vector<int> order;
  std::mutex mutex;
  std::vector<Handle> handles;
  for (int i = 0; i < 5; ++i) {
    handles.push_back(
        submit("t" + std::to_string(i), data[i], Device::kCUDA, [&, i](const Status&) {
          std::lock_guard<std::mutex> lock(mutex);
          order.push_back(i);
        }));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  device_.finish = true;
  for (Handle h : handles) EXPECT_TRUE(queue_.synchronize(h).ok());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace arcreduce
