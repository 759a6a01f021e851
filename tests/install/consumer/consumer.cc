// Averages a small tensor across ranks through an installed arcreduce and checks the result.
// Exit status 0 when every element on this rank is the expected mean.
#include <cstdio>
#include <vector>

#include <arcreduce/arcreduce.h>

int main() {
  arcreduce::init();
  const int rank = arcreduce::rank(), size = arcreduce::size();
  std::vector<float> values(6);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(rank * 10 + i);

  const arcreduce::Status status =
      arcreduce::allreduce("consumer.values", {values.data(), arcreduce::DType::kFloat32, {2, 3}});
  int wrong = status.ok() ? 0 : 1;
  for (size_t i = 0; i < values.size(); ++i) {
    const float expected = 10.0f * static_cast<float>(size - 1) / 2 + static_cast<float>(i);
    if (values[i] != expected) ++wrong;
  }
  std::printf("consumer rank %d/%d: %s %s\n", rank, size, wrong ? "WRONG" : "ok",
              status.message().c_str());
  arcreduce::shutdown();
  return wrong ? 1 : 0;
}
