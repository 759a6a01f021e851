// The reduce loop of the fault tests (tests/faults/run_faults.sh) and the soak
// (scripts/soak.sh): a deterministic data-parallel SGD loop through the arcreduce runtime, with
// faults a rank can inject into itself and the measurements both need.
//
// Every rank holds the same three parameter tensors (w0 [2W, W], w1 [W, W], b [W]), computes a
// gradient that is a pure function of (seed, rank, step, tensor, element) and the parameters,
// submits the three gradients (kAverage, the compressor of --compressor), waits for them and
// takes an SGD step. Replicas therefore stay bit-identical as long as every reduction gives every
// rank the same bytes, and a run is reproducible from its checkpoint when the runtime's
// state (save_state) is complete. At the end rank 0 gathers every rank's FNV-1a hash of the
// parameters and prints
//
//   final: steps=N hash=0x... replicas=identical seconds=T steps_per_s=R
//
// or "replicas=different" with every rank's hash (exit 1). A failed op makes the rank print
//
//   reduce_loop: rank R: step S: tensor 'NAME' failed after T s: CODE: MESSAGE
//
// and exit 3 (the runtime's message names the rank and tensor it waited for).
//
// Faults and measurements (flags below): --kill-rank/--kill-at-step kill a rank with SIGKILL
// from the callback of its first bucket of that step, so that the other ranks are inside the
// next (compressed) bucket's collectives when it dies; --checkpoint/--checkpoint-at and --resume
// write and read per-rank checkpoints (parameters, step, arcreduce::save_state); --sample-every
// samples resident memory, open file descriptors and threads of every rank (gathered by rank 0)
// and prints the soak summary lines ("soak: ...").
#include <arcreduce/arcreduce.h>
#include <dirent.h>
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Options {
  int64_t steps = 100;
  int64_t width = 256;
  std::string compressor;  // empty: ARCREDUCE_COMPRESSOR
  double ratio = 0;        // 0: ARCREDUCE_COMPRESS_RATIO
  float lr = 0.01f;
  uint64_t seed = 1;
  std::string checkpoint;  // prefix
  int64_t checkpoint_at = -1;
  std::string resume;  // prefix
  int kill_rank = -1;
  int64_t kill_at_step = -1;
  int64_t progress_every = 0;
  int64_t sample_every = 0;
  int64_t warmup_steps = -1;  // -1: steps / 10
  // Soak checks: fail when fds or threads grew after warm-up or RSS grew faster than this.
  bool check_soak = false;
  double max_rss_slope = 64;  // bytes per step
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "reduce_loop: %s\n"
               "usage: reduce_loop [--steps N] [--width W] [--compressor NAME] [--ratio R]\n"
               "         [--lr LR] [--seed S] [--checkpoint PREFIX --checkpoint-at STEP]\n"
               "         [--resume PREFIX] [--kill-rank R --kill-at-step STEP]\n"
               "         [--progress-every N] [--sample-every N [--warmup-steps N]\n"
               "         [--check-soak] [--max-rss-slope BYTES]]\n",
               problem.c_str());
  std::exit(2);
}

int64_t parse_int(const std::string& flag, const std::string& text, int64_t min) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min) {
    usage(flag + " '" + text + "': expected an integer >= " + std::to_string(min));
  }
  return v;
}

double parse_double(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v <= 0) {
    usage(flag + " '" + text + "': expected a positive number");
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--steps") {
      o.steps = parse_int(flag, value(), 1);
    } else if (flag == "--width") {
      o.width = parse_int(flag, value(), 1);
    } else if (flag == "--compressor") {
      o.compressor = value();
    } else if (flag == "--ratio") {
      o.ratio = parse_double(flag, value());
    } else if (flag == "--lr") {
      o.lr = static_cast<float>(parse_double(flag, value()));
    } else if (flag == "--seed") {
      o.seed = static_cast<uint64_t>(parse_int(flag, value(), 0));
    } else if (flag == "--checkpoint") {
      o.checkpoint = value();
    } else if (flag == "--checkpoint-at") {
      o.checkpoint_at = parse_int(flag, value(), 1);
    } else if (flag == "--resume") {
      o.resume = value();
    } else if (flag == "--kill-rank") {
      o.kill_rank = static_cast<int>(parse_int(flag, value(), 0));
    } else if (flag == "--kill-at-step") {
      o.kill_at_step = parse_int(flag, value(), 1);
    } else if (flag == "--progress-every") {
      o.progress_every = parse_int(flag, value(), 1);
    } else if (flag == "--sample-every") {
      o.sample_every = parse_int(flag, value(), 1);
    } else if (flag == "--warmup-steps") {
      o.warmup_steps = parse_int(flag, value(), 0);
    } else if (flag == "--check-soak") {
      o.check_soak = true;
    } else if (flag == "--max-rss-slope") {
      o.max_rss_slope = parse_double(flag, value());
    } else {
      usage("unknown flag '" + flag + "'");
    }
  }
  if (o.checkpoint.empty() != (o.checkpoint_at < 0)) {
    usage("--checkpoint and --checkpoint-at go together");
  }
  if ((o.kill_rank < 0) != (o.kill_at_step < 0)) {
    usage("--kill-rank and --kill-at-step go together");
  }
  if (o.warmup_steps < 0) o.warmup_steps = o.steps / 10;
  return o;
}

