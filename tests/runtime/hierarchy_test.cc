// The whole runtime on simulated hosts of several ranks, with every All-Reduce summed within
// each host first (LoopbackWorld with Hierarchy::kOn, as ARCREDUCE_HIERARCHICAL=1): every
// compressor on even and uneven hosts keeps the replicas bit-identical, equals the dense mean
// where nothing is dropped, Stats say hosts and hierarchical, and state files move between
// layouts.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "tests/runtime/loopback_harness.h"
#include "tests/runtime/reference.h"

namespace arcreduce {
namespace testing {
namespace {

struct Layout {
  int ranks, per_host;
};
// 2 hosts x 2, hosts of 2 and 1, 2 hosts x 4, 3 hosts x 2.
const Layout kLayouts[] = {{4, 2}, {3, 2}, {8, 4}, {6, 2}};

struct Case {
  const char* compressor;
  const char* error_feedback;
};
const Case kCases[] = {{"none", "none"},    {"fp16", "none"},   {"topk", "ef14"},
                       {"randk", "ef14"},   {"arctopk", "efm"}, {"arctopk", "ef21m"},
                       {"arctopk", "none"}, {"oktopk", "none"}, {"powersgd", "none"}};

Config config_for(const Case& c, double ratio) {
  Config config = test_config();
  config.compressor = c.compressor;
  config.error_feedback = c.error_feedback;
  config.compress_ratio = ratio;
  config.min_compress_elements = 0;
  return config;
}

// `steps` steps of three tensors; returns every rank's outputs of every step, flattened.
std::vector<std::vector<double>> run(const Layout& layout, const Config& config, int steps,
                                     std::vector<Stats>* stats) {
  const std::vector<std::vector<int64_t>> shapes = {{32, 8}, {16}, {4, 6, 2, 2}};
  std::vector<std::vector<double>> outputs(layout.ranks);
  stats->assign(layout.ranks, Stats());
  LoopbackWorld world(layout.ranks, layout.per_host, Hierarchy::kOn);
  run_runtimes(world, std::vector<Config>(layout.ranks, config), [&](Runtime& rt, int rank) {
    for (int s = 0; s < steps; ++s) {
      std::vector<HostTensor> tensors;
      std::vector<Handle> handles;
      for (const auto& shape : shapes) tensors.emplace_back(DType::kFloat32, shape);
      for (size_t t = 0; t < shapes.size(); ++t) {
        for (size_t i = 0; i < tensors[t].count(); ++i) {
          tensors[t].set(i, input_value(rank, static_cast<int>(t) + 3 * s, i));
        }
        handles.push_back(rt.allreduce_async("t" + std::to_string(t), tensors[t].view(), {}));
      }
      for (size_t t = 0; t < shapes.size(); ++t) {
        const Status st = rt.synchronize(handles[t]);
        ASSERT_TRUE(st.ok()) << st.message();
        for (size_t i = 0; i < tensors[t].count(); ++i) {
          outputs[rank].push_back(tensors[t].get(i));
        }
      }
    }
    (*stats)[rank] = rt.stats();
  });
  return outputs;
}

std::string describe(const Layout& l, const Case& c) {
  return std::to_string(l.ranks) + " ranks, " + std::to_string(l.per_host) + " per host, " +
         c.compressor + "/" + c.error_feedback;
}

TEST(HierarchyRuntime, EveryCompressorKeepsReplicasBitIdentical) {
  for (const Layout& layout : kLayouts) {
    for (const Case& c : kCases) {
      std::vector<Stats> stats;
      const auto outputs = run(layout, config_for(c, 0.25), 3, &stats);
      for (int r = 1; r < layout.ranks; ++r) {
        ASSERT_EQ(outputs[r].size(), outputs[0].size());
        EXPECT_EQ(
            std::memcmp(outputs[r].data(), outputs[0].data(), outputs[0].size() * sizeof(double)),
            0)
            << describe(layout, c) << ": rank " << r << " differs from rank 0";
      }
      for (int r = 0; r < layout.ranks; ++r) {
        EXPECT_EQ(stats[r].hosts, (layout.ranks + layout.per_host - 1) / layout.per_host)
            << describe(layout, c);
        EXPECT_TRUE(stats[r].hierarchical) << describe(layout, c);
      }
    }
  }
}

TEST(HierarchyRuntime, NothingDroppedEqualsTheDenseMean) {
  for (const Layout& layout : kLayouts) {
    for (const Case& c : kCases) {
      const std::string feedback = c.error_feedback;
      if (std::string(c.compressor) == "powersgd" || feedback == "ef21m" || feedback == "efm") {
        continue;  // a low-rank approximation, and momenta of the runtime's: no mean to compare
      }
      std::vector<Stats> stats;
      const auto outputs = run(layout, config_for(c, 1.0), 2, &stats);
      // The inputs are small integers (|x| <= 16): their sums are exact in fp32 and in fp16, the
      // mean is rounded once (fp16: to 2^-6 at |mean| <= 16).
      const double tolerance = std::string(c.compressor) == "fp16" ? 1.0 / 64 : 1e-5;
      for (int r = 0; r < layout.ranks; ++r) {
        size_t at = 0;
        for (int s = 0; s < 2; ++s) {
          for (int t = 0; t < 3; ++t) {
            const size_t count = t == 0 ? 256 : (t == 1 ? 16 : 96);
            for (size_t i = 0; i < count; ++i, ++at) {
              const double want = expected_value(layout.ranks, t + 3 * s, i, ReduceOp::kAverage);
              ASSERT_NEAR(outputs[r][at], want, tolerance)
                  << describe(layout, c) << ": rank " << r << " step " << s << " tensor " << t
                  << " element " << i;
            }
          }
        }
      }
    }
  }
}

// Error feedback is per rank under the hierarchy too (compressors.md), so a state file does not
// depend on how ranks sit on hosts: saved on 2 hosts x 2 ranks, it loads on one host of 4 and on
// 4 hosts of 1, saves again to the same bytes, and training goes on with identical replicas.
TEST(HierarchyRuntime, StateResumesWithAnotherNumberOfRanksPerHost) {
  const std::vector<int64_t> shape = {32, 8};
  auto step = [&](Runtime& rt, int rank, int s) {
    HostTensor t(DType::kFloat32, shape);
    for (size_t i = 0; i < t.count(); ++i) t.set(i, input_value(rank, s, i));
    const Status st = rt.synchronize(rt.allreduce_async("w", t.view(), {}));
    EXPECT_TRUE(st.ok()) << st.message();
    std::vector<double> out(t.count());
    for (size_t i = 0; i < t.count(); ++i) out[i] = t.get(i);
    return out;
  };
  auto read = [](const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string dir = ::testing::TempDir();
  for (const Case& c : {Case{"topk", "ef14"}, Case{"arctopk", "efm"}, Case{"oktopk", "none"}}) {
    const Config config = config_for(c, 0.25);
    auto saved = [&](int rank) { return dir + "/hier_state_" + std::to_string(rank) + ".bin"; };
    LoopbackWorld two_hosts(4, 2, Hierarchy::kOn);
    run_runtimes(two_hosts, std::vector<Config>(4, config), [&](Runtime& rt, int rank) {
      for (int s = 0; s < 3; ++s) step(rt, rank, s);
      rt.save_state(saved(rank));
    });
    for (const int per_host : {4, 1}) {
      std::vector<std::vector<double>> outputs(4);
      std::vector<std::string> again(4);
      LoopbackWorld world(4, per_host, Hierarchy::kOn);
      run_runtimes(world, std::vector<Config>(4, config), [&](Runtime& rt, int rank) {
        rt.load_state(saved(rank));
        const std::string copy = saved(rank) + "." + std::to_string(per_host);
        rt.save_state(copy);
        again[rank] = read(copy);
        outputs[rank] = step(rt, rank, 3);
      });
      for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(again[r], read(saved(r))) << c.compressor << " rank " << r << ", " << per_host;
        EXPECT_EQ(outputs[r], outputs[0]) << c.compressor << " rank " << r << ", " << per_host;
      }
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
