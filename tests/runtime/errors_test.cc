// Error paths through the runtime over the loopback world: mismatched submissions, duplicate
// names, invalid tensors, shutdown with pending ops, ops after shutdown, stall warning/abort.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "compressors/compressor.h"
#include "runtime/config_fields.h"
#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace testing {
namespace {

using ::testing::HasSubstr;

// Every rank submits "w" with the signature `make(rank)`; all must fail with kMismatch naming the
// tensor and the disagreeing ranks, and a later op must still work.
void expect_mismatch(int size, const std::function<void(int, Tensor&, AllreduceOptions&)>& make,
                     const std::string& field, const std::string& expected_ranks) {
  run_runtimes(size, test_config(), [&](Runtime& rt, int rank) {
    std::vector<double> storage(64, 1.0);
    Tensor t{storage.data(), DType::kFloat32, {4, 4}};
    AllreduceOptions options;
    make(rank, t, options);
    std::atomic<int> callbacks{0};
    Status from_callback;
    options.callback = [&](const Status& s) {
      from_callback = s;
      ++callbacks;
    };
    Status s = rt.synchronize(rt.allreduce_async("w", t, options));
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("'w'"));
    EXPECT_THAT(s.message(), HasSubstr(field));
    EXPECT_THAT(s.message(), HasSubstr(expected_ranks));
    EXPECT_EQ(callbacks.load(), 1);
    EXPECT_EQ(from_callback.message(), s.message());
    // The job goes on.
    std::vector<float> after(3, static_cast<float>(rank));
    Status ok = rt.synchronize(rt.allreduce_async(
        "after", Tensor{after.data(), DType::kFloat32, {3}}, AllreduceOptions{ReduceOp::kSum}));
    ASSERT_TRUE(ok.ok()) << ok.message();
    EXPECT_EQ(after[0], static_cast<float>(size * (size - 1) / 2));
  });
}

TEST(Mismatch, Shape) {
  expect_mismatch(
      3,
      [](int rank, Tensor& t, AllreduceOptions&) {
        if (rank == 2) t.shape = {2, 8};
      },
      "shape: [4, 4] on ranks 0, 1 vs [2, 8] on rank 2", "rank 2");
}

TEST(Mismatch, Dtype) {
  expect_mismatch(
      4,
      [](int rank, Tensor& t, AllreduceOptions&) {
        if (rank == 1) t.dtype = DType::kFloat64;
      },
      "dtype", "float64 on rank 1");
}

TEST(Mismatch, Op) {
  expect_mismatch(
      2,
      [](int rank, Tensor&, AllreduceOptions& o) {
        if (rank == 0) o.op = ReduceOp::kSum;
      },
      "op: sum on rank 0 vs average on rank 1", "rank 1");
}

TEST(Mismatch, Compression) {
  expect_mismatch(
      5,
      [](int rank, Tensor&, AllreduceOptions& o) {
        o.compression.compressor = "topk";
        o.compression.ratio = rank == 4 ? 0.1 : 0.01;
      },
      "compression", "rank 4");
}

// A cached tensor whose signature changes on one rank: the cache entry is invalidated and the
// mismatch is still reported on every rank.
TEST(Mismatch, AfterTheTensorWasCached) {
  run_runtimes(3, test_config(), [&](Runtime& rt, int rank) {
    std::vector<float> data(16, 1.0f);
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(
          rt.synchronize(rt.allreduce_async("c", Tensor{data.data(), DType::kFloat32, {16}}, {}))
              .ok());
    }
    std::vector<int64_t> shape = rank == 1 ? std::vector<int64_t>{4, 4} : std::vector<int64_t>{16};
    Status s =
        rt.synchronize(rt.allreduce_async("c", Tensor{data.data(), DType::kFloat32, shape}, {}));
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("[4, 4] on rank 1"));
    // Consistent change on every rank is fine.
    Status ok =
        rt.synchronize(rt.allreduce_async("c", Tensor{data.data(), DType::kFloat32, {4, 4}}, {}));
    EXPECT_TRUE(ok.ok()) << ok.message();
    EXPECT_GT(rt.stats().cache_hits, 0u);
  });
}

