// The link model's predictions against the formulas written out by hand, the choice it makes
// from them, and the element ranges of Rabenseifner's halving rounds.
#include "ops/link_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "ops/halving_allreduce.h"

namespace arcreduce {
namespace {

LinkModel link_of(double latency_us, double mbit_per_s, double reduce_gb_per_s = 1.0) {
  LinkModel link;
  link.latency_seconds = latency_us * 1e-6;
  link.seconds_per_byte = 8e-6 / mbit_per_s;
  link.reduce_seconds_per_byte = 1e-9 / reduce_gb_per_s;
  link.measured = true;
  return link;
}

TEST(LinkModelTest, PredictionsFollowTheTextbookCosts) {
  const LinkModel link = link_of(200, 100, 2);
  const double a = link.latency_seconds, b = link.seconds_per_byte;
  const double g = link.reduce_seconds_per_byte;
  const double n = 100000;
  // Eight ranks: a power of two, nothing folds.
  EXPECT_DOUBLE_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kRing, 100000, 8, link),
                   14 * a + 14.0 / 8 * n * b + 7.0 / 8 * n * g);
  EXPECT_DOUBLE_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kDoubling, 100000, 8, link),
                   3 * (a + n * b + n * g));
  EXPECT_DOUBLE_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kRabenseifner, 100000, 8, link),
                   6 * a + 14.0 / 8 * n * b + 7.0 / 8 * n * g);
  // Six ranks: four exchange, two fold in and out with the whole message.
  const double fold = 2 * (a + n * b + n * g);
  EXPECT_DOUBLE_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kDoubling, 100000, 6, link),
                   2 * (a + n * b + n * g) + fold);
  EXPECT_DOUBLE_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kRabenseifner, 100000, 6, link),
                   4 * a + 6.0 / 4 * n * b + 3.0 / 4 * n * g + fold);
  EXPECT_DOUBLE_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kRing, 100000, 6, link),
                   10 * a + 10.0 / 6 * n * b + 5.0 / 6 * n * g);
  // Nothing to send costs nothing; MPI's own is not predicted.
  EXPECT_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kRing, 0, 8, link), 0);
  EXPECT_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kRing, 100, 1, link), 0);
  EXPECT_LT(predicted_allreduce_seconds(AllreduceAlgorithm::kMpi, 100, 8, link), 0);
}

AllreduceAlgorithm auto_choice(size_t bytes, int size, const LinkModel& link, int local_size = 1) {
  return choose_allreduce_algorithm(AllreduceAlgorithm::kAuto, bytes, size, local_size,
                                    kRingThresholdBytes, link);
}

TEST(LinkModelTest, AutoKeepsTheRingWhereTheThresholdsPutItAndPicksAmongTheTrees) {
  const LinkModel slow = link_of(300, 100);
  // Small messages: rounds dominate, doubling has the fewest.
  EXPECT_EQ(auto_choice(64, 8, slow), AllreduceAlgorithm::kDoubling);
  // Middle sizes: the ring's bytes in doubling's rounds.
  EXPECT_EQ(auto_choice(64 << 10, 8, slow), AllreduceAlgorithm::kRabenseifner);
  // Naively, whatever the size, rank count and link: the ring wherever the thresholds take it,
  // elsewhere the faster of doubling and Rabenseifner (a tie to Rabenseifner; at two ranks,
  // where Rabenseifner sends as much in one more round, doubling).
  for (int size : {2, 3, 4, 5, 6, 7, 8, 16, 64, 256}) {
    for (size_t bytes : {size_t{4}, size_t{1} << 12, size_t{1} << 16, size_t{1} << 18,
                         size_t{1} << 20, size_t{1} << 24}) {
      for (const LinkModel& link : {slow, link_of(50, 10000, 0.5), link_of(2000, 25)}) {
        const AllreduceAlgorithm chosen = auto_choice(bytes, size, link);
        // The ring from 256 KiB (1 MiB at two ranks), beyond 8 ranks from 32 KiB a rank.
        const size_t ring_from =
            size == 2 ? (1u << 20) : (size <= 8 ? (256u << 10) : (32u << 10) * size);
        const bool ring_by_size = bytes >= ring_from;
        AllreduceAlgorithm expected = AllreduceAlgorithm::kRing;
        if (!ring_by_size) {
          const double raben =
              predicted_allreduce_seconds(AllreduceAlgorithm::kRabenseifner, bytes, size, link);
          const double doubling =
              predicted_allreduce_seconds(AllreduceAlgorithm::kDoubling, bytes, size, link);
          expected = doubling < raben || size == 2 ? AllreduceAlgorithm::kDoubling
                                                   : AllreduceAlgorithm::kRabenseifner;
        }
        EXPECT_EQ(chosen, expected) << bytes << " bytes, " << size << " ranks";
      }
    }
  }
}

