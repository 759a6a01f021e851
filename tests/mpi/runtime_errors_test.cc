// Error paths of allreduce under mpirun: mismatched submissions across ranks (shape, dtype, op,
// compressor, ratio, error feedback; first time and after the response cache is warm),
// duplicate names in flight, invalid tensors and options. Every error reaches the callback and
// synchronize() as a Status with the right code and a message naming the tensor, and later
// ops still work.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/mpi/runtime_test_util.h"

namespace arcreduce_test {
namespace {

using arcreduce::AllreduceOptions;
using arcreduce::Handle;
using arcreduce::Status;
using arcreduce::StatusCode;

// True when `message` names rank `r` ("rank 2", "ranks [0, 2]", "ranks 1,2", "rank(s): 2").
bool names_rank(const std::string& message, int r) {
  const std::regex re(
      "rank[^0-9]{0,12}([0-9]+[^0-9a-z]{1,3}){0,8}" + std::to_string(r) + "([^0-9]|$)",
      std::regex::icase);
  return std::regex_search(message, re);
}

// Records the callback's status; waits are bounded (the watchdog covers the rest).
struct Capture {
  std::mutex mu;
  int calls = 0;
  Status status;
  AllreduceOptions attach(AllreduceOptions o) {
    o.callback = [this](const Status& s) {
      std::lock_guard<std::mutex> lock(mu);
      ++calls;
      status = s;
    };
    return o;
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  Status get() {
    std::lock_guard<std::mutex> lock(mu);
    return status;
  }
};

// Submits `name` with this rank's tensor/options, expects kMismatch everywhere (callback and
// synchronize), the message naming the tensor and `odd_rank`, and the data untouched.
void expect_mismatch(const std::string& name, TestTensor t, AllreduceOptions o, int odd_rank) {
  const TestTensor before = t;
  Capture cap;
  Handle h = arcreduce::allreduce_async(name, t.view(), cap.attach(o));
  Status s = arcreduce::synchronize(h);
  EXPECT_EQ(s.code(), StatusCode::kMismatch) << name << ": " << describe(s);
  EXPECT_NE(s.message().find(name), std::string::npos)
      << "message must name the tensor: " << s.message();
  EXPECT_TRUE(names_rank(s.message(), odd_rank))
      << "message must name rank " << odd_rank << ": " << s.message();
  EXPECT_EQ(cap.count(), 1) << name << ": callback must fire exactly once";
  EXPECT_EQ(cap.get().code(), StatusCode::kMismatch) << describe(cap.get());
  EXPECT_EQ(std::memcmp(before.data(), t.data(), t.nbytes()), 0)
      << name << ": a failed op must leave the tensor untouched";
}

// A later, consistent op succeeds with the right values.
void expect_later_op_works(const std::string& name) {
  TestTensor t(DType::kFloat32, {19});
  fill_inputs(t, arcreduce::rank(), 4);
  Status s = arcreduce::allreduce(name, t.view(), dense(ReduceOp::kSum));
  EXPECT_TRUE(s.ok()) << name << ": " << describe(s);
  EXPECT_EQ(check_reduced(t, ReduceOp::kSum, arcreduce::size(), 4), "") << name;
}

class Mismatch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (arcreduce::size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
    odd_ = arcreduce::size() - 1;
    is_odd_ = arcreduce::rank() == odd_;
  }
  int odd_ = 0;
  bool is_odd_ = false;
};

TEST_F(Mismatch, Shape) {
  TestTensor t(DType::kFloat32, {is_odd_ ? 9 : 7});
  expect_mismatch("mm_shape", t, dense(), odd_);
  expect_later_op_works("mm_shape_after");
}

// The odd rank submits long after the others (a later negotiation cycle).
TEST_F(Mismatch, ShapeSubmittedLate) {
  TestTensor t(DType::kFloat16, {is_odd_ ? 3 : 2, 5});
  if (is_odd_) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  expect_mismatch("mm_shape_late", t, dense(ReduceOp::kSum), odd_);
  expect_later_op_works("mm_shape_late_after");
}

TEST_F(Mismatch, ShapeSameElementCount) {
  TestTensor t(DType::kFloat32, is_odd_ ? std::vector<int64_t>{3, 4} : std::vector<int64_t>{4, 3});
  expect_mismatch("mm_shape_dims", t, dense(), odd_);
  expect_later_op_works("mm_shape_dims_after");
}

TEST_F(Mismatch, DType) {
  TestTensor t(is_odd_ ? DType::kFloat64 : DType::kFloat32, {7});
  expect_mismatch("mm_dtype", t, dense(), odd_);
  expect_later_op_works("mm_dtype_after");
}

TEST_F(Mismatch, Op) {
  TestTensor t(DType::kFloat32, {7});
  expect_mismatch("mm_op", t, dense(is_odd_ ? ReduceOp::kSum : ReduceOp::kAverage), odd_);
  expect_later_op_works("mm_op_after");
}

TEST_F(Mismatch, Compressor) {
  TestTensor t(DType::kFloat32, {20000});
  AllreduceOptions o = dense();
  if (is_odd_) o.compression.compressor = "fp16";
  expect_mismatch("mm_compressor", t, o, odd_);
  expect_later_op_works("mm_compressor_after");
}

TEST_F(Mismatch, CompressionRatio) {
  TestTensor t(DType::kFloat32, {20000});
  AllreduceOptions o = dense();
  o.compression.compressor = "topk";
  o.compression.ratio = is_odd_ ? 0.25 : 0.5;
  expect_mismatch("mm_ratio", t, o, odd_);
  expect_later_op_works("mm_ratio_after");
}

TEST_F(Mismatch, ErrorFeedback) {
  TestTensor t(DType::kFloat32, {20000});
  AllreduceOptions o = dense();
  o.compression.compressor = "topk";
  o.compression.ratio = 0.5;
  o.compression.error_feedback = is_odd_ ? "ef14" : "none";
  expect_mismatch("mm_ef", t, o, odd_);
  expect_later_op_works("mm_ef_after");
}

// The name has been negotiated (and cached) for a few steps; then one rank changes its shape.
TEST_F(Mismatch, AfterResponseCacheIsWarm) {
  for (int step = 0; step < 3; ++step) {
    TestTensor t(DType::kFloat32, {11});
    fill_inputs(t, arcreduce::rank(), step);
    Status s = arcreduce::allreduce("mm_cached", t.view(), dense(ReduceOp::kSum));
    EXPECT_TRUE(s.ok()) << describe(s);
    EXPECT_EQ(check_reduced(t, ReduceOp::kSum, arcreduce::size(), step), "");
  }
  TestTensor t(DType::kFloat32, {is_odd_ ? 12 : 11});
  expect_mismatch("mm_cached", t, dense(ReduceOp::kSum), odd_);
  // The name itself works again once everyone agrees.
  TestTensor u(DType::kFloat32, {11});
  fill_inputs(u, arcreduce::rank(), 5);
  Status s = arcreduce::allreduce("mm_cached", u.view(), dense(ReduceOp::kSum));
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(check_reduced(u, ReduceOp::kSum, arcreduce::size(), 5), "");
}

// A mismatched tensor among many good ones (which fuse together) fails alone.
TEST_F(Mismatch, AmongManyGoodTensors) {
  const int rank = arcreduce::rank();
  constexpr int kGood = 12;
  std::vector<TestTensor> good;
  std::vector<Handle> handles;
  for (int i = 0; i < kGood; ++i) good.emplace_back(DType::kFloat32, std::vector<int64_t>{64});
  TestTensor bad(DType::kFloat32, {is_odd_ ? 65 : 64});
  for (int i = 0; i < kGood; ++i) {
    if (i == kGood / 2) {
      handles.push_back(arcreduce::allreduce_async("mm_among/bad", bad.view(), dense()));
    }
    fill_inputs(good[i], rank, i);
    handles.push_back(arcreduce::allreduce_async("mm_among/" + std::to_string(i), good[i].view(),
                                                 dense(ReduceOp::kSum)));
  }
  int mismatches = 0;
  for (Handle h : handles) {
    Status s = arcreduce::synchronize(h);
    if (s.code() == StatusCode::kMismatch) {
      ++mismatches;
      EXPECT_NE(s.message().find("mm_among/bad"), std::string::npos) << s.message();
    } else {
      EXPECT_TRUE(s.ok()) << describe(s);
    }
  }
  EXPECT_EQ(mismatches, 1);
  for (int i = 0; i < kGood; ++i) {
    EXPECT_EQ(check_reduced(good[i], ReduceOp::kSum, arcreduce::size(), i), "") << i;
  }
}

// Holds the coordinator thread inside a callback so that ops submitted meanwhile stay in flight
// deterministically, with any number of ranks (1 included).
class CoordinatorGate {
 public:
  ~CoordinatorGate() {
    if (handle_ && !opened_) open();
  }
  // Submits a tensor on every rank whose callback blocks until open() is called.
  void close(const std::string& name) {
    tensor_ = TestTensor(DType::kFloat32, {4});
    AllreduceOptions o = dense();
    o.callback = [this](const Status&) {
      std::unique_lock<std::mutex> lock(mu_);
      entered_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(30), [this] { return open_; });
    };
    handle_ = arcreduce::allreduce_async(name, tensor_.view(), o);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(30), [this] { return entered_; });
  }
  bool entered() {
    std::lock_guard<std::mutex> lock(mu_);
    return entered_;
  }
  void open() {
    opened_ = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
    Status s = arcreduce::synchronize(handle_);
    EXPECT_TRUE(s.ok()) << describe(s);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool open_ = false;
  bool opened_ = false;
  TestTensor tensor_;
  Handle handle_ = 0;
};

TEST(DuplicateName, SecondSubmissionFailsFirstCompletes) {
  const int rank = arcreduce::rank();
  CoordinatorGate gate;
  gate.close("dup_gate");
  ASSERT_TRUE(gate.entered()) << "the gate callback never ran";  // same on every rank

  TestTensor first(DType::kFloat32, {10});
  TestTensor second(DType::kFloat32, {10});
  fill_inputs(first, rank, 3);
  fill_inputs(second, rank, 8);
  const TestTensor second_before = second;
  Handle h1 = arcreduce::allreduce_async("dup", first.view(), dense(ReduceOp::kSum));
  Capture cap;
  Handle h2 = arcreduce::allreduce_async("dup", second.view(), cap.attach(dense(ReduceOp::kSum)));
  EXPECT_NE(h1, h2);
  // Completed at once, while the coordinator is still held in the gate's callback.
  EXPECT_TRUE(arcreduce::poll(h2)) << "a duplicate must complete immediately";
  EXPECT_EQ(cap.count(), 1) << "the duplicate's callback must have fired";
  EXPECT_EQ(cap.get().code(), StatusCode::kDuplicateName) << describe(cap.get());
  EXPECT_FALSE(arcreduce::poll(h1)) << "the first op cannot complete while the coordinator waits";
  gate.open();

  Status s2 = arcreduce::synchronize(h2);
  EXPECT_EQ(s2.code(), StatusCode::kDuplicateName) << describe(s2);
  EXPECT_NE(s2.message().find("dup"), std::string::npos) << s2.message();
  Status s1 = arcreduce::synchronize(h1);
  EXPECT_TRUE(s1.ok()) << describe(s1);
  EXPECT_EQ(check_reduced(first, ReduceOp::kSum, arcreduce::size(), 3), "");
  EXPECT_EQ(std::memcmp(second_before.data(), second.data(), second.nbytes()), 0)
      << "the rejected duplicate's data must be untouched";

  // Once the first completed, the name is free again.
  expect_later_op_works("dup");
}

// Local validation: the handle completes at once with kInvalidArgument naming the tensor, on
// every rank independently (no other rank has to submit anything).
void expect_invalid(const std::string& name, arcreduce::Tensor view, AllreduceOptions o,
                    const std::string& must_mention) {
  Capture cap;
  Handle h = arcreduce::allreduce_async(name, view, cap.attach(o));
  EXPECT_TRUE(arcreduce::poll(h)) << "'" << name << "': invalid ops must complete immediately";
  EXPECT_EQ(cap.count(), 1) << "'" << name << "': callback must have fired";
  Status s = arcreduce::synchronize(h);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << name << "': " << describe(s);
  EXPECT_EQ(cap.get().code(), StatusCode::kInvalidArgument) << describe(cap.get());
  EXPECT_NE(s.message().find(must_mention), std::string::npos)
      << "message must mention '" << must_mention << "': " << s.message();
}

TEST(InvalidTensor, RejectedWithClearStatus) {
  std::vector<float> buf(16, 1.0f);
  expect_invalid("inv_null", view_of(nullptr, DType::kFloat32, {7}), dense(), "inv_null");
  expect_invalid("inv_negdim", view_of(buf.data(), DType::kFloat32, {4, -1}), dense(),
                 "inv_negdim");
  expect_invalid("", view_of(buf.data(), DType::kFloat32, {4}), dense(), "name");
  expect_invalid("inv_dtype", view_of(buf.data(), static_cast<DType>(42), {4}), dense(),
                 "inv_dtype");
  // Host memory labelled kCUDA: rejected by every build (no CUDA, no device, or host memory).
  arcreduce::Tensor cuda = view_of(buf.data(), DType::kFloat32, {4});
  cuda.device.kind = arcreduce::Device::kCUDA;
  expect_invalid("inv_cuda", cuda, dense(), "inv_cuda");
  AllreduceOptions o = dense();
  o.compression.compressor = "bogus";
  expect_invalid("inv_compressor", view_of(buf.data(), DType::kFloat32, {4}), o, "inv_compressor");
  o = dense();
  o.compression.compressor = "topk";
  o.compression.ratio = 1.5;
  expect_invalid("inv_ratio", view_of(buf.data(), DType::kFloat32, {4}), o, "inv_ratio");
  o.compression.ratio = 0.0;
  expect_invalid("inv_ratio0", view_of(buf.data(), DType::kFloat32, {4}), o, "inv_ratio0");
  o = dense();
  o.compression.error_feedback = "bogus";
  expect_invalid("inv_ef", view_of(buf.data(), DType::kFloat32, {4}), o, "inv_ef");
  for (float v : buf) EXPECT_EQ(v, 1.0f) << "rejected tensors must be untouched";

  // The runtime is unaffected, and a rejected name is not left "in flight".
  expect_later_op_works("inv_null");
}

}  // namespace
}  // namespace arcreduce_test
