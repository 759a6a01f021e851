#include "collective.h"

namespace fmnist {

GradientExchange::GradientExchange(const std::string& compressor, double ratio,
                                   const std::string& error_feedback) {
  options_.op = arcreduce::ReduceOp::kAverage;
  options_.compression.compressor = compressor;
  options_.compression.ratio = ratio;
  // Only the compressors that error feedback wraps: dense ones ignore it, and oktopk and
  // powersgd keep their own residual (the runtime rejects an explicit kind for them).
  if (compressor == "topk" || compressor == "randk" || compressor == "arctopk") {
    options_.compression.error_feedback = error_feedback;
  }
}

void GradientExchange::submit(Parameter& p) {
  handles_.push_back(arcreduce::allreduce_async(
      p.name, arcreduce::Tensor{p.grad.data(), arcreduce::DType::kFloat32, p.shape}, options_));
}

void GradientExchange::wait() {
  arcreduce::Status first_error;
  for (arcreduce::Handle h : handles_) {
    const arcreduce::Status s = arcreduce::synchronize(h);
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  handles_.clear();
  if (first_error.ok()) return;
  const std::string message = first_error.message();
  if (first_error.code() == arcreduce::StatusCode::kInvalidArgument &&
      message.find("not available in this build") != std::string::npos) {
    throw CompressorUnavailable(message);
  }
  throw std::runtime_error(std::string("gradient reduction failed: ") +
                           arcreduce::status_code_name(first_error.code()) + ": " + message);
}

void sum_over_ranks(const std::string& name, std::vector<double>& values) {
  arcreduce::AllreduceOptions options;
  options.op = arcreduce::ReduceOp::kSum;
  options.compression.compressor = "none";
  const arcreduce::Status s = arcreduce::allreduce(
      name,
      arcreduce::Tensor{
          values.data(), arcreduce::DType::kFloat64, {static_cast<int64_t>(values.size())}},
      options);
  if (!s.ok()) throw std::runtime_error("reduction of " + name + " failed: " + s.message());
}

void barrier() {
  std::vector<double> one{1.0};
  sum_over_ranks("fashion_mnist.barrier", one);
}

}  // namespace fmnist
