// Stall inspector under mpirun, driven by tests/mpi/expect_job.sh.
//
//   runtime_stall_test [--missing-rank=R] [--late-seconds=S] [--warm-steps=N]
//
// arcreduce::init() initialises MPI itself here. After one good op, every rank but R submits
// "stalled_tensor" and "stalled_tensor_b" and waits.
// - Without --late-seconds, rank R never submits them: with ARCREDUCE_STALL_SHUTDOWN_SECONDS
//   set, every waiting op must fail with kStalled naming the tensor and rank R, and the runtime
//   must abort the job (mpirun exits non-zero). The driver checks the exit code, the time and
//   the log lines. If the job is not aborted within 20 s of the stall, the ranks exit 0, which
//   the driver reports as a failure.
// - With --late-seconds=S, rank R submits after S seconds: rank 0 must have logged the stall
//   warning (checked by the driver) and every op completes normally; exit 0.
// --warm-steps=N first reduces both tensors N times on every rank, so the stall happens on the
// response-cache fast path instead of in a full negotiation.
// Lines containing TEST-ERROR mean an unexpected status (the driver rejects them).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "tests/mpi/runtime_test_util.h"

namespace {

using arcreduce::Handle;
using arcreduce::Status;
using arcreduce::StatusCode;
using arcreduce_test::describe;
using arcreduce_test::TestTensor;

void say(const std::string& line) {
  // Not "[rank N]": the driver looks for the runtime's own rank-prefixed log lines.
  std::fprintf(stderr, "[test process %d] %s\n", arcreduce::rank(), line.c_str());
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  int missing = -1;
  double late_seconds = -1;
  int warm_steps = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--missing-rank=", 15) == 0) missing = std::atoi(argv[i] + 15);
    if (std::strncmp(argv[i], "--late-seconds=", 15) == 0) late_seconds = std::atof(argv[i] + 15);
    if (std::strncmp(argv[i], "--warm-steps=", 13) == 0) warm_steps = std::atoi(argv[i] + 13);
  }
  try {
    arcreduce::init();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "TEST-ERROR init() threw: %s\n", e.what());
    return 2;
  }
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  if (missing < 0) missing = size - 1;

  TestTensor warm(arcreduce::DType::kFloat32, {10});
  arcreduce_test::fill_inputs(warm, rank, 0);
  Status s = arcreduce::allreduce("stall_warmup", warm.view(), arcreduce_test::dense());
  if (!s.ok()) say("TEST-ERROR warm-up op failed: " + describe(s));

  TestTensor a(arcreduce::DType::kFloat32, {100}), b(arcreduce::DType::kFloat64, {7});
  arcreduce_test::fill_inputs(a, rank, 1);
  arcreduce_test::fill_inputs(b, rank, 2);
  auto submit_and_wait = [&] {
    Handle ha = arcreduce::allreduce_async("stalled_tensor", a.view(), arcreduce_test::dense());
    Handle hb = arcreduce::allreduce_async("stalled_tensor_b", b.view(), arcreduce_test::dense());
    return std::make_pair(arcreduce::synchronize(ha), arcreduce::synchronize(hb));
  };

  for (int step = 0; step < warm_steps; ++step) {
    auto [sa, sb] = submit_and_wait();
    if (!sa.ok() || !sb.ok()) {
      say("TEST-ERROR warm step failed: " + describe(sa) + " / " + describe(sb));
    }
  }
  if (warm_steps > 0) say("warm steps done");
  arcreduce_test::fill_inputs(a, rank, 1);
  arcreduce_test::fill_inputs(b, rank, 2);

  if (late_seconds >= 0) {
    if (rank == missing) {
      say("submitting late on purpose");
      std::this_thread::sleep_for(std::chrono::duration<double>(late_seconds));
    }
    auto [sa, sb] = submit_and_wait();
    if (!sa.ok() || !sb.ok()) {
      say("TEST-ERROR late submission must still succeed: " + describe(sa) + " / " + describe(sb));
    } else if (!arcreduce_test::check_reduced(a, arcreduce::ReduceOp::kAverage, size, 1).empty()) {
      say("TEST-ERROR wrong result after a late submission");
    } else {
      say("late ops completed");
    }
    arcreduce::shutdown();
    return 0;
  }

  if (rank == missing) {
    say("not submitting stalled_tensor on purpose");
  } else {
    auto [sa, sb] = submit_and_wait();
    for (const Status& st : {sa, sb}) {
      const bool names = st.message().find("stalled_tensor") != std::string::npos &&
                         st.message().find(std::to_string(missing)) != std::string::npos;
      if (st.code() != StatusCode::kStalled || !names) {
        say("TEST-ERROR want kStalled naming the tensor and rank " + std::to_string(missing) +
            ", got " + describe(st));
      } else {
        say("got " + describe(st));
      }
    }
  }
  // The runtime must abort the job now; give it 20 s.
  std::this_thread::sleep_for(std::chrono::seconds(20));
  say("TEST-ERROR the job was not aborted after the stall");
  return 0;
}
