#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "tensor_queue/tensor_queue.h"

namespace arcreduce {
namespace {

TensorEntry entry(const std::string& name, std::function<void(const Status&)> cb = nullptr) {
  TensorEntry e;
  e.name = name;
  e.callback = std::move(cb);
  e.submitted = Clock::now();
  return e;
}

TEST(TensorQueue, SubmitTakeComplete) {
  TensorQueue q;
  int fired = 0;
  Handle h = q.submit(entry("a", [&](const Status& s) {
    EXPECT_TRUE(s.ok());
    ++fired;
  }));
  EXPECT_FALSE(q.poll(h));
  auto reqs = q.take_new_requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].name, "a");
  EXPECT_TRUE(q.take_new_requests().empty());
  TensorEntry e;
  ASSERT_TRUE(q.take_entry("a", &e));
  EXPECT_FALSE(q.take_entry("a", &e));
  q.complete(e, Status::OK());
  EXPECT_TRUE(q.poll(h));
  EXPECT_TRUE(q.synchronize(h).ok());
  EXPECT_EQ(fired, 1);
  // Released: a second synchronize is an error, not a hang.
  EXPECT_EQ(q.synchronize(h).code(), StatusCode::kInvalidArgument);
}

TEST(TensorQueue, DuplicateInFlightNameFailsOnlyTheSecond) {
  TensorQueue q;
  Handle first = q.submit(entry("a"));
  Handle second = q.submit(entry("a"));
  EXPECT_TRUE(q.poll(second));
  EXPECT_EQ(q.synchronize(second).code(), StatusCode::kDuplicateName);
  EXPECT_FALSE(q.poll(first));
  EXPECT_EQ(q.take_new_requests().size(), 1u);
  // Once the first completes the name is free again.
  TensorEntry e;
  ASSERT_TRUE(q.take_entry("a", &e));
  q.complete(e, Status::OK());
  Handle third = q.submit(entry("a"));
  EXPECT_FALSE(q.poll(third));
}

TEST(TensorQueue, CloseFailsPendingAndLaterSubmissions) {
  TensorQueue q;
  int fired = 0;
  Handle h = q.submit(entry("a", [&](const Status& s) {
    EXPECT_EQ(s.code(), StatusCode::kShutdown);
    ++fired;
  }));
  std::thread waiter([&] { EXPECT_EQ(q.synchronize(h).code(), StatusCode::kShutdown); });
  q.close(Status(StatusCode::kShutdown, "bye"));
  waiter.join();
  EXPECT_EQ(fired, 1);
  Handle late = q.submit(entry("b"));
  Status s = q.synchronize(late);
  EXPECT_EQ(s.code(), StatusCode::kShutdown);
  EXPECT_NE(s.message().find("'b'"), std::string::npos);
  EXPECT_TRUE(q.closed());
}

TEST(TensorQueue, ThrowingCallbackDoesNotEscape) {
  TensorQueue q;
  Handle h = q.submit(entry("a", [](const Status&) { throw std::runtime_error("user bug"); }));
  TensorEntry e;
  ASSERT_TRUE(q.take_entry("a", &e));
  EXPECT_NO_THROW(q.complete(e, Status::OK()));
  EXPECT_TRUE(q.synchronize(h).ok());
}

TEST(TensorQueue, WaitForWorkWakesOnSubmission) {
  TensorQueue q;
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    q.submit(entry("a"));
  });
  auto start = Clock::now();
  q.wait_for_work(std::chrono::seconds(30));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  producer.join();
  EXPECT_EQ(q.take_new_requests().size(), 1u);
}

