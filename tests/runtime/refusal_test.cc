// A tensor refused on one rank (bad input, caught before it is queued) fails on every rank with
// that rank's reason, at once, instead of leaving the other ranks waiting for the stall timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace testing {
namespace {

using ::testing::HasSubstr;

// Long stall timeouts: a test that passes cannot have waited for them.
Config refusal_config() {
  Config c = test_config();
  c.stall_check_seconds = 60;
  c.stall_shutdown_seconds = 120;
  return c;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The job goes on after a refusal: a sum over every rank.
void expect_next_op_works(Runtime& rt, int rank, int size, const std::string& name) {
  std::vector<float> after(3, static_cast<float>(rank));
  Status ok = rt.synchronize(rt.allreduce_async(name, Tensor{after.data(), DType::kFloat32, {3}},
                                                AllreduceOptions{ReduceOp::kSum}));
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(after[0], static_cast<float>(size * (size - 1) / 2));
}

TEST(Refusal, OneRankRefusesTheOthersFailWithItsReason) {
  const int size = 3;
  run_runtimes(size, refusal_config(), [&](Runtime& rt, int rank) {
    std::vector<float> data(16, 1.0f);
    AllreduceOptions options;
    if (rank == 2) options.compression.compressor = "zip";
    const auto start = std::chrono::steady_clock::now();
    Handle h = rt.allreduce_async("w", Tensor{data.data(), DType::kFloat32, {16}}, options);
    if (rank == 2) {
      EXPECT_TRUE(rt.poll(h));
    }  // refused at submission
    Status s = rt.synchronize(h);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("unknown compressor 'zip'"));
    if (rank != 2) {
      EXPECT_THAT(s.message(), HasSubstr("'w' was refused on rank 2"));
    }
    EXPECT_LT(seconds_since(start), 30.0);
    EXPECT_EQ(data[0], 1.0f);  // untouched
    expect_next_op_works(rt, rank, size, "after");
  });
}

// The others' tensor is in the response cache (it went through the bit vector): the refusal
// invalidates the slot so that they meet it in the full negotiation.
TEST(Refusal, AfterTheTensorWasCached) {
  const int size = 4;
  run_runtimes(size, refusal_config(), [&](Runtime& rt, int rank) {
    std::vector<float> data(8, 1.0f);
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(
          rt.synchronize(rt.allreduce_async("c", Tensor{data.data(), DType::kFloat32, {8}}, {}))
              .ok());
    }
    EXPECT_GT(rt.stats().cache_hits, 0u);
    // Rank 1 is late, so the others' cached requests are waiting when its refusal arrives.
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Tensor t{data.data(), DType::kFloat32, {8}};
    if (rank == 1) t.shape = {-8};
    Status s = rt.synchronize(rt.allreduce_async("c", t, {}));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("negative dimension"));
    if (rank != 1) {
      EXPECT_THAT(s.message(), HasSubstr("'c' was refused on rank 1"));
    }
    // The same name, submitted alike everywhere, works again.
    EXPECT_TRUE(
        rt.synchronize(rt.allreduce_async("c", Tensor{data.data(), DType::kFloat32, {8}}, {}))
            .ok());
  });
}

// The refusal may come before or after the others submit; a broadcast is refused the same way.
TEST(Refusal, BindingRefusalBeforeOrAfterTheOthersSubmit) {
  const int size = 3;
  for (int refuser_delay_ms : {0, 50}) {
    run_runtimes(size, refusal_config(), [&](Runtime& rt, int rank) {
      std::vector<int32_t> data(4, rank);
      Handle h;
      if (rank == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(refuser_delay_ms));
        h = rt.refuse("b", "tensor 'b' has dtype torch.complex64", Collective::kBroadcast);
      } else {
        if (refuser_delay_ms == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        h = rt.broadcast_async("b", Tensor{data.data(), DType::kInt32, {4}}, 0, {});
      }
      Status s = rt.synchronize(h);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
      EXPECT_THAT(s.message(), HasSubstr("torch.complex64"));
      if (rank != 0) {
        EXPECT_THAT(s.message(), HasSubstr("'b' was refused on rank 0"));
      }
      EXPECT_EQ(data[0], rank);  // untouched
      expect_next_op_works(rt, rank, size, "after");
    });
  }
}

TEST(Refusal, EveryRankRefusesAlike) {
  run_runtimes(2, refusal_config(), [&](Runtime& rt, int rank) {
    std::vector<float> data(4, 1.0f);
    AllreduceOptions options;
    options.compression.ratio = 7.0;
    Status s =
        rt.synchronize(rt.allreduce_async("r", Tensor{data.data(), DType::kFloat32, {4}}, options));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("ratio"));
    expect_next_op_works(rt, rank, 2, "after");
  });
}

// A refusal no other rank matches is no stall: nobody waits for it, the job is not aborted.
TEST(Refusal, UnmatchedRefusalIsNoStall) {
  Config config = test_config();
  config.stall_check_seconds = 0.1;
  config.stall_shutdown_seconds = 0.3;
  LoopbackWorld world(2);
  run_runtimes(world, std::vector<Config>(2, config), [&](Runtime& rt, int rank) {
    if (rank == 0) {
      Status s =
          rt.synchronize(rt.refuse("only_here", "refused by the test", Collective::kAllreduce));
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    }
    // Past the stall timeouts (0.1 and 0.3 s) with the same number of ops on every rank.
    for (int i = 0; i < 40; ++i) {
      expect_next_op_works(rt, rank, 2, "tick." + std::to_string(i));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  EXPECT_FALSE(world.aborted()) << world.abort_reason();
}

// A refused name that is in flight on this rank leaves that op alone (it is a duplicate).
TEST(Refusal, InFlightNameIsNotRefusedForTheOthers) {
  run_runtimes(2, refusal_config(), [&](Runtime& rt, int rank) {
    std::vector<float> data(4, 1.0f);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Handle first = rt.allreduce_async("x", Tensor{data.data(), DType::kFloat32, {4}}, {});
    if (rank == 0) {
      Status refused = rt.synchronize(rt.refuse("x", "second 'x'", Collective::kAllreduce));
      EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
    }
    Status s = rt.synchronize(first);
    EXPECT_TRUE(s.ok()) << s.message();
  });
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