// At the size they were measured at, the fitted lines decide; at any other the textbook costs.
TEST(LinkModelTest, MeasuredLinesDecideAtTheirOwnSize) {
  LinkModel link = link_of(10, 100);
  link.ranks = 8;
  link.ring = {1e-3, 130e-9};
  link.rabenseifner = {0.6e-3, 140e-9};
  link.doubling = {0.5e-3, 480e-9};
  EXPECT_DOUBLE_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kRing, 1000000, 8, link),
                   1e-3 + 0.13);
  EXPECT_DOUBLE_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kDoubling, 1000, 8, link),
                   0.5e-3 + 480e-6);
  // 100 bytes: doubling 0.548 ms, Rabenseifner 0.614.
  EXPECT_EQ(auto_choice(100, 8, link), AllreduceAlgorithm::kDoubling);
  // 1000 bytes: Rabenseifner 0.74 ms, doubling 0.98.
  EXPECT_EQ(auto_choice(1000, 8, link), AllreduceAlgorithm::kRabenseifner);
  // From the ring threshold on, the ring whatever the lines say.
  link.ring = {1, 1e-3};
  EXPECT_EQ(auto_choice(256 << 10, 8, link), AllreduceAlgorithm::kRing);
  // Another size: the textbook.
  EXPECT_NE(predicted_allreduce_seconds(AllreduceAlgorithm::kRing, 1000000, 16, link), 1 + 1000.0);
  // An unmeasured line (zeros) falls back to the textbook too.
  link.doubling = {};
  EXPECT_DOUBLE_EQ(predicted_allreduce_seconds(AllreduceAlgorithm::kDoubling, 1000, 8, link),
                   3 * (10e-6 + 1000 * 8e-8 + 1000 * 1e-9));
}

TEST(LinkModelTest, FallsBackToThresholdsAndKeepsMpiOnOneHost) {
  const LinkModel slow = link_of(300, 100);
  const LinkModel none;
  // No measurement: the thresholds (the ring from 256 KiB at more than two ranks).
  EXPECT_EQ(auto_choice(64 << 10, 8, none), AllreduceAlgorithm::kDoubling);
  EXPECT_EQ(auto_choice(256 << 10, 8, none), AllreduceAlgorithm::kRing);
  // "thresholds" ignores a measured link.
  EXPECT_EQ(choose_allreduce_algorithm(AllreduceAlgorithm::kThresholds, 64 << 10, 8, 1,
                                       kRingThresholdBytes, slow),
            AllreduceAlgorithm::kDoubling);
  // One host: MPI's, measured or not.
  EXPECT_EQ(auto_choice(64 << 10, 8, slow, 8), AllreduceAlgorithm::kMpi);
  EXPECT_EQ(choose_allreduce_algorithm(AllreduceAlgorithm::kThresholds, 64, 4, 4,
                                       kRingThresholdBytes, none),
            AllreduceAlgorithm::kMpi);
  // A forced algorithm is itself.
  for (AllreduceAlgorithm forced : {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kDoubling,
                                    AllreduceAlgorithm::kMpi, AllreduceAlgorithm::kRabenseifner}) {
    EXPECT_EQ(choose_allreduce_algorithm(forced, 64, 8, 1, kRingThresholdBytes, slow), forced);
  }
  EXPECT_EQ(describe_link(none), "not measured");
  EXPECT_NE(describe_link(slow).find("100.0 Mbit/s"), std::string::npos) << describe_link(slow);
}

// After the last round the p ranks' segments tile [0, count), each round halves the one before,
// and partners at a round keep the two halves of the same segment.
TEST(HalvingSegmentsTest, RoundsHalveAndTheLastOnesTile) {
  for (int p : {1, 2, 4, 8, 16}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{8}, size_t{1001}}) {
      std::vector<std::vector<HalvingSegment>> all;
      for (int index = 0; index < p; ++index) all.push_back(halving_segments(count, index, p));
      std::vector<int> owners(count, 0);
      for (int index = 0; index < p; ++index) {
        const std::vector<HalvingSegment>& kept = all[index];
        ASSERT_EQ(kept.size(), static_cast<size_t>(std::log2(p)));
        HalvingSegment parent{0, count};
        for (size_t round = 0; round < kept.size(); ++round) {
          const HalvingSegment s = kept[round];
          EXPECT_GE(s.begin, parent.begin);
          EXPECT_LE(s.end, parent.end);
          EXPECT_LE(s.end - s.begin, (parent.end - parent.begin + 1) / 2);
          const int partner = index ^ (1 << round);
          const HalvingSegment other = all[partner][round];
          // Together the two halves are the parent, without overlap.
          EXPECT_EQ(std::min(s.begin, other.begin), parent.begin);
          EXPECT_EQ(std::max(s.end, other.end), parent.end);
          EXPECT_EQ((s.end - s.begin) + (other.end - other.begin), parent.end - parent.begin);
          parent = s;
        }
        for (size_t i = parent.begin; i < parent.end; ++i) ++owners[i];
      }
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(owners[i], 1) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace arcreduce
