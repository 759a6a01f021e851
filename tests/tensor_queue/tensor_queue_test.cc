#include <gtest/gtest.h>

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