// A uniform value in [-1, 1) from a 64-bit key (splitmix64's finaliser).
float uniform(uint64_t key) {
  key += 0x9e3779b97f4a7c15ull;
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ull;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebull;
  key ^= key >> 31;
  return static_cast<float>(static_cast<double>(key >> 40) / static_cast<double>(1ull << 23) - 1.0);
}

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> value;
  std::vector<float> grad;
};

std::vector<Param> make_model(int64_t width, uint64_t seed) {
  std::vector<Param> params = {
      {"fault/w0", {2 * width, width}, {}, {}},
      {"fault/w1", {width, width}, {}, {}},
      {"fault/b", {width}, {}, {}},
  };
  for (size_t t = 0; t < params.size(); ++t) {
    int64_t n = 1;
    for (int64_t d : params[t].shape) n *= d;
    params[t].value.resize(static_cast<size_t>(n));
    params[t].grad.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      params[t].value[static_cast<size_t>(i)] = 0.1f * uniform(seed * 1000003 + t * 7919 + i);
    }
  }
  return params;
}

// g = noise(seed, rank, step, tensor, i) + 0.1 * p: a different gradient on every rank whose
// average pulls the parameters towards zero.
void compute_gradients(std::vector<Param>& params, uint64_t seed, int rank, int64_t step) {
  for (size_t t = 0; t < params.size(); ++t) {
    const uint64_t base =
        ((seed * 131 + static_cast<uint64_t>(rank)) * 1000003 + static_cast<uint64_t>(step)) * 16 +
        t;
    std::vector<float>& g = params[t].grad;
    const std::vector<float>& p = params[t].value;
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = uniform(base * 0x100000001b3ull + i) + 0.1f * p[i];
    }
  }
}

uint64_t fnv1a(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t model_hash(const std::vector<Param>& params) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const Param& p : params) h = fnv1a(h, p.value.data(), p.value.size() * sizeof(float));
  return h;
}

// ---- checkpoints: PREFIX.rank<r>.params (step, parameters) + PREFIX.rank<r>.arcreduce ----

constexpr char kMagic[8] = {'R', 'L', 'C', 'K', 'P', 'T', '0', '1'};

std::string params_path(const std::string& prefix, int rank) {
  return prefix + ".rank" + std::to_string(rank) + ".params";
}
std::string state_path(const std::string& prefix, int rank) {
  return prefix + ".rank" + std::to_string(rank) + ".arcreduce";
}

void save_checkpoint(const std::string& prefix, int rank, int64_t step,
                     const std::vector<Param>& params) {
  const std::string path = params_path(prefix, rank);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(kMagic, sizeof kMagic);
    out.write(reinterpret_cast<const char*>(&step), sizeof step);
    for (const Param& p : params) {
      const uint64_t n = p.value.size();
      out.write(reinterpret_cast<const char*>(&n), sizeof n);
      out.write(reinterpret_cast<const char*>(p.value.data()),
                static_cast<std::streamsize>(n * sizeof(float)));
    }
    const uint64_t h = model_hash(params);
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + tmp + " to " + path);
  }
  arcreduce::save_state(state_path(prefix, rank));
}

int64_t load_checkpoint(const std::string& prefix, int rank, std::vector<Param>& params) {
  const std::string path = params_path(prefix, rank);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  char magic[sizeof kMagic] = {};
  int64_t step = 0;
  in.read(magic, sizeof magic);
  in.read(reinterpret_cast<char*>(&step), sizeof step);
  if (!in || std::memcmp(magic, kMagic, sizeof kMagic) != 0) {
    throw std::runtime_error(path + " is not a reduce_loop checkpoint");
  }
  for (Param& p : params) {
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), sizeof n);
    if (!in || n != p.value.size()) {
      throw std::runtime_error(path + ": tensor '" + p.name +
                               "' has another size (other --width?)");
    }
    in.read(reinterpret_cast<char*>(p.value.data()),
            static_cast<std::streamsize>(n * sizeof(float)));
  }
  uint64_t h = 0;
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  if (!in || h != model_hash(params)) throw std::runtime_error(path + " is truncated or corrupted");
  arcreduce::load_state(state_path(prefix, rank));
  return step;
}

