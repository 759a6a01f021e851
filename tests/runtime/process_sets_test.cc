// The process-set helpers of the API (runtime/process_sets.h): the handle layout that tells the
// sets' runtimes apart, a set's ranks and its own numbering, the checks of a rank list and the
// timeline path of a set. The sets themselves run under mpirun (tests/mpi/
// runtime_process_set_test.cc).
#include "runtime/process_sets.h"

#include <gtest/gtest.h>

namespace arcreduce {
namespace {

TEST(ProcessSetHandles, TagRoundTripsEveryIdAndKeepsTheQueueHandle) {
  for (int id : {0, 1, 2, 77, kMaxProcessSetId}) {
    for (Handle h : {Handle{1}, Handle{12345}, kQueueHandleMask}) {
      const Handle tagged = tag_handle(h, id);
      EXPECT_EQ(process_set_of(tagged), id);
      EXPECT_EQ(queue_handle_of(tagged), h);
      EXPECT_EQ(tagged >> 63, 0u) << "bit 63 is the API's mark of handles without a runtime";
    }
  }
  EXPECT_EQ(tag_handle(5, 0), Handle{5}) << "set 0's handles are the queue's own";
}

TEST(ProcessSetRanks, IndexAmongAscendingRanks) {
  const std::vector<int> ranks{1, 3, 4, 8};
  EXPECT_EQ(rank_in_set(ranks, 1), 0);
  EXPECT_EQ(rank_in_set(ranks, 4), 2);
  EXPECT_EQ(rank_in_set(ranks, 8), 3);
  EXPECT_EQ(rank_in_set(ranks, 0), -1);
  EXPECT_EQ(rank_in_set(ranks, 5), -1);
  EXPECT_EQ(rank_in_set(ranks, 9), -1);
  EXPECT_EQ(rank_in_set({}, 0), -1);
  EXPECT_EQ(ranks_string(ranks), "[1, 3, 4, 8]");
  EXPECT_EQ(ranks_string({}), "[]");
}

TEST(ProcessSetRanks, ChecksNameTheProblem) {
  EXPECT_EQ(check_process_set_ranks({0}, 1), "");
  EXPECT_EQ(check_process_set_ranks({0, 2, 3}, 4), "");
  EXPECT_NE(check_process_set_ranks({}, 4).find("at least one rank"), std::string::npos);
  EXPECT_NE(check_process_set_ranks({-1, 0}, 4).find("rank -1 is not a rank of the job (0-3)"),
            std::string::npos);
  EXPECT_NE(check_process_set_ranks({0, 4}, 4).find("rank 4 is not a rank of the job"),
            std::string::npos);
  EXPECT_NE(check_process_set_ranks({1, 1, 2}, 4).find("rank 1 is listed twice"),
            std::string::npos);
}

TEST(ProcessSetTimeline, BesideTheJobsFile) {
  EXPECT_EQ(process_set_timeline("trace.json", 3), "trace.set3.json");
  EXPECT_EQ(process_set_timeline("/tmp/t", 12), "/tmp/t.set12");
  EXPECT_EQ(process_set_timeline(".json", 1), ".json.set1");
}

}  // namespace
}  // namespace arcreduce