TEST(Duplicate, SecondSubmissionFailsFirstCompletes) {
  run_runtimes(2, test_config(), [&](Runtime& rt, int rank) {
    std::vector<float> a(8, 1.0f), b(8, 2.0f);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Handle first = rt.allreduce_async("dup", Tensor{a.data(), DType::kFloat32, {8}}, {});
    if (rank == 0) {
      Handle second = rt.allreduce_async("dup", Tensor{b.data(), DType::kFloat32, {8}}, {});
      EXPECT_TRUE(rt.poll(second));
      Status s = rt.synchronize(second);
      EXPECT_EQ(s.code(), StatusCode::kDuplicateName);
      EXPECT_THAT(s.message(), HasSubstr("'dup'"));
      EXPECT_EQ(b[0], 2.0f);  // untouched
    }
    Status s = rt.synchronize(first);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(a[0], 1.0f);
  });
}

// Every compressor the configuration accepts is built: none is rejected at submission as "not
// available in this build" (the check stays for builds that leave one out).
TEST(InvalidTensor, EveryConfigurableCompressorIsBuilt) {
  for (const std::string& name : compressor_names()) {
    EXPECT_TRUE(compressor_available(name)) << name;
    if (name != "none") {
      EXPECT_NE(make_compressor(name), nullptr) << name;
    }
  }
  EXPECT_FALSE(compressor_available("zip"));
}

TEST(InvalidTensor, RejectedWithAClearMessage) {
  run_runtimes(1, test_config(), [&](Runtime& rt, int) {
    float x = 0;
    struct Bad {
      std::string name;
      Tensor tensor;
      AllreduceOptions options;
      std::string expect;
    };
    AllreduceOptions bad_ratio, bad_compressor, bad_ef, oktopk_ef, powersgd_ef;
    bad_ratio.compression.ratio = 1.5;
    bad_compressor.compression.compressor = "zip";
    bad_ef.compression.error_feedback = "ef99";
    oktopk_ef.compression.compressor = "oktopk";
    oktopk_ef.compression.error_feedback = "ef14";
    powersgd_ef.compression.compressor = "powersgd";
    powersgd_ef.compression.error_feedback = "ef21m";
    std::vector<Bad> cases = {
        {"", Tensor{&x, DType::kFloat32, {1}}, {}, "name must not be empty"},
        {"neg", Tensor{&x, DType::kFloat32, {2, -1}}, {}, "negative dimension"},
        {"null", Tensor{nullptr, DType::kFloat32, {3}}, {}, "data is null"},
        {"gpu", Tensor{&x, DType::kFloat32, {1}, Device{Device::kCUDA, 0}}, {}, "CUDA"},
        {"ratio", Tensor{&x, DType::kFloat32, {1}}, bad_ratio, "ratio"},
        {"zip", Tensor{&x, DType::kFloat32, {1}}, bad_compressor, "unknown compressor 'zip'"},
        {"ef", Tensor{&x, DType::kFloat32, {1}}, bad_ef, "unknown error feedback 'ef99'"},
        {"okef", Tensor{&x, DType::kFloat32, {1}}, oktopk_ef, "cannot wrap oktopk"},
        {"psef", Tensor{&x, DType::kFloat32, {1}}, powersgd_ef, "cannot wrap powersgd"},
    };
    for (auto& c : cases) {
      int fired = 0;
      c.options.callback = [&](const Status&) { ++fired; };
      Handle h = rt.allreduce_async(c.name, c.tensor, c.options);
      EXPECT_TRUE(rt.poll(h));
      Status s = rt.synchronize(h);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.name;
      EXPECT_THAT(s.message(), HasSubstr(c.expect));
      if (!c.name.empty()) {
        EXPECT_THAT(s.message(), HasSubstr("'" + c.name + "'"));
      }
      EXPECT_EQ(fired, 1);
    }
    // A null pointer is fine for an empty tensor.
    EXPECT_TRUE(
        rt.synchronize(rt.allreduce_async("empty", Tensor{nullptr, DType::kFloat32, {0, 5}}, {}))
            .ok());
  });
}

