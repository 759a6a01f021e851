// Ok-Topk over MpiCommunicator under mpirun (real non-blocking point-to-point):
//
//   oktopk_mpi_test <rebalance 0|1>
//
// 12 calls (tau = 4, tau' = 3) of a bucket of tensors of several sizes (0, 1, below k < P, sparse)
// with inputs that have ties and zeros. After every call: every rank's output equals rank 0's
// bit for bit, and sum over ranks of acc = sum of residuals + P * output (acc = gradient plus the
// residual before the call). Failures print "[rank R] FAIL: ..." and the exit code is non-zero.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compressors/compressor.h"
#include "ops/mpi_communicator.h"
#include "runtime/compressor_config.h"

namespace {

int g_failures = 0;

void fail(int rank, const std::string& what) {
  if (++g_failures <= 5) std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank, what.c_str());
}

float input(int rank, size_t t, size_t i, int step) {
  const uint32_t h =
      static_cast<uint32_t>(i * 2654435761u + t * 40503u + rank * 97u + step * 7919u);
  if (h % 7 == 0) return 0.0f;  // zeros
  if (h % 5 == 0) return 0.5f;  // ties
  return static_cast<float>(static_cast<int>(h % 2001u) - 1000) / 100.0f;
}

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
    config.oktopk_tau = 4;
    config.oktopk_tau_prime = 3;
    config.oktopk_rebalance = argc > 1 && std::string(argv[1]) == "1";
    const arcreduce::CompressorOptions options = arcreduce::compressor_options(config);
    const arcreduce::CompressionSpec spec{"oktopk", 0.05, "none", "element"};
    arcreduce::CompressorStats stats;
    arcreduce::Logger log = arcreduce::make_logger(rank, "error");
    arcreduce::StateStore store;
    auto compressor = arcreduce::make_compressor("oktopk");
    const std::vector<size_t> sizes = {5000, 0, 1, 30, 777};
    for (int step = 0; step < 12; ++step) {
      std::vector<std::vector<float>> g(sizes.size()), acc(sizes.size()), out(sizes.size());
      std::vector<arcreduce::CompressTensor> bucket(sizes.size());
      for (size_t t = 0; t < sizes.size(); ++t) {
        const std::string name = "t" + std::to_string(t);
        arcreduce::TensorState& s = store.get(name, sizes[t]);
        const std::vector<float>& res = s.floats["oktopk.residual"];
        for (size_t i = 0; i < sizes[t]; ++i) g[t].push_back(input(rank, t, i, step));
        acc[t] = g[t];
        if (res.size() == sizes[t]) {
          for (size_t i = 0; i < sizes[t]; ++i) acc[t][i] += res[i];
        }
        out[t].assign(sizes[t], std::nanf(""));
        bucket[t].name = name;
        bucket[t].shape = {static_cast<int64_t>(sizes[t])};
        bucket[t].elements = sizes[t];
        bucket[t].input = g[t].data();
        bucket[t].output = out[t].data();
      }
      arcreduce::CompressContext ctx{comm, options, spec, stats, log, &store};
      compressor->reduce(bucket, ctx);
      for (size_t t = 0; t < sizes.size(); ++t) {
        const size_t n = sizes[t];
        const std::vector<float>& res =
            store.get("t" + std::to_string(t), n).floats["oktopk.residual"];
        // [acc, residual, |acc|] summed over ranks; outputs compared with rank 0's.
        std::vector<double> local(3 * n, 0.0), total(3 * n, 0.0);
        for (size_t i = 0; i < n; ++i) {
          local[3 * i] = acc[t][i];
          local[3 * i + 1] = res.empty() ? 0.0 : res[i];
          local[3 * i + 2] = std::fabs(acc[t][i]);
        }
        MPI_Allreduce(local.data(), total.data(), static_cast<int>(3 * n), MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD);
        std::vector<float> root = out[t];
        MPI_Bcast(root.data(), static_cast<int>(n), MPI_FLOAT, 0, MPI_COMM_WORLD);
        const std::string where = "step " + std::to_string(step) + " tensor " + std::to_string(t);
        for (size_t i = 0; i < n; ++i) {
          if (!(out[t][i] == root[i])) fail(rank, where + ": output differs from rank 0's");
          const double want = total[3 * i] - total[3 * i + 1];
          if (!(std::fabs(size * static_cast<double>(out[t][i]) - want) <=
                1e-5 * std::max(1.0, total[3 * i + 2]))) {
            fail(rank, where + " element " + std::to_string(i) + ": P * output " +
                           std::to_string(size * out[t][i]) + " != sum(acc) - sum(residual) " +
                           std::to_string(want));
          }
        }
      }
    }
  }
  int failures = g_failures, worst = 0;
  MPI_Allreduce(&failures, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("oktopk_mpi_test: %s\n", worst ? "FAILED" : "passed");
  MPI_Finalize();
  return worst ? 1 : 0;
}
