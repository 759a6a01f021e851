#include "runtime/compressor_config.h"

#include "runtime/config_fields.h"

namespace arcreduce {

CompressorOptions compressor_options(const Config& config) {
  CompressorOptions o;
  o.seed = config.seed;
  o.min_compress_elements = config.min_compress_elements;
  o.check_consistency = config.check_consistency;
  o.arctopk.sketch_rank = config.sketch_rank;
  o.arctopk.row_length = config.row_length;
  o.arctopk.random_rows = config.random_rows;
  o.feedback.eta = config.ef_momentum;
  o.feedback.masking = config.ef_masking;
  o.feedback.init = ef_init_of(config);
  o.feedback.warmup_steps = config.warmup_steps;
  o.oktopk.tau = config.oktopk_tau;
  o.oktopk.tau_prime = config.oktopk_tau_prime;
  o.oktopk.rebalance = config.oktopk_rebalance;
  o.powersgd.rank = config.powersgd_rank;
  return o;
}

}  // namespace arcreduce
