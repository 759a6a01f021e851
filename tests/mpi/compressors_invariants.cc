// Invariants of every compressor under real MPI, through the public API (mpirun -np 2..4).
//
//   compressors_invariants_test [--watchdog-seconds=S]
//
// Cases: each compressor (fp16; topk and randk at element and row granularity; arctopk) with
// each error feedback (none, ef14, ef21, ef21m), oktopk and powersgd (their own residual, no
// decorator), on tensors of shape [16, 12], [4, 2, 3, 3], [40], [1] and [0] in fp32, fp64, fp16
// and bf16. The
// runtime is initialised with min_compress_elements = 0 (small tensors are compressed too), warm
// error-feedback start, no warm-up and ARCREDUCE_CHECK_CONSISTENCY on. Phases, each a few steps of
// fresh inputs:
//
//   (a) "mixed", ratio 0.3: every case's output is bit-identical to rank 0's after every step;
//   (b) "ratio1", ratio 1: every case equals the dense mean (ef21m: the mean of the ranks'
//       momentum v = (1 - eta) v + eta g, which is what EF21M outputs when nothing is dropped;
//       fp16 ignores ratio and error feedback; powersgd, whose size is its rank, is only
//       checked by (a)), within a tolerance set by the dtype and the fp32 (fp16 for the fp16
//       compressor) pipeline; (a) is checked too;
//   (c) "arc", arctopk without error feedback at ratio 0.25 on positive inputs (so no mean is
//       zero): the output holds exactly k = max(1, floor(0.25 n)) non-zero rows of the matrix
//       view, each equal to the exact mean, and matches rank 0's (dense-path tensors: the mean
//       everywhere); (a) is checked too.
//
// Every failure prints "[rank R] FAIL: <phase> <case> step S: <what>"; the job exits non-zero
// (tests/mpi/runtime_process.h's finish), and a watchdog turns a hang into an abort naming the
// phase.
#include <mpi.h>

#include <chrono>
#include <cmath>
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
using arcreduce_test::count_of;
using arcreduce_test::TestTensor;

int g_rank = 0;
int g_size = 1;
arcreduce_test::Progress g_progress;

struct Case {
  std::string compressor, granularity, error_feedback;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  std::string name;
  TestTensor tensor;
  std::vector<std::vector<double>> momentum;  // per rank: ef21m's v, for the ratio-1 reference
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s.empty() ? "scalar" : s;
}

std::vector<Case> make_cases(const std::string& phase, bool arc_only) {
  struct Spec {
    const char* compressor;
    const char* granularity;  // "" where it does not apply
  };
  const Spec specs[] = {{"fp16", ""},         {"topk", "element"}, {"topk", "row"},
                        {"randk", "element"}, {"randk", "row"},    {"arctopk", ""},
                        {"oktopk", ""},       {"powersgd", ""}};
  const char* feedbacks[] = {"none", "ef14", "ef21", "ef21m"};
  const std::vector<std::vector<int64_t>> shapes = {{16, 12}, {4, 2, 3, 3}, {40}, {1}, {0}};
  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  std::vector<Case> cases;
  for (const Spec& spec : specs) {
    if (arc_only && std::string(spec.compressor) != "arctopk") continue;
    for (const char* ef : feedbacks) {
      if (arc_only && std::string(ef) != "none") continue;
      // Ok-Topk and PowerSGD keep their own residual; other error feedback is rejected for them.
      const std::string own_residual = spec.compressor;
      if ((own_residual == "oktopk" || own_residual == "powersgd") && std::string(ef) != "none") {
        continue;
      }
      for (const std::vector<int64_t>& shape : shapes) {
        for (DType dtype : dtypes) {
          Case c{spec.compressor,
                 spec.granularity,
                 ef,
                 shape,
                 dtype,
                 "",
                 TestTensor(dtype, shape),
                 std::vector<std::vector<double>>(
                     g_size, std::vector<double>(static_cast<size_t>(count_of(shape))))};
          c.name = phase + "/" + c.compressor + (c.granularity.empty() ? "" : "-") + c.granularity +
                   "/" + ef + "/" + arcreduce_test::short_name(dtype) + "/" + shape_text(shape);
          cases.push_back(std::move(c));
        }
      }
    }
  }
  return cases;
}

