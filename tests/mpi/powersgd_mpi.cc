// PowerSGD over MpiCommunicator under mpirun:
//
//   powersgd_mpi_test <rank q>
//
// 6 steps of a bucket with low-rank tensors (2-D and a convolution kernel), a 1-D tensor, and
// tensors of 0 and 1 elements. Every rank computes every rank's gradient (a pure function of
// rank, tensor, index and step), so each runs the naive double-precision reference
// (tests/compressors/powersgd_reference.h) for the whole world. After every step: the output
// equals rank 0's bit for bit and the reference's within 2e-5 of its scale, this rank's error
// buffer equals the reference's, and sum over ranks of M = sum of errors + P * output.
// Failures print "[rank R] FAIL: ..." and the exit code is non-zero.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compressors/compressor.h"
#include "compressors/matrix_view.h"
#include "compressors/powersgd_math.h"
#include "ops/mpi_communicator.h"
#include "runtime/compressor_config.h"
#include "tests/compressors/powersgd_reference.h"

namespace {

int g_failures = 0;

void fail(int rank, const std::string& what) {
  if (++g_failures <= 5) std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank, what.c_str());
}

float input(int rank, size_t t, size_t i, int step) {
  const uint32_t h =
      static_cast<uint32_t>(i * 2654435761u + t * 40503u + rank * 97u + step * 7919u);
  return static_cast<float>(static_cast<int>(h % 2001u) - 1000) / 100.0f;
}

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
  size_t elements() const {
    size_t n = 1;
    for (int64_t s : shape) n *= static_cast<size_t>(s);
    return n;
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  {
    arcreduce::MpiCommunicator comm(MPI_COMM_WORLD);
    arcreduce::Config config;
    config.min_compress_elements = 0;
    config.powersgd_rank = argc > 1 ? std::atoi(argv[1]) : 1;
    const arcreduce::CompressorOptions options = arcreduce::compressor_options(config);
    const arcreduce::CompressionSpec spec{"powersgd", 1.0, "none", "element"};
    arcreduce::CompressorStats stats;
    arcreduce::Logger log = arcreduce::make_logger(rank, "error");
    arcreduce::StateStore store;
    auto compressor = arcreduce::make_compressor("powersgd");
    const std::vector<Spec> specs = {
        {"w", {40, 12}}, {"conv", {8, 2, 3, 3}}, {"bias", {12}}, {"one", {1}}, {"empty", {0}}};
    std::vector<arcreduce::testing::ReferencePowerSgd> refs;
    for (const Spec& s : specs) {
      const arcreduce::MatrixView view = arcreduce::matrix_view(s.shape);
      const int64_t n = view.usable ? view.rows : 1;
      const int64_t m = view.usable ? view.cols : static_cast<int64_t>(s.elements());
      const int64_t q = arcreduce::powersgd::effective_rank(config.powersgd_rank, n, m);
      const bool low_rank = view.usable && (n + m) * q * 2 < n * m;
      refs.emplace_back(size, s.name, n, m, static_cast<int>(q), low_rank);
    }
    for (int step = 0; step < 6; ++step) {
      const size_t count = specs.size();
      std::vector<std::vector<float>> g(count), mats(count), out(count);
      std::vector<arcreduce::CompressTensor> bucket(count);
      for (size_t t = 0; t < count; ++t) {
        const size_t n = specs[t].elements();
        arcreduce::TensorState& s = store.get(specs[t].name, n);
        const std::vector<float>& e = s.floats["powersgd.error"];
        for (size_t i = 0; i < n; ++i) g[t].push_back(input(rank, t, i, step));
        mats[t] = g[t];
        if (e.size() == n) {
          for (size_t i = 0; i < n; ++i) mats[t][i] += e[i];
        }
        out[t].assign(n, std::nanf(""));
        bucket[t].name = specs[t].name;
        bucket[t].shape = specs[t].shape;
        bucket[t].elements = n;
        bucket[t].step = s.compressed_steps;
        bucket[t].input = g[t].data();
        bucket[t].output = out[t].data();
      }
      arcreduce::CompressContext ctx{comm, options, spec, stats, log, &store};
      compressor->reduce(bucket, ctx);
      for (size_t t = 0; t < count; ++t) {
        const size_t n = specs[t].elements();
        arcreduce::TensorState& s = store.get(specs[t].name, n);
        ++s.compressed_steps;
        const std::vector<float>& e = s.floats["powersgd.error"];
        std::vector<std::vector<float>> all(size);
        for (int r = 0; r < size; ++r) {
          for (size_t i = 0; i < n; ++i) all[r].push_back(input(r, t, i, step));
        }
        const std::vector<double> want = refs[t].step(all, static_cast<uint64_t>(step));
        double scale = 1;
        for (double v : want) scale = std::max(scale, 1 + std::fabs(v));
        // [M, error, |M|] summed over ranks; outputs compared with rank 0's.
        std::vector<double> local(3 * n, 0.0), total(3 * n, 0.0);
        for (size_t i = 0; i < n; ++i) {
          local[3 * i] = mats[t][i];
          local[3 * i + 1] = e.empty() ? 0.0 : e[i];
          local[3 * i + 2] = std::fabs(mats[t][i]);
        }
        MPI_Allreduce(local.data(), total.data(), static_cast<int>(3 * n), MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD);
        std::vector<float> root = out[t];
        MPI_Bcast(root.data(), static_cast<int>(n), MPI_FLOAT, 0, MPI_COMM_WORLD);
        const std::string where = "step " + std::to_string(step) + " tensor " + specs[t].name;
        for (size_t i = 0; i < n; ++i) {
          if (!(out[t][i] == root[i])) fail(rank, where + ": output differs from rank 0's");
          if (!(std::fabs(out[t][i] - want[i]) <= 2e-5 * scale)) {
            fail(rank, where + " element " + std::to_string(i) + ": output " +
                           std::to_string(out[t][i]) + ", reference " + std::to_string(want[i]));
          }
          const double mine = e.empty() ? 0.0 : e[i];
          if (!(std::fabs(mine - refs[t].error[rank][i]) <= 2e-5 * scale)) {
            fail(rank, where + " element " + std::to_string(i) + ": error " + std::to_string(mine) +
                           ", reference " + std::to_string(refs[t].error[rank][i]));
          }
          const double want_sum = total[3 * i] - total[3 * i + 1];
          if (!(std::fabs(size * static_cast<double>(out[t][i]) - want_sum) <=
                1e-5 * std::max(1.0, total[3 * i + 2]))) {
            fail(rank, where + " element " + std::to_string(i) + ": P * output " +
                           std::to_string(size * out[t][i]) + " != sum(M) - sum(error) " +
                           std::to_string(want_sum));
          }
        }
      }
    }
  }
  int failures = g_failures, worst = 0;
  MPI_Allreduce(&failures, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("powersgd_mpi_test: %s\n", worst ? "FAILED" : "passed");
  MPI_Finalize();
  return worst ? 1 : 0;
}
