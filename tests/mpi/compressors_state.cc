// save_state / load_state under real MPI, through the public API (mpirun -np 2..4).
//
//   compressors_state_test [--watchdog-seconds=S]
//
// Tensors cover every kind of compressor state: ARC-Top-K + ef21m (v, h, hbar), Top-K + ef14
// (e), row Rand-K + ef21 (shared randomness keyed by the step counter), element Top-K + ef21m
// on a 1-D fp64 tensor, fp16 (no state), Ok-Topk (residual, thresholds, boundaries, call
// counter; tests/mpi/compressors.cmake sets short periods), PowerSGD (error buffer and the
// warm-start Q), in several dtypes and shapes.
//
// Phase 1: init, 3 steps, save_state(<dir>/state.<rank>), 2 more steps (their outputs kept).
// Phase 2, in the same process: shutdown, init again (fresh runtime, empty state),
// load_state(own file), the same 2 steps with the same inputs: outputs must equal phase 1's bit
// for bit. Then load_state(another rank's file) must throw arcreduce::Error naming that rank.
// Every failure prints "[rank R] FAIL: <case>: <what>" and the job exits non-zero.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "tests/mpi/runtime_process.h"
#include "tests/mpi/runtime_test_util.h"

namespace {

using arcreduce::DType;
using arcreduce_test::TestTensor;

int g_rank = 0;
int g_size = 1;
arcreduce_test::Progress g_progress;

struct Case {
  std::string name, compressor, granularity, error_feedback;
  DType dtype;
  std::vector<int64_t> shape;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"arc_ef21m", "arctopk", "", "ef21m", DType::kFloat32, {16, 12}},
      {"arc_ef21m_conv_bf16", "arctopk", "", "ef21m", DType::kBFloat16, {4, 2, 3, 3}},
      {"topk_ef14_f16", "topk", "element", "ef14", DType::kFloat16, {4, 2, 3, 3}},
      {"randk_row_ef21", "randk", "row", "ef21", DType::kFloat32, {16, 12}},
      {"topk_ef21m_1d_f64", "topk", "element", "ef21m", DType::kFloat64, {40}},
      {"fp16_none", "fp16", "", "none", DType::kFloat32, {16, 12}},
      {"oktopk_f32", "oktopk", "", "none", DType::kFloat32, {16, 12}},
      {"oktopk_bf16", "oktopk", "", "none", DType::kBFloat16, {4, 2, 3, 3}},
      {"powersgd_f32", "powersgd", "", "none", DType::kFloat32, {16, 12}},
      {"powersgd_f16", "powersgd", "", "none", DType::kFloat16, {16, 12}},
  };
  return all;
}

// One step of every case with inputs of `step`; returns the outputs' bytes, case after case.
std::vector<uint8_t> run_step(int step) {
  const std::string where = "step " + std::to_string(step);
  g_progress.set_stage(where);
  std::vector<TestTensor> tensors;
  std::vector<arcreduce::Handle> handles;
  for (const Case& c : cases()) {
    TestTensor& t = tensors.emplace_back(c.dtype, c.shape);
    arcreduce_test::fill_inputs(t, g_rank, step);
  }
  for (size_t i = 0; i < cases().size(); ++i) {
    const Case& c = cases()[i];
    arcreduce::AllreduceOptions o;
    o.compression.compressor = c.compressor;
    o.compression.ratio = 0.3;
    o.compression.error_feedback = c.error_feedback;
    if (!c.granularity.empty()) o.compression.granularity = c.granularity;
    handles.push_back(arcreduce::allreduce_async(c.name, tensors[i].view(), o));
  }
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < cases().size(); ++i) {
    const arcreduce::Status s = arcreduce::synchronize(handles[i]);
    if (!s.ok())
      g_progress.fail(cases()[i].name + " " + where + ": " + arcreduce_test::describe(s));
    bytes.insert(bytes.end(), tensors[i].data(), tensors[i].data() + tensors[i].nbytes());
  }
  return bytes;
}