TEST(Shutdown, PendingOpsCompleteWithShutdownOnEveryRank) {
  std::atomic<int> checked{0};
  run_runtimes(3, test_config(), [&](Runtime& rt, int rank) {
    std::vector<float> data(4, 1.0f);
    std::atomic<int> fired{0};
    AllreduceOptions options;
    options.callback = [&](const Status& s) {
      EXPECT_EQ(s.code(), StatusCode::kShutdown);
      ++fired;
    };
    // Every rank waits for a tensor only it submits: nothing can complete.
    Handle h = rt.allreduce_async("only." + std::to_string(rank),
                                  Tensor{data.data(), DType::kFloat32, {4}}, options);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(rt.poll(h));
    ++checked;  // nobody shuts down before every rank has seen its op pending
    while (checked.load() < 3) std::this_thread::yield();
    if (rank == 1) rt.shutdown();  // one rank's shutdown stops every rank
    Status s = rt.synchronize(h);
    EXPECT_EQ(s.code(), StatusCode::kShutdown) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("shut down"));
    EXPECT_EQ(fired.load(), 1);
    EXPECT_EQ(data[0], 1.0f);
    // After shutdown: a clean error, callback included.
    int late = 0;
    AllreduceOptions late_options;
    late_options.callback = [&](const Status&) { ++late; };
    Status after = rt.synchronize(
        rt.allreduce_async("late", Tensor{data.data(), DType::kFloat32, {4}}, late_options));
    EXPECT_EQ(after.code(), StatusCode::kShutdown);
    EXPECT_THAT(after.message(), HasSubstr("'late'"));
    EXPECT_EQ(late, 1);
    EXPECT_FALSE(rt.running());
  });
}

// synchronize() asks whether it runs on the coordinator thread while shutdown() joins that
// thread on another: the answer must not read the std::thread being joined (ThreadSanitizer
// reported that data race). Ops of another thread then complete with kShutdown or ok.
TEST(Shutdown, SynchronizeOnAnotherThreadWhileShutdownJoinsTheCoordinator) {
  for (int round = 0; round < 20; ++round) {
    run_runtimes(1, test_config(), [&](Runtime& rt, int) {
      std::atomic<bool> stop{false};
      std::atomic<int> calls{0};
      std::thread user([&] {
        std::vector<float> data(4, 1.0f);
        for (int i = 0; !stop.load(); ++i) {
          Status s = rt.synchronize(rt.allreduce_async(
              "t" + std::to_string(i), Tensor{data.data(), DType::kFloat32, {4}}, {}));
          EXPECT_TRUE(s.ok() || s.code() == StatusCode::kShutdown) << s.message();
          Status unknown = rt.synchronize(Handle{1} << 40);
          EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument) << unknown.message();
          ++calls;
        }
      });
      while (calls.load() < 2) std::this_thread::yield();
      rt.shutdown();
      // Keep calling for a while after the join.
      const int after_join = calls.load() + 2;
      while (calls.load() < after_join) std::this_thread::yield();
      stop = true;
      user.join();
      EXPECT_FALSE(rt.running());
    });
  }
}

TEST(Stall, WarnsThenFailsEveryPendingOpAndAbortsTheJob) {
  Config config = test_config();
  config.stall_check_seconds = 0.2;
  config.stall_shutdown_seconds = 0.6;
  LoopbackWorld world(3);
  std::vector<Status> results(3);
  run_runtimes(world, std::vector<Config>(3, config), [&](Runtime& rt, int rank) {
    std::vector<float> data(4, 1.0f);
    // Warm the cache so the stalled tensor takes the cached path first.
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(
          rt.synchronize(rt.allreduce_async("g", Tensor{data.data(), DType::kFloat32, {4}}, {}))
              .ok());
    }
    if (rank == 2) {
      // Rank 2 never submits "g" again; wait until the runtime stops.
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (rt.running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      results[rank] =
          rt.synchronize(rt.allreduce_async("x", Tensor{data.data(), DType::kFloat32, {4}}, {}));
      return;
    }
    results[rank] =
        rt.synchronize(rt.allreduce_async("g", Tensor{data.data(), DType::kFloat32, {4}}, {}));
  });
  EXPECT_TRUE(world.aborted());
  EXPECT_THAT(world.abort_reason(), HasSubstr("'g'"));
  EXPECT_THAT(world.abort_reason(), HasSubstr("missing from rank 2"));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), StatusCode::kStalled) << results[r].message();
    EXPECT_THAT(results[r].message(), HasSubstr("missing from rank 2"));
  }
  EXPECT_EQ(results[2].code(), StatusCode::kStalled) << results[2].message();
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