// Input of element i on `rank` at `step`: a multiple of 0.25, exact in every dtype, in [-2, 2]
// or, when `positive`, in [0.25, 4.25].
double input(int rank, int64_t i, int step, bool positive) {
  return arcreduce_test::input_value(rank, i, step) + (positive ? 2.25 : 0.0);
}

// Tolerance of one output element: a few ulps of the coarser of the dtype and the pipeline
// (compressed reductions run in fp32; the fp16 compressor reduces in half precision).
double tolerance(const Case& c, double magnitude) {
  const double pipeline = c.compressor == "fp16" ? std::ldexp(1.0, -10) : std::ldexp(1.0, -23);
  return 8 * std::max(arcreduce_test::epsilon(c.dtype), pipeline) * std::max(magnitude, 1.0);
}

uint64_t hash_bytes(const TestTensor& t) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < t.nbytes(); ++i) h = (h ^ t.data()[i]) * 1099511628211ull;
  return h;
}

// (a): every case's bytes equal rank 0's. One broadcast of hashes for all cases; the tensors
// that differ somewhere are then broadcast whole, to name the first differing element.
void check_same_as_rank0(const std::vector<Case>& cases, const std::string& where) {
  std::vector<uint64_t> mine, root;
  for (const Case& c : cases) mine.push_back(hash_bytes(c.tensor));
  root = mine;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_UINT64_T, 0, MPI_COMM_WORLD);
  std::vector<int> differs(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) differs[i] = mine[i] != root[i];
  MPI_Allreduce(MPI_IN_PLACE, differs.data(), static_cast<int>(differs.size()), MPI_INT, MPI_MAX,
                MPI_COMM_WORLD);
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!differs[i]) continue;
    TestTensor theirs = cases[i].tensor;
    MPI_Bcast(theirs.data(), static_cast<int>(theirs.nbytes()), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (mine[i] == root[i]) continue;
    for (int64_t e = 0; e < theirs.count(); ++e) {
      if (theirs.get(e) == cases[i].tensor.get(e)) continue;
      g_progress.fail(where + " " + cases[i].name +
                      ": output differs from rank 0's, first at element " + std::to_string(e) +
                      ": " + std::to_string(cases[i].tensor.get(e)) + " here, " +
                      std::to_string(theirs.get(e)) + " on rank 0");
      break;
    }
  }
}

// (b): the dense mean (ef21m: of the momentum) over every rank's inputs. `step` counts from 0
// in each phase, whose tensor names are new: step 0 is the warm start (v = g).
void check_dense_mean(Case& c, int step, double eta, const std::string& where) {
  const bool momentum = c.error_feedback == "ef21m" && c.compressor != "fp16";
  int bad = 0;
  for (int64_t i = 0; i < c.tensor.count(); ++i) {
    double want = 0;
    for (int r = 0; r < g_size; ++r) {
      const double g = input(r, i, step, false);
      double& v = c.momentum[static_cast<size_t>(r)][static_cast<size_t>(i)];
      v = step == 0 ? g : (1 - eta) * v + eta * g;
      want += momentum ? v : g;
    }
    want /= g_size;
    const double got = c.tensor.get(i);
    if (!(std::fabs(got - want) <= tolerance(c, 2)) && ++bad <= 3) {
      g_progress.fail(where + " " + c.name + ": element " + std::to_string(i) + " = " +
                      std::to_string(got) + ", dense mean " + std::to_string(want));
    }
  }
}

// Rows x columns of ARC-Top-K's matrix view (docs/compressors.md); rows = 0: dense path.
void matrix_view(const std::vector<int64_t>& shape, int64_t* rows, int64_t* cols) {
  const int64_t d = count_of(shape);
  *rows = 0;
  *cols = 0;
  if (shape.size() < 2 || d == 0) return;
  const int64_t t = shape.back();
  *cols = shape.size() == 2 ? shape[1] : d % (2 * t * t) == 0 ? 2 * t * t : d / shape[0];
  *rows = d / *cols;
}

