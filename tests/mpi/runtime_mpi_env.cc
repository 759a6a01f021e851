// What arcreduce::init() gives the MPI library it initialises itself (runtime/mpi_environment.h),
// under mpirun: Open MPI's TCP eager limit, read back through the MPI tool interface after
// init(), must be --expect bytes (the default init() sets, or a user's value it must keep), and a
// reduction of a tensor several ring segments long must still sum exactly. Every rank prints
// FAIL lines and exits non-zero on a failure.
//
//   runtime_mpi_env_test [--expect=BYTES]   (default: kTcpEagerLimitBytes)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "arcreduce/arcreduce.h"
#include "ops/mpi_include.h"
#include "runtime/mpi_environment.h"

namespace {

int g_failures = 0;

void check(bool ok, int rank, const std::string& what) {
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank, what.c_str());
  std::fflush(stderr);
}

// The control variable `name` as an unsigned integer; false when this MPI has no such variable.
bool read_cvar(const char* name, unsigned long long* value) {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return false;
  bool found = false;
  int index = -1;
  if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS) {
    char name_buf[256], desc[1];
    int name_len = sizeof name_buf, desc_len = 0, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype;
    MPI_T_cvar_get_info(index, name_buf, &name_len, &verbosity, &type, &enumtype, desc, &desc_len,
                        &bind, &scope);
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      unsigned long long buf[4] = {0, 0, 0, 0};
      if (MPI_T_cvar_read(handle, buf) == MPI_SUCCESS) {
        found = true;
        if (type == MPI_UNSIGNED || type == MPI_INT) {
          unsigned u = 0;
          std::memcpy(&u, buf, sizeof u);
          *value = u;
        } else {
          *value = buf[0];  // unsigned long / long long / size_t: 8 bytes on LP64
        }
      }
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long long expect = arcreduce::kTcpEagerLimitBytes;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--expect=", 9) == 0)
      expect = std::strtoull(argv[i] + 9, nullptr, 10);
  }
  arcreduce::init();  // initialises MPI
  const int rank = arcreduce::rank(), size = arcreduce::size();
#ifdef OPEN_MPI
  unsigned long long limit = 0;
  check(read_cvar("btl_tcp_eager_limit", &limit), rank, "no btl_tcp_eager_limit control variable");
  check(limit == expect, rank,
        "btl_tcp_eager_limit is " + std::to_string(limit) + ", expected " + std::to_string(expect));
#else
  (void)expect;
#endif
  // 3 MiB + 1 element: several segments and a ragged last chunk; rank r contributes r + 1 + i%7.
  const size_t n = (size_t{3} << 18) + 1;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
  arcreduce::AllreduceOptions sum;
  sum.op = arcreduce::ReduceOp::kSum;
  const arcreduce::Status status = arcreduce::allreduce(
      "mpi_env.x",
      arcreduce::Tensor{x.data(), arcreduce::DType::kFloat32, {static_cast<int64_t>(n)}}, sum);
  check(status.ok(), rank, "allreduce failed: " + status.message());
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(size * (size + 1) / 2 + size * static_cast<int>(i % 7));
    if (x[i] != want) ++wrong;
  }
  check(wrong == 0, rank, std::to_string(wrong) + " wrong sums");
  arcreduce::shutdown();
  std::printf("[rank %d] %s\n", rank, g_failures ? "FAILED" : "PASS");
  return g_failures ? 1 : 0;
}
