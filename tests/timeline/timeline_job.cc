// The job behind the timeline tests (tests/timeline/CMakeLists.txt): every rank reduces a set of
// tensors through every compressor three times, plus one tensor whose shape differs across ranks
// (an error response). Rank 0 writes the timeline named by ARCREDUCE_TIMELINE; timeline_check then
// reads it.
//
//   timeline_job            three rounds, then shutdown; exit 0 when every result is as expected
//   timeline_job --abort    rank 1 calls MPI_Abort after two rounds while rank 0 waits in the
//                           third: the file must still be valid JSON holding the first two
#include <arcreduce/arcreduce.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Spec {
  const char* name;
  std::vector<int64_t> shape;
  const char* compressor;
  const char* error_feedback;
};

const Spec kSpecs[] = {
    {"dense/a", {1000}, "none", "none"},      {"dense/b", {33}, "none", "none"},
    {"arc/w", {64, 32}, "arctopk", "ef21m"},  {"topk/w", {40, 30}, "topk", "ef14"},
    {"randk/w", {40, 30}, "randk", "ef14"},   {"fp16/w", {500}, "fp16", "none"},
    {"oktopk/w", {64, 32}, "oktopk", "none"},
};

int failures = 0;

void round_of_ops(int rank, int size) {
  std::vector<std::vector<float>> data;
  std::vector<arcreduce::Handle> handles;
  for (const Spec& s : kSpecs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    data.emplace_back(static_cast<size_t>(n), 1.0f + static_cast<float>(rank));
    arcreduce::AllreduceOptions options;
    options.compression.compressor = s.compressor;
    options.compression.error_feedback = s.error_feedback;
    options.compression.ratio = 0.1;
    handles.push_back(arcreduce::allreduce_async(
        s.name, arcreduce::Tensor{data.back().data(), arcreduce::DType::kFloat32, s.shape},
        options));
  }
  // Shapes that differ across ranks: every rank gets an error naming the tensor.
  std::vector<float> odd(static_cast<size_t>(4 + rank), 0.0f);
  const arcreduce::Handle mismatch = arcreduce::allreduce_async(
      "mismatch/x", arcreduce::Tensor{odd.data(), arcreduce::DType::kFloat32, {4 + rank}});
  for (size_t i = 0; i < handles.size(); ++i) {
    const arcreduce::Status status = arcreduce::synchronize(handles[i]);
    if (!status.ok()) {
      std::printf("[rank %d] FAIL %s: %s\n", rank, kSpecs[i].name, status.message().c_str());
      ++failures;
    }
  }
  const arcreduce::Status status = arcreduce::synchronize(mismatch);
  if (size > 1 && status.ok()) {
    std::printf("[rank %d] FAIL mismatch/x succeeded\n", rank);
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool abort_job = argc > 1 && std::strcmp(argv[1], "--abort") == 0;
  arcreduce::init();
  const int rank = arcreduce::rank(), size = arcreduce::size();
  round_of_ops(rank, size);  // error feedback's warm start: dense
  round_of_ops(rank, size);  // compressed
  if (abort_job) {
    if (rank == 1) {
      // Give rank 0's coordinator a few idle cycles to flush round one, then crash the job.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::printf("[rank 1] aborting the job on purpose\n");
      std::fflush(stdout);
      MPI_Abort(MPI_COMM_WORLD, 7);
    }
    round_of_ops(rank, size);  // never completes: rank 1 is gone
  }
  round_of_ops(rank, size);
  arcreduce::shutdown();
  if (rank == 0) std::printf("timeline_job: %d failures\n", failures);
  // No MPI_Finalize() here: init() initialised MPI, so arcreduce finalises it at exit, after
  // tearing down its runtime (whose communicators must be freed before MPI is finalised).
  return failures == 0 ? 0 : 1;
}