// (c): k non-zero rows, each the exact mean; dense-path tensors the mean everywhere.
void check_arc_rows(const Case& c, int step, double ratio, const std::string& where) {
  int64_t rows = 0, cols = 0;
  matrix_view(c.shape, &rows, &cols);
  const bool dense = rows == 0;
  if (dense) {
    rows = c.tensor.count();
    cols = 1;
  }
  int64_t nonzero = 0;
  for (int64_t row = 0; row < rows; ++row) {
    bool kept = dense;
    for (int64_t j = 0; j < cols; ++j) kept = kept || c.tensor.get(row * cols + j) != 0;
    if (!kept) continue;
    ++nonzero;
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t i = row * cols + j;
      double want = 0;
      for (int r = 0; r < g_size; ++r) want += input(r, i, step, true);
      want /= g_size;
      const double got = c.tensor.get(i);
      if (!(std::fabs(got - want) <= tolerance(c, 4.25))) {
        g_progress.fail(where + " " + c.name + ": kept row " + std::to_string(row) + " element " +
                        std::to_string(j) + " = " + std::to_string(got) + ", exact mean " +
                        std::to_string(want));
        return;
      }
    }
  }
  const int64_t k = dense ? rows : std::max<int64_t>(1, static_cast<int64_t>(ratio * rows));
  if (nonzero != k) {
    g_progress.fail(where + " " + c.name + ": " + std::to_string(nonzero) +
                    " non-zero rows, want k = " + std::to_string(k) + " of " +
                    std::to_string(rows));
  }
}

enum class Check { kSameOnly, kDenseMean, kArcRows };

void run_phase(const std::string& phase, double ratio, Check check, int steps, double eta) {
  std::vector<Case> cases = make_cases(phase, check == Check::kArcRows);
  const bool positive = check == Check::kArcRows;
  for (int step = 0; step < steps; ++step) {
    const std::string where = phase + " step " + std::to_string(step);
    g_progress.set_stage(where);
    for (Case& c : cases) {
      for (int64_t i = 0; i < c.tensor.count(); ++i) {
        c.tensor.set(i, input(g_rank, i, step, positive));
      }
    }
    std::vector<arcreduce::Handle> handles;
    for (Case& c : cases) {
      arcreduce::AllreduceOptions o;
      o.compression.compressor = c.compressor;
      o.compression.ratio = ratio;
      o.compression.error_feedback = c.error_feedback;
      if (!c.granularity.empty()) o.compression.granularity = c.granularity;
      handles.push_back(arcreduce::allreduce_async(c.name, c.tensor.view(), o));
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      const arcreduce::Status s = arcreduce::synchronize(handles[i]);
      if (!s.ok())
        g_progress.fail(where + " " + cases[i].name + ": " + arcreduce_test::describe(s));
    }
    check_same_as_rank0(cases, where);
    for (Case& c : cases) {
      // PowerSGD's size is its rank, not the ratio: ratio 1 is not the dense mean there.
      if ((check == Check::kDenseMean && c.compressor != "powersgd") || c.compressor == "fp16") {
        check_dense_mean(c, step, eta, where);
      } else if (check == Check::kArcRows) {
        check_arc_rows(c, step, ratio, where);
      }
    }
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

  arcreduce::Config config = arcreduce::Config::from_env();
  config.min_compress_elements = 0;  // compress the small test tensors too
  config.warmup_steps = 0;
  config.ef_init = "warm";  // the ratio-1 reference assumes v = g, h = g on the first step
  config.check_consistency = true;
  g_progress.set_stage("init");
  arcreduce::init(config);
  run_phase("mixed", 0.3, Check::kSameOnly, 3, config.ef_momentum);
  run_phase("ratio1", 1.0, Check::kDenseMean, 3, config.ef_momentum);
  run_phase("arc", 0.25, Check::kArcRows, 2, config.ef_momentum);
  g_progress.set_stage("shutdown");
  MPI_Barrier(MPI_COMM_WORLD);  // no rank's shutdown may cut another rank's last step short
  arcreduce::shutdown();
  return arcreduce_test::finish(watchdog, g_rank, g_progress.failures());
}