// ---- soak samples ---------------------------------------------------------------------------

struct Sample {
  int64_t step = 0;
  int64_t rss_kb = 0;
  int64_t fds = 0;
  int64_t threads = 0;
};

int64_t status_field(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') {
      return std::strtoll(line.c_str() + n + 1, nullptr, 10);
    }
  }
  return -1;
}

// Open descriptors, not counting the one opendir() holds while counting.
int64_t open_fds() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int64_t n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;
}

Sample sample_now(int64_t step) {
  return Sample{step, status_field("VmRSS"), open_fds(), status_field("Threads")};
}

// Least-squares slope of RSS (bytes) over steps, samples with step >= from only.
double rss_slope(const std::vector<Sample>& samples, int64_t from) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Sample& s : samples) {
    if (s.step < from) continue;
    const double x = static_cast<double>(s.step), y = 1024.0 * static_cast<double>(s.rss_kb);
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double d = n * sxx - sx * sx;
  return n >= 2 && d > 0 ? (n * sxy - sx * sy) / d : 0.0;
}

// Every rank's sample at rank 0 (samples[rank]).
void gather_sample(const Sample& mine, std::vector<std::vector<Sample>>* samples) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int64_t send[4] = {mine.step, mine.rss_kb, mine.fds, mine.threads};
  std::vector<int64_t> all(rank == 0 ? static_cast<size_t>(4 * size) : 0);
  MPI_Gather(send, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, 0, MPI_COMM_WORLD);
  if (rank != 0) return;
  samples->resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const int64_t* v = all.data() + 4 * r;
    (*samples)[static_cast<size_t>(r)].push_back(Sample{v[0], v[1], v[2], v[3]});
  }
}

