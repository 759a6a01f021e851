// The compressors' registry (compressors/registry.h) and the options the runtime hands them
// (compressor_options(), runtime/compressor_config.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "compressors/compressor.h"
#include "compressors/feedback_kinds.h"
#include "compressors/registry.h"
#include "runtime/compressor_config.h"
#include "runtime/config_fields.h"

namespace arcreduce {
namespace testing {
namespace registry_test {

// ARCREDUCE_COMPRESSOR's choices are the rows of compressors.inc, in order (rows tests register
// come after them), and ARCREDUCE_ERROR_FEEDBACK's the feedback rows.
TEST(CompressorRegistry, ConfigurationNamesAreTheRows) {
  const std::vector<std::string> rows = registered_compressors();
  const std::vector<std::string>& names = compressor_names();
  ASSERT_GE(rows.size(), names.size());
  EXPECT_EQ(std::vector<std::string>(rows.begin(), rows.begin() + names.size()), names);
  std::vector<std::string> feedbacks;
  for (const FeedbackRow& row : kFeedbackRows) feedbacks.push_back(row.name);
  EXPECT_EQ(error_feedback_names(), feedbacks);
}

// The traits the runtime decided by name before the table, row by row.
TEST(CompressorRegistry, RowsKeepTheTraitsTheRuntimeUses) {
  for (const std::string& name : compressor_names()) {
    const CompressorTraits* row = find_compressor(name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_EQ(row->native(), name == "none") << name;
    EXPECT_EQ(row->dense, name == "none" || name == "fp16") << name;
    EXPECT_EQ(row->uses_ratio, !row->dense && name != "powersgd") << name;
    EXPECT_EQ(row->uses_granularity, name == "topk" || name == "randk") << name;
    EXPECT_EQ(row->keeps_own_residual, name == "oktopk" || name == "powersgd") << name;
    EXPECT_FALSE(row->does_own_warmup) << name;
    const bool wrapped = !row->dense && !row->keeps_own_residual;
    for (const FeedbackRow& feedback : kFeedbackRows) {
      EXPECT_EQ(row->takes_feedback(feedback.name), wrapped || feedback.kind == FeedbackKind::kNone)
          << name << " " << feedback.name;
    }
    EXPECT_FALSE(row->takes_feedback("ef99")) << name;
    const CudaPath cuda = name == "none"      ? CudaPath::kDense
                          : name == "arctopk" ? CudaPath::kArcTopK
                                              : CudaPath::kHostCopies;
    EXPECT_EQ(row->cuda, cuda) << name;
    EXPECT_EQ(make_compressor(name) != nullptr, name != "none") << name;
  }
  EXPECT_EQ(find_compressor("zip"), nullptr);
  EXPECT_EQ(make_compressor("zip"), nullptr);
  EXPECT_FALSE(keeps_own_residual("zip"));
  const FeedbackRow* efm = find_feedback("efm");
  ASSERT_NE(efm, nullptr);
  EXPECT_TRUE(efm->does_own_warmup);
  EXPECT_FALSE(find_feedback("ef21m")->does_own_warmup);
  EXPECT_EQ(find_feedback("ef99"), nullptr);
}

TEST(CompressorRegistry, RegisterRefusesAnExistingNameAndRowsWithoutFactoryOrNone) {
  CompressorTraits again;
  again.name = "arctopk";
  again.factory = [] { return make_compressor("topk"); };
  EXPECT_THROW(register_compressor(again), Error);
  CompressorTraits no_factory;
  no_factory.name = "registry_test_no_factory";
  EXPECT_THROW(register_compressor(no_factory), Error);
  CompressorTraits no_none = again;
  no_none.name = "registry_test_no_none";
  no_none.feedbacks = feedback_bit(FeedbackKind::kEf14);
  EXPECT_THROW(register_compressor(no_none), Error);
  EXPECT_EQ(find_compressor("registry_test_no_factory"), nullptr);
  EXPECT_EQ(find_compressor("registry_test_no_none"), nullptr);
}

// Every field the compressors read comes from its Config field, none from another.
TEST(CompressorOptions, EachFieldFromItsSetting) {
  Config c;
  c.seed = 11;
  c.min_compress_elements = 12;
  c.check_consistency = true;
  c.sketch_rank = 13;
  c.row_length = 14;
  c.random_rows = 0.15;
  c.ef_momentum = 0.16;
  c.ef_masking = false;
  c.ef_init = "zero";
  c.warmup_steps = 17;
  c.oktopk_tau = 18;
  c.oktopk_tau_prime = 19;
  c.oktopk_rebalance = true;
  c.powersgd_rank = 20;
  const CompressorOptions o = compressor_options(c);
  EXPECT_EQ(o.seed, 11u);
  EXPECT_EQ(o.min_compress_elements, 12);
  EXPECT_TRUE(o.check_consistency);
  EXPECT_EQ(o.arctopk.sketch_rank, 13);
  EXPECT_EQ(o.arctopk.row_length, 14);
  EXPECT_EQ(o.arctopk.random_rows, 0.15);
  EXPECT_EQ(o.feedback.eta, 0.16);
  EXPECT_FALSE(o.feedback.masking);
  EXPECT_EQ(o.feedback.init, FeedbackInit::kZero);
  EXPECT_EQ(o.feedback.warmup_steps, 17);
  EXPECT_EQ(o.oktopk.tau, 18);
  EXPECT_EQ(o.oktopk.tau_prime, 19);
  EXPECT_TRUE(o.oktopk.rebalance);
  EXPECT_EQ(o.powersgd.rank, 20);

  const CompressorOptions defaults = compressor_options(Config{});
  EXPECT_EQ(defaults.feedback.init, FeedbackInit::kWarm);
  EXPECT_TRUE(defaults.feedback.masking);
  EXPECT_FALSE(defaults.oktopk.rebalance);
}

}  // namespace registry_test
}  // namespace testing
}  // namespace arcreduce