// Submissions that come less than the gap apart are all taken by one wait; the wait then ends
// once the gap passes without one.
TEST(TensorQueue, WaitForQuietTakesBackToBackSubmissions) {
  TensorQueue q;
  std::thread producer([&] {
    for (const char* name : {"w", "b", "next"}) {
      q.submit(entry(name));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  q.wait_for_work(std::chrono::seconds(30));
  q.wait_for_quiet(std::chrono::milliseconds(1000), std::chrono::seconds(30));
  producer.join();
  EXPECT_EQ(q.take_new_requests().size(), 3u);
}

// A producer that never pauses cannot hold the cycle longer than `limit`.
TEST(TensorQueue, WaitForQuietStopsAtTheLimit) {
  TensorQueue q;
  std::atomic<bool> stop{false};
  std::atomic<int> submitted{0};
  std::thread producer([&] {
    for (int i = 0; !stop && i < 100000; ++i) {
      q.submit(entry("t" + std::to_string(i)));
      ++submitted;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  q.wait_for_work(std::chrono::seconds(30));
  q.wait_for_quiet(std::chrono::seconds(10), std::chrono::milliseconds(50));
  const size_t taken = q.take_new_requests().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool still_producing = q.take_new_requests().size() > 0;
  stop = true;
  producer.join();
  EXPECT_GE(taken, 1u);
  EXPECT_TRUE(still_producing) << "wait_for_quiet returned only after the producer stopped";
}

// Nothing queued, a zero gap, close() or wake(): no wait at all.
TEST(TensorQueue, WaitForQuietReturnsAtOnceWithNothingToWaitFor) {
  TensorQueue q;
  const auto start = Clock::now();
  q.wait_for_quiet(std::chrono::seconds(20), std::chrono::seconds(20));  // empty
  q.submit(entry("a"));
  q.wait_for_quiet(std::chrono::microseconds(0), std::chrono::seconds(20));
  q.wake();
  q.wait_for_quiet(std::chrono::seconds(20), std::chrono::seconds(20));
  q.wait_for_work(std::chrono::seconds(0));  // clears the wake
  q.close(Status(StatusCode::kShutdown, "closed"));
  q.wait_for_quiet(std::chrono::seconds(20), std::chrono::seconds(20));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

// Silent names (a held step's awaited tensors) are queued without waking the coordinator, all
// but the last: that one wakes it, and the quiet wait after it ends at once. Other names wake it
// as always; nothing silent is lost; an empty set ends the silence.
TEST(TensorQueue, SilentNamesWakeOnlyAtTheLast) {
  TensorQueue q;
  q.set_silent({"a", "b", "c"});
  q.submit(entry("a"));
  q.submit(entry("b"));
  EXPECT_EQ(q.submission_wakeups(), 0u);
  q.submit(entry("dense"));  // not awaited
  EXPECT_EQ(q.submission_wakeups(), 1u);
  std::thread last([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    q.submit(entry("c"));
  });
  EXPECT_EQ(q.take_new_requests().size(), 3u);  // a, b and dense, queued all the same
  const auto start = Clock::now();
  q.wait_for_work(std::chrono::seconds(30));  // woken by c
  q.wait_for_quiet(std::chrono::seconds(20), std::chrono::seconds(20));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  last.join();
  EXPECT_EQ(q.submission_wakeups(), 2u);
  const auto taken = q.take_new_requests();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].name, "c");
  // The set is used up: c's next submission (after it completes) wakes as any other would.
  TensorEntry e;
  ASSERT_TRUE(q.take_entry("c", &e));
  q.complete(e, Status::OK());
  q.submit(entry("c"));
  EXPECT_EQ(q.submission_wakeups(), 3u);
  // Cleared: nothing is silent.
  q.set_silent({"x", "y"});
  q.set_silent({});
  q.submit(entry("x"));
  EXPECT_EQ(q.submission_wakeups(), 4u);
}

// A silent name queued while the coordinator is not waiting is taken by its next wait at once: the
// wait's condition is the queue, not the wake.
TEST(TensorQueue, SilentSubmissionEndsTheNextWaitAtOnce) {
  TensorQueue q;
  q.set_silent({"a", "b"});
  q.submit(entry("a"));
  const auto start = Clock::now();
  q.wait_for_work(std::chrono::seconds(30));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(q.take_new_requests().size(), 1u);
}

// A user blocking in synchronize() on an unfinished op wakes the coordinator and is reported
// once by take_waited(), so that nothing is held back while someone waits.
TEST(TensorQueue, SynchronizeOnAPendingOpWakesTheCoordinator) {
  TensorQueue q;
  Handle h = q.submit(entry("a"));
  EXPECT_EQ(q.take_new_requests().size(), 1u);
  EXPECT_FALSE(q.take_waited());
  Status result;
  std::thread user([&] { result = q.synchronize(h); });
  const auto start = Clock::now();
  q.wait_for_work(std::chrono::seconds(30));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(q.take_waited());
  EXPECT_FALSE(q.take_waited());
  TensorEntry e;
  ASSERT_TRUE(q.take_entry("a", &e));
  q.complete(e, Status::OK());
  user.join();
  EXPECT_TRUE(result.ok());
}

// After shutdown(); init() the API synchronizes handles of the retired runtime's queue on the new
// one: a handle must never name an op of another queue, or it would return that op's status.
TEST(TensorQueue, HandlesOfTwoQueuesNeverCoincide) {
  TensorQueue retired;
  const Handle old_op = retired.submit(entry("a"));
  TensorQueue current;
  const Handle new_op = current.submit(entry("b"));
  const Handle rejected = current.reject(nullptr, Status(StatusCode::kShutdown, "stopped"));
  ASSERT_NE(old_op, new_op);  // or the synchronize() below would wait for new_op
  ASSERT_NE(old_op, rejected);
  EXPECT_EQ(current.synchronize(old_op).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(current.poll(new_op));
}

// Every op not yet taken for execution is named, whether or not the coordinator has taken its
// request yet: a stall message lists them.
TEST(TensorQueue, InFlightNamesListOpsUntilTakenForExecution) {
  TensorQueue q;
  q.submit(entry("b"));
  q.submit(entry("a"));
  EXPECT_EQ(q.in_flight_names(), (std::vector<std::string>{"a", "b"}));
  q.take_new_requests();
  EXPECT_EQ(q.in_flight_names(), (std::vector<std::string>{"a", "b"}));
  TensorEntry taken;
  ASSERT_TRUE(q.take_entry("a", &taken));
  EXPECT_EQ(q.in_flight_names(), std::vector<std::string>{"b"});
  q.complete(taken, Status::OK());
}

TEST(TensorQueue, UnknownHandle) {
  TensorQueue q;
  EXPECT_TRUE(q.poll(12345));
  EXPECT_EQ(q.synchronize(12345).code(), StatusCode::kInvalidArgument);
}

TEST(TensorQueue, RejectCompletesImmediately) {
  TensorQueue q;
  int fired = 0;
  Handle h = q.reject([&](const Status&) { ++fired; }, Status(StatusCode::kInvalidArgument, "bad"));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(q.synchronize(h).message(), "bad");
}

}  // namespace
}  // namespace arcreduce