std::string join(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// Prints the soak summary; returns false when --check-soak finds growth.
bool report_soak(const Options& o, const std::vector<std::vector<Sample>>& samples) {
  std::vector<int64_t> rss_warm, rss_end, fd_start, fd_warm, fd_end, th_start, th_warm, th_end;
  std::string slopes;
  double max_slope = 0;
  for (const std::vector<Sample>& s : samples) {
    // The first sample at or after warm-up.
    size_t warm = 0;
    while (warm + 1 < s.size() && s[warm].step < o.warmup_steps) ++warm;
    rss_warm.push_back(s[warm].rss_kb);
    rss_end.push_back(s.back().rss_kb);
    fd_start.push_back(s.front().fds);
    fd_warm.push_back(s[warm].fds);
    fd_end.push_back(s.back().fds);
    th_start.push_back(s.front().threads);
    th_warm.push_back(s[warm].threads);
    th_end.push_back(s.back().threads);
    const double slope = rss_slope(s, o.warmup_steps);
    max_slope = std::max(max_slope, slope);
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", slope);
    slopes += (slopes.empty() ? "" : ",") + std::string(text);
  }
  std::printf("soak: samples=%zu every=%" PRId64 " warmup_steps=%" PRId64 "\n", samples[0].size(),
              o.sample_every, o.warmup_steps);
  std::printf("soak: rss_kb warm=[%s] end=[%s] slope_bytes_per_step=[%s] max=%.3f\n",
              join(rss_warm).c_str(), join(rss_end).c_str(), slopes.c_str(), max_slope);
  std::printf("soak: fds start=[%s] warm=[%s] end=[%s]\n", join(fd_start).c_str(),
              join(fd_warm).c_str(), join(fd_end).c_str());
  std::printf("soak: threads start=[%s] warm=[%s] end=[%s]\n", join(th_start).c_str(),
              join(th_warm).c_str(), join(th_end).c_str());
  bool ok = true;
  if (o.check_soak) {
    for (size_t r = 0; r < samples.size(); ++r) {
      if (fd_end[r] > fd_warm[r] || th_end[r] > th_warm[r]) {
        std::printf("soak: FAILED: rank %zu: fds %" PRId64 " -> %" PRId64 ", threads %" PRId64
                    " -> %" PRId64 " after warm-up\n",
                    r, fd_warm[r], fd_end[r], th_warm[r], th_end[r]);
        ok = false;
      }
    }
    if (max_slope > o.max_rss_slope) {
      std::printf(
          "soak: FAILED: resident memory grows %.3f bytes/step after warm-up (limit %.3f)\n",
          max_slope, o.max_rss_slope);
      ok = false;
    }
  }
  return ok;
}

// Wall-clock seconds since the epoch, so that the driver can compare a rank's moments with its
// own (every simulated host shares the machine's clock).
double epoch_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  arcreduce::init();  // initialises MPI; finalised at exit after the runtime's teardown
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // The driver finds a rank's process by this line (stop_rank: SIGSTOP from outside).
  std::printf("rank %d pid %d\n", rank, static_cast<int>(getpid()));

  std::vector<Param> params = make_model(o.width, o.seed);
  int64_t first = 1;
  try {
    if (!o.resume.empty()) first = load_checkpoint(o.resume, rank, params) + 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reduce_loop: rank %d: %s\n", rank, e.what());
    return 1;
  }
  if (rank == 0 && first > 1) std::printf("resumed: from step %" PRId64 "\n", first - 1);

  arcreduce::AllreduceOptions options;
  options.op = arcreduce::ReduceOp::kAverage;
  if (!o.compressor.empty()) options.compression.compressor = o.compressor;
  if (o.ratio > 0) options.compression.ratio = o.ratio;

  std::vector<std::vector<Sample>> samples;
  if (o.sample_every > 0) gather_sample(sample_now(first - 1), &samples);

  const auto start = std::chrono::steady_clock::now();
  for (int64_t step = first; step <= o.steps; ++step) {
    compute_gradients(params, o.seed, rank, step);
    std::vector<arcreduce::Handle> handles;
    for (size_t t = 0; t < params.size(); ++t) {
      arcreduce::AllreduceOptions opts = options;
      if (t == 0 && rank == o.kill_rank && step == o.kill_at_step) {
        // The callback of the first bucket runs on the coordinator thread just before it starts
        // the next bucket, which the other ranks are already in.
        opts.callback = [rank, step](const arcreduce::Status&) {
          std::fprintf(stderr, "reduce_loop: rank %d: SIGKILL at step %" PRId64 " at=%.3f\n", rank,
                       step, epoch_seconds());
          std::fflush(stderr);
          raise(SIGKILL);
        };
      }
      Param& p = params[t];
      handles.push_back(arcreduce::allreduce_async(
          p.name, arcreduce::Tensor{p.grad.data(), arcreduce::DType::kFloat32, p.shape}, opts));
    }
    for (size_t t = 0; t < params.size(); ++t) {
      const arcreduce::Status status = arcreduce::synchronize(handles[t]);
      if (!status.ok()) {
        std::fprintf(stderr,
                     "reduce_loop: rank %d: step %" PRId64
                     ": tensor '%s' failed after %.2f s "
                     "(at=%.3f): %s: %s\n",
                     rank, step, params[t].name.c_str(), seconds_since(start), epoch_seconds(),
                     arcreduce::status_code_name(status.code()), status.message().c_str());
        std::fflush(stderr);
        return 3;
      }
    }
    for (Param& p : params) {
      for (size_t i = 0; i < p.value.size(); ++i) p.value[i] -= o.lr * p.grad[i];
    }
    if (step == o.checkpoint_at) {
      try {
        save_checkpoint(o.checkpoint, rank, step, params);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "reduce_loop: rank %d: checkpoint: %s\n", rank, e.what());
        return 1;
      }
      if (rank == 0) std::printf("checkpoint: step %" PRId64 "\n", step);
    }
    if (o.progress_every > 0 && step % o.progress_every == 0 && rank == 0) {
      std::printf("step %" PRId64 " %.3f s\n", step, seconds_since(start));
    }
    if (o.sample_every > 0 && (step % o.sample_every == 0 || step == o.steps)) {
      gather_sample(sample_now(step), &samples);
    }
  }
  const double seconds = seconds_since(start);

  const uint64_t mine = model_hash(params);
  std::vector<uint64_t> hashes(static_cast<size_t>(size));
  MPI_Gather(&mine, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  int rc = 0;
  if (rank == 0) {
    const bool identical =
        std::all_of(hashes.begin(), hashes.end(), [&](uint64_t h) { return h == hashes[0]; });
    const int64_t done = o.steps - first + 1;
    if (!samples.empty() && !report_soak(o, samples)) rc = 1;
    std::printf("final: steps=%" PRId64 " hash=0x%016" PRIx64
                " replicas=%s seconds=%.3f "
                "steps_per_s=%.1f\n",
                o.steps, hashes[0], identical ? "identical" : "different", seconds,
                done > 0 ? static_cast<double>(done) / seconds : 0.0);
    if (!identical) {
      for (int r = 0; r < size; ++r) {
        std::printf("  rank %d hash 0x%016" PRIx64 "\n", r, hashes[static_cast<size_t>(r)]);
      }
      rc = 1;
    }
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  arcreduce::shutdown();
  return rc;
}