// Compares phase 2's outputs with phase 1's, naming the first differing case.
void expect_same(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got, int step) {
  size_t offset = 0;
  for (const Case& c : cases()) {
    const size_t n =
        static_cast<size_t>(arcreduce_test::count_of(c.shape)) * arcreduce_test::elem_size(c.dtype);
    if (got.size() < offset + n || std::memcmp(want.data() + offset, got.data() + offset, n)) {
      g_progress.fail(c.name + " step " + std::to_string(step) +
                      ": resumed output differs from the uninterrupted run");
    }
    offset += n;
  }
}

// A directory every rank writes its state file into (created by rank 0, name broadcast).
std::string shared_directory() {
  char path[256] = "/tmp/arcreduce-state-XXXXXX";
  if (g_rank == 0 && !mkdtemp(path)) path[0] = '\0';
  MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (path[0] == '\0') g_progress.fail("mkdtemp failed on rank 0");
  return path;
}

std::string state_file(const std::string& dir, int rank) {
  return dir + "/state." + std::to_string(rank);
}

// Runs `call`; reports an arcreduce::Error (or any exception) as a failure of `what`.
template <typename F>
void expect_ok(const std::string& what, F call) {
  try {
    call();
  } catch (const std::exception& e) {
    g_progress.fail(what + ": " + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  g_progress.set_rank(g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  arcreduce_test::Watchdog watchdog(
      g_rank, std::chrono::seconds(arcreduce_test::watchdog_seconds(argc, argv, 50)),
      [] { return g_progress.hung_in(); });
  const std::string dir = shared_directory();
  const std::string mine = state_file(dir, g_rank);

  arcreduce::Config config = arcreduce::Config::from_env();
  config.min_compress_elements = 0;  // compress the small test tensors too
  config.warmup_steps = 0;

  g_progress.set_stage("phase 1 init");
  arcreduce::init(config);
  for (int step = 0; step < 3; ++step) run_step(step);
  g_progress.set_stage("save_state");
  expect_ok("save_state(" + mine + ")", [&] { arcreduce::save_state(mine); });
  std::vector<std::vector<uint8_t>> uninterrupted;
  for (int step = 3; step < 5; ++step) uninterrupted.push_back(run_step(step));
  g_progress.set_stage("phase 1 shutdown");
  MPI_Barrier(MPI_COMM_WORLD);  // no rank's shutdown may cut another rank's last step short
  arcreduce::shutdown();

  g_progress.set_stage("phase 2 init");
  arcreduce::init(config);
  g_progress.set_stage("load_state");
  expect_ok("load_state(" + mine + ")", [&] { arcreduce::load_state(mine); });
  for (int step = 3; step < 5; ++step) {
    expect_same(uninterrupted[static_cast<size_t>(step - 3)], run_step(step), step);
  }

  // Every file exists now (each rank saved before phase 1's shutdown, which is collective).
  const int other = (g_rank + 1) % g_size;
  g_progress.set_stage("load_state of rank " + std::to_string(other));
  if (other != g_rank) {
    try {
      arcreduce::load_state(state_file(dir, other));
      g_progress.fail("load_state of rank " + std::to_string(other) + "'s file: no error");
    } catch (const arcreduce::Error& e) {
      const std::string names = "rank " + std::to_string(other);
      if (std::string(e.what()).find(names) == std::string::npos) {
        g_progress.fail("load_state of rank " + std::to_string(other) +
                        "'s file: the error does not say '" + names + "': " + e.what());
      }
    }
  }
  g_progress.set_stage("phase 2 shutdown");
  MPI_Barrier(MPI_COMM_WORLD);
  arcreduce::shutdown();

  MPI_Barrier(MPI_COMM_WORLD);  // nobody reads the files any more
  std::remove(mine.c_str());
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) rmdir(dir.c_str());
  return arcreduce_test::finish(watchdog, g_rank, g_progress.failures());
}
