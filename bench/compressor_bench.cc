// compressor_bench: step time of every compressor against the runtime's dense path.
//
// One step reduces every tensor of a gradient set the way a training loop does: allreduce_async
// of each tensor in backward order (the set's order), then synchronize all. Variants differ only
// in AllreduceOptions::compression, so one init() serves them all:
//
//   mpi      not the runtime: one MPI_Allreduce (sum) of the whole set copied into one buffer,
//            what a hand-written fused reduction costs (the ratio every report starts from)
//   dense    compressor none (native fp32, chunked All-Reduce), no error feedback
//   fp16     half-precision All-Reduce, no error feedback
//   topk     All-Gather Top-K (element granularity) + ef14, at each ratio
//   randk    shared Rand-K (element granularity) + ef14, at each ratio
//   arctopk  ARC-Top-K at each ratio, with each --arctopk-error-feedback (ef21m, the paper's
//            choice, none, and efm, the runtime's default: docs/compressors.md, "Defaults")
//   oktopk   Ok-Topk at each ratio as its density (its own residual)
//   powersgd PowerSGD at each --powersgd-ranks rank q (its own error feedback)
//
// Each variant reduces its own tensor names ("<variant>/<tensor>"), so its error-feedback state
// and step counters are its own. The PowerSGD rank is a job-wide setting (ARCREDUCE_POWERSGD_RANK),
// so the first rank runs with all other variants and every further rank in a session of its own
// (shutdown, init) beside a dense baseline re-measured in that session. Every variant first runs
// --warmup untimed steps (ef21/ef21m's first compressed step is a dense warm start; caches and
// buffers fill). Then the timed rounds run the variants round-robin (A B C ... A B C ...), each
// step from a barrier; a sample is the slowest rank's step time. Gradients are pseudo-random
// values, different per rank and per step (--gradient-sets sets used in turn, so residual-driven
// compressors such as Ok-Topk see changing gradients), copied into the tensors before every step
// (untimed). After every step the outputs must be identical on all ranks (hash min == max);
// otherwise the program exits 1.
//
// Rank 0 prints: median, p90 and min step time, the ratio to dense, the bytes this compressor
// sent per rank per step (Stats::compressors delta, mean over ranks) and the wire lower bound:
// the payload the algorithm must send per rank per step, derived from the tensor shapes and the
// rules in docs/compressors.md (ring All-Reduce sends 2(P-1)/P of its input; an All-Gather sends
// (P-1) blocks of the block each rank contributes). Two lower bounds on the step time follow:
// wire = that payload at --link-gbit (each host has its own full-duplex link), and memory = one
// copy of the whole set, measured in the same run on all ranks at once (a step reads every
// gradient and writes every result at least once); "/ bound" divides by the larger.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <arcreduce/arcreduce.h>
#include <CLI/CLI.hpp>

#include "bench/gradient_sets.h"
#include "bench/report.h"

namespace ab = arcreduce::bench;

namespace {

struct Flags {
  std::string set = "tiny-transformer-24M";
  int repetitions = 10;
  int warmup = 3;
  std::vector<double> ratios = {0.01, 0.1};
  std::vector<std::string> compressors = {"fp16", "topk", "randk", "arctopk", "oktopk", "powersgd"};
  std::vector<int64_t> powersgd_ranks = {1, 4};
  std::vector<std::string> arctopk_error_feedback = {"ef21m", "none"};
  int gradient_sets = 4;
  double link_gbit = 0;  // 0: no wire bound (one host, shared memory)
  std::string link = "local shared memory";
  std::string commit = "unknown";
};

struct Variant {
  std::string compressor;  // "none" for dense, "mpi" for the raw MPI_Allreduce
  double ratio = 0;        // 0 where no ratio applies (none, fp16, powersgd)
  std::string error_feedback;
  int64_t powersgd_rank = 0;  // q of powersgd; 0 elsewhere
  int session = 0;            // runtime session (0: the first; dense runs in every session)

  std::string label() const {
    if (compressor == "mpi") return "raw MPI_Allreduce";
    std::string s = compressor == "none" ? "dense" : compressor;
    char text[32] = "";
    if (ratio > 0) std::snprintf(text, sizeof(text), " %g", ratio);
    if (powersgd_rank > 0) std::snprintf(text, sizeof(text), " q=%lld", (long long)powersgd_rank);
    s += text;
    if (compressor == "none" && session > 0) s += " [s" + std::to_string(session) + "]";
    return s + " " + error_feedback;
  }
  arcreduce::AllreduceOptions options() const {
    arcreduce::AllreduceOptions o;
    o.op = arcreduce::ReduceOp::kAverage;
    o.compression.compressor = compressor;
    if (ratio > 0) o.compression.ratio = ratio;
    o.compression.error_feedback = error_feedback;
    return o;
  }
};

// Dense first: it is the baseline every ratio refers to. Each compressor runs with the error
// feedback it is meant to be used with (docs/compressors.md).
std::vector<Variant> make_variants(const Flags& flags) {
  std::vector<Variant> variants = {{"none", 0, "none"}, {"mpi", 0, "none"}};
  for (const std::string& c : flags.compressors) {
    if (c == "none" || c == "mpi") continue;  // always present as the baselines
    if (c == "fp16") {
      variants.push_back({c, 0, "none"});
    } else if (c == "topk" || c == "randk") {
      for (double r : flags.ratios) variants.push_back({c, r, "ef14"});
    } else if (c == "arctopk") {
      for (double r : flags.ratios) {
        for (const std::string& ef : flags.arctopk_error_feedback) variants.push_back({c, r, ef});
      }
    } else if (c == "oktopk") {
      for (double r : flags.ratios) variants.push_back({c, r, "none"});
    } else if (c == "powersgd") {
      for (size_t i = 0; i < flags.powersgd_ranks.size(); ++i) {
        const int session = static_cast<int>(i);
        if (session > 0) variants.push_back({"none", 0, "none", 0, session});
        variants.push_back({c, 0, "none", flags.powersgd_ranks[i], session});
      }
    } else {
      throw std::invalid_argument("unknown compressor '" + c +
                                  "' (known: none, fp16, topk, randk, arctopk, oktopk, powersgd)");
    }
  }
  return variants;
}

// The matrix view of docs/compressors.md: [a, b] -> a x b; [..., t] -> (d / 2t^2) x 2t^2 when
// that divides d, else shape[0] x (d / shape[0]). False for 0-D/1-D and empty tensors.
bool matrix_view(const ab::TensorSpec& t, double* n, double* m) {
  const double d = static_cast<double>(t.elements());
  if (t.shape.size() < 2 || d == 0) return false;
  const double last = static_cast<double>(t.shape.back());
  const bool conv = t.shape.size() > 2 && std::fmod(d, 2 * last * last) == 0;
  *m = t.shape.size() == 2 ? static_cast<double>(t.shape[1])
       : conv              ? 2 * last * last
                           : d / static_cast<double>(t.shape[0]);
  *n = d / *m;
  return true;
}

// Bytes one rank must send per steady-state step (after warm-up) for `v` over `set` with `ranks`
// ranks: the algorithm's payload times the collective's minimal traffic factor.
double wire_lower_bound(const Variant& v, const ab::GradientSet& set, int ranks,
                        const arcreduce::Config& config) {
  const double p = ranks;
  const double allreduce = 2 * (p - 1) / p, allgather = p - 1;
  double reduced = 0, gathered = 0;  // fp32 elements (fp16: bytes / 4) per collective kind
  for (const ab::TensorSpec& t : set.tensors) {
    const double d = static_cast<double>(t.elements());
    const bool small = t.elements() < config.min_compress_elements;
    if (v.compressor == "none" || v.compressor == "mpi") {
      reduced += d;
    } else if (v.compressor == "fp16") {
      reduced += d / 2;
    } else if (small) {
      reduced += d;  // dense fallback
    } else if (v.compressor == "randk") {
      reduced += std::max(1.0, std::floor(v.ratio * d));
    } else if (v.compressor == "topk") {
      gathered += 2 * std::max(1.0, std::floor(v.ratio * d));  // values + int32 indices
    } else if (v.compressor == "oktopk") {
      // k = floor(rho d) records of (int32 index, fp32 value), ideally balanced: split and
      // reduce sends the (P-1)/P of them outside the own region (2k(P-1)/P words, the traffic of
      // an All-Reduce of k), the All-Gather(v) each rank's k/P survivors to P-1 ranks.
      const double k = std::floor(v.ratio * d);
      if (k < p) {
        reduced += d;  // dense fallback
      } else {
        reduced += k;
        gathered += 2 * k / p;
      }
    } else if (double n = 0, m = 0; !matrix_view(t, &n, &m)) {  // arctopk, powersgd: dense path
      reduced += d;
    } else if (v.compressor == "powersgd") {
      // P (n x q) and Q (m x q) All-Reduced where PyTorch's rule (min_compression_rate 2) says
      // the low-rank form is worth it, else the tensor.
      const double q = std::min({static_cast<double>(v.powersgd_rank), n, m});
      reduced += (n + m) * q * 2 < n * m ? (n + m) * q : d;
    } else {
      const double k = std::min(n, std::max(1.0, std::floor(v.ratio * n)));
      const double r = config.sketch_rank;
      const bool sketch_smaller = r < m && n * r + k * m < n * m;
      reduced += sketch_smaller ? n * r + k * m : d;  // else the exact path reduces the tensor
    }
  }
  return 4 * (reduced * allreduce + gathered * allgather);
}

// Pseudo-random gradients in [-1, 1) (splitmix64), different per rank and per `index`.
std::vector<std::vector<float>> make_gradients(const ab::GradientSet& set, int rank, int index) {
  uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1) +
                   0xd1b54a32d192ed03ull * static_cast<uint64_t>(index);
  std::vector<std::vector<float>> gradients;
  for (const ab::TensorSpec& t : set.tensors) {
    std::vector<float>& g = gradients.emplace_back(static_cast<size_t>(t.elements()));
    for (float& x : g) {
      uint64_t z = (state += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      x = static_cast<float>(static_cast<double>(z >> 40) / (1 << 23) - 1.0);
    }
  }
  return gradients;
}

// Order-dependent hash of the bytes of every tensor, 8 bytes at a time.
uint64_t hash_outputs(const std::vector<std::vector<float>>& tensors) {
  uint64_t h = 1469598103934665603ull;
  for (const std::vector<float>& t : tensors) {
    const size_t bytes = t.size() * sizeof(float);
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      uint64_t word;
      std::memcpy(&word, reinterpret_cast<const char*>(t.data()) + i, 8);
      h = (h ^ word) * 1099511628211ull;
    }
    if (i < bytes) {
      uint64_t word = 0;
      std::memcpy(&word, reinterpret_cast<const char*>(t.data()) + i, bytes - i);
      h = (h ^ word) * 1099511628211ull;
    }
  }
  return h;
}

// One step of `v`: submit every tensor, then wait for all. Returns this rank's seconds.
double run_step(const Variant& v, const std::string& prefix, const ab::GradientSet& set,
                std::vector<std::vector<float>>& tensors) {
  const arcreduce::AllreduceOptions options = v.options();
  std::vector<arcreduce::Handle> handles;
  handles.reserve(set.tensors.size());
  const double start = MPI_Wtime();
  for (size_t i = 0; i < set.tensors.size(); ++i) {
    arcreduce::Tensor tensor{tensors[i].data(), arcreduce::DType::kFloat32, set.tensors[i].shape};
    handles.push_back(arcreduce::allreduce_async(prefix + set.tensors[i].name, tensor, options));
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    const arcreduce::Status status = arcreduce::synchronize(handles[i]);
    if (!status.ok()) {
      std::fprintf(stderr, "compressor_bench: %s: %s%s failed: %s\n", v.label().c_str(),
                   prefix.c_str(), set.tensors[i].name.c_str(), status.message().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  return MPI_Wtime() - start;
}

// Counters of one variant over its timed steps (this rank).
struct Totals {
  std::vector<double> seconds;  // slowest rank's time per timed step
  double bytes_sent = 0, sketch = 0, values = 0, indices = 0, fallbacks = 0;
  void add(const arcreduce::Stats& before, const arcreduce::Stats& after, const std::string& c) {
    const arcreduce::CompressorStats b =
        before.compressors.count(c) ? before.compressors.at(c) : arcreduce::CompressorStats{};
    const arcreduce::CompressorStats& a = after.compressors.at(c);
    bytes_sent += static_cast<double>(a.bytes_sent - b.bytes_sent);
    sketch += static_cast<double>(a.sketch_bytes - b.sketch_bytes);
    values += static_cast<double>(a.value_bytes - b.value_bytes);
    indices += static_cast<double>(a.index_bytes - b.index_bytes);
    fallbacks += static_cast<double>(a.dense_fallbacks - b.dense_fallbacks);
  }
};

void print_header(const ab::GradientSet& set, const Flags& flags, int ranks, int hosts,
                  const arcreduce::Config& config) {
  std::printf("compressor_bench  %s\n", ab::utc_now().c_str());
  std::printf("commit       %s\n", flags.commit.c_str());
  std::printf("machine      %s\n", ab::machine_description().c_str());
  std::printf("mpi          %s\n", ab::mpi_library().c_str());
  std::printf("ranks        %d on %d host%s (link: %s)\n", ranks, hosts, hosts == 1 ? "" : "s",
              flags.link.c_str());
  std::printf("tensor set   %s: %zu fp32 tensors, %lld elements, %.2f MB\n", set.name.c_str(),
              set.tensors.size(), static_cast<long long>(set.elements()),
              static_cast<double>(set.elements()) * 4 / 1e6);
  std::printf(
      "arcreduce    op average, granularity %s, sketch rank %d, min compress elements %lld, "
      "warm-up steps %lld, eta %g, ef init %s, fusion threshold %lld B, cycle %.2f ms\n",
      config.granularity.c_str(), config.sketch_rank,
      static_cast<long long>(config.min_compress_elements),
      static_cast<long long>(config.warmup_steps), config.ef_momentum, config.ef_init.c_str(),
      static_cast<long long>(config.fusion_threshold), config.cycle_time_ms);
  std::printf("             oktopk tau %lld, tau' %lld; powersgd min compression rate 2\n",
              static_cast<long long>(config.oktopk_tau),
              static_cast<long long>(config.oktopk_tau_prime));
  std::printf(
      "repetitions  %d (+%d warm-up steps per variant), interleaved round-robin, slowest rank "
      "from a barrier; sessions after the first (powersgd at further ranks) against their own "
      "dense baseline; %d gradient sets in turn\n\n",
      flags.repetitions, flags.warmup, flags.gradient_sets);
}

// Lower bounds of one step (seconds): the wire bound at the link rate (0 without one) and one
// memory pass over the set.
struct Bounds {
  double wire_bytes = 0;
  double wire_seconds = 0;
  double memory_seconds = 0;
  double seconds() const { return std::max(wire_seconds, memory_seconds); }
};

void print_table(const std::vector<Variant>& variants, const std::vector<Totals>& totals,
                 const std::vector<Bounds>& bounds, double memcpy_gbs, int repetitions, int ranks) {
  std::printf("%-22s %9s %8s %8s %7s %8s %10s %10s %9s %8s %8s %8s %8s %9s\n", "variant",
              "median ms", "p90 ms", "min ms", "/ mpi", "/ dense", "MB sent", "MB bound",
              "bound ms", "/ bound", "sketch", "values", "indices", "fallbacks");
  // Each session's dense baseline (the dense variant listed first in it).
  std::vector<double> session_dense;
  double mpi = 0;
  for (size_t v = 0; v < variants.size(); ++v) {
    if (variants[v].compressor == "mpi") mpi = ab::summarize(totals[v].seconds).median;
    if (variants[v].compressor != "none") continue;
    session_dense.resize(std::max<size_t>(session_dense.size(), variants[v].session + 1), 0.0);
    session_dense[variants[v].session] = ab::summarize(totals[v].seconds).median;
  }
  const double dense = session_dense[0];
  const double steps = static_cast<double>(repetitions) * ranks;  // totals are summed over ranks
  for (size_t v = 0; v < variants.size(); ++v) {
    const ab::Summary s = ab::summarize(totals[v].seconds);
    const double baseline = session_dense[variants[v].session];
    const Totals& t = totals[v];
    char sent[16] = "         -";  // MPI's own traffic is not counted
    if (variants[v].compressor != "mpi") {
      std::snprintf(sent, sizeof(sent), "%10.3f", t.bytes_sent / steps / 1e6);
    }
    std::printf(
        "%-22s %9.1f %8.1f %8.1f %7.3f %8.3f %s %10.3f %9.1f %8.2f %8.3f %8.3f %8.3f %9.0f\n",
        variants[v].label().c_str(), s.median * 1e3, s.p90 * 1e3, s.min * 1e3, s.median / mpi,
        s.median / baseline, sent, bounds[v].wire_bytes / 1e6, bounds[v].seconds() * 1e3,
        s.median / bounds[v].seconds(), t.sketch / steps / 1e6, t.values / steps / 1e6,
        t.indices / steps / 1e6, t.fallbacks / steps);
  }
  std::printf(
      "\nMB sent: Stats::compressors[..].bytes_sent per rank per step (mean over ranks); MB "
      "bound: the payload's minimal ring traffic; bound ms: max(MB bound at the link rate, one "
      "copy of the set at %.2f GB/s per rank, all ranks copying at once); sketch/values/indices: "
      "payload MB per rank per step; fallbacks: tensors reduced densely per step\n",
      memcpy_gbs);
  for (size_t v = 0; v < variants.size(); ++v) {
    if (variants[v].compressor != "arctopk" || variants[v].ratio != 0.01) continue;
    const double ratio = ab::summarize(totals[v].seconds).median / dense;
    std::printf("arctopk 0.01: %.3f x dense, %.3f x raw MPI_Allreduce, %.2f x its lower bound\n",
                ratio, ab::summarize(totals[v].seconds).median / mpi,
                ab::summarize(totals[v].seconds).median / bounds[v].seconds());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);

  Flags flags;
  CLI::App app("Compressed reduction step time: every compressor against the dense path.");
  app.add_option("--set", flags.set, "gradient set")->capture_default_str();
  app.add_option("--repetitions", flags.repetitions, "timed steps per variant")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", flags.warmup, "untimed steps per variant first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--ratios", flags.ratios,
                 "ratios for topk, randk, arctopk, densities for oktopk (comma separated)")
      ->delimiter(',')
      ->check(CLI::Range(1e-9, 1.0))
      ->capture_default_str();
  app.add_option("--compressors", flags.compressors,
                 "compressors besides dense (comma separated): fp16, topk, randk, arctopk, "
                 "oktopk, powersgd")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--powersgd-ranks", flags.powersgd_ranks,
                 "PowerSGD ranks q (comma separated; each after the first in its own session)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--arctopk-error-feedback", flags.arctopk_error_feedback,
                 "error feedback variants of arctopk at each ratio (comma separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"none", "ef14", "ef21", "ef21m", "efm"}))
      ->capture_default_str();
  app.add_option("--gradient-sets", flags.gradient_sets,
                 "distinct gradient sets per rank, used in turn, one per step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--link-gbit", flags.link_gbit,
                 "each host's link rate in Gbit/s for the wire lower bound (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--link", flags.link, "link description printed in the header")
      ->capture_default_str();
  app.add_option("--commit", flags.commit, "commit id printed in the table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    MPI_Finalize();
    return code;
  }

  ab::GradientSet set;
  std::vector<Variant> variants;
  arcreduce::Config config;
  // ARCREDUCE_POWERSGD_RANK of each session: its powersgd variant's rank.
  auto session_rank = [&](int session) {
    for (const Variant& v : variants) {
      if (v.session == session && v.powersgd_rank > 0) return v.powersgd_rank;
    }
    return config.powersgd_rank;
  };
  int sessions = 1;
  try {
    set = ab::gradient_set(flags.set);
    variants = make_variants(flags);
    config = arcreduce::Config::from_env();
    config.compressor = "none";  // every op names its compressor
    config.sketch_rank = 4;
    config.warmup_steps = 0;
    // Every variant has its own names: keep them all in the response cache, as a training job
    // with one compressor would.
    const int64_t names = static_cast<int64_t>(variants.size() * set.tensors.size());
    config.cache_capacity = std::max(config.cache_capacity, 2 * names);
    for (const Variant& v : variants) sessions = std::max(sessions, v.session + 1);
    config.powersgd_rank = session_rank(0);
    arcreduce::init(config);  // MPI is initialised: arcreduce leaves finalising it to us
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "compressor_bench: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }

  std::vector<std::vector<std::vector<float>>> gradients;
  for (int g = 0; g < flags.gradient_sets; ++g) gradients.push_back(make_gradients(set, rank, g));
  std::vector<std::vector<float>> tensors = gradients[0];
  std::vector<float> flat(static_cast<size_t>(set.elements()));  // the raw MPI_Allreduce's buffer
  std::vector<std::string> prefixes;
  for (size_t v = 0; v < variants.size(); ++v) prefixes.push_back("v" + std::to_string(v) + "/");

  std::vector<Totals> totals(variants.size());
  std::vector<double> copy_seconds;  // one pass over the set, all ranks at once (slowest rank)
  std::vector<int> steps_done(variants.size(), 0);
  int64_t mismatches = 0;
  auto slowest = [](double seconds) {
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return seconds;
  };
  // The raw baseline: the set copied into one buffer (timed as the memory pass), then one
  // MPI_Allreduce of it.
  auto mpi_step = [&](const std::vector<std::vector<float>>& g) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    float* out = flat.data();
    for (const std::vector<float>& t : g) out = std::copy(t.begin(), t.end(), out);
    copy_seconds.push_back(slowest(MPI_Wtime() - start));
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(flat.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    return slowest(MPI_Wtime() - start);
  };
  auto step = [&](size_t v, bool timed) {
    const std::vector<std::vector<float>>& g = gradients[steps_done[v]++ % gradients.size()];
    if (variants[v].compressor == "mpi") {
      const double seconds = mpi_step(g);
      if (timed) totals[v].seconds.push_back(seconds);
      return;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::copy(g[i].begin(), g[i].end(), tensors[i].begin());
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const arcreduce::Stats before = arcreduce::stats();
    const double seconds = slowest(run_step(variants[v], prefixes[v], set, tensors));
    const arcreduce::Stats after = arcreduce::stats();
    const uint64_t h = hash_outputs(tensors);
    uint64_t lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (lo != hi) {
      ++mismatches;
      if (rank == 0) {
        std::fprintf(stderr, "compressor_bench: %s: outputs differ across ranks\n",
                     variants[v].label().c_str());
      }
    }
    if (timed) {
      totals[v].seconds.push_back(seconds);
      totals[v].add(before, after, variants[v].compressor);
    }
  };
  for (int session = 0; session < sessions; ++session) {
    if (session > 0) {  // a fresh runtime at this session's PowerSGD rank
      arcreduce::shutdown();
      config.powersgd_rank = session_rank(session);
      arcreduce::init(config);
    }
    std::vector<size_t> members;
    for (size_t v = 0; v < variants.size(); ++v) {
      if (variants[v].session == session) members.push_back(v);
    }
    for (size_t v : members) {
      for (int i = 0; i < flags.warmup; ++i) step(v, false);
    }
    for (int round = 0; round < flags.repetitions; ++round) {
      for (size_t v : members) step(v, true);
    }
  }

  // Byte counters are summed over ranks (means per rank are printed); times are already maxima.
  for (Totals& t : totals) {
    double* sums[] = {&t.bytes_sent, &t.sketch, &t.values, &t.indices, &t.fallbacks};
    for (double* s : sums) MPI_Allreduce(MPI_IN_PLACE, s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  // Hosts: one leader per shared-memory node.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int node_rank = 0, hosts = 0;
  MPI_Comm_rank(node, &node_rank);
  int leader = node_rank == 0 ? 1 : 0;
  MPI_Allreduce(&leader, &hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_free(&node);
  if (rank == 0) {
    const double copy = ab::summarize(copy_seconds).median;
    const double set_bytes = static_cast<double>(set.elements()) * 4;
    std::vector<Bounds> bounds;
    for (const Variant& v : variants) {
      Bounds& b = bounds.emplace_back();
      b.wire_bytes = wire_lower_bound(v, set, ranks, config);
      if (flags.link_gbit > 0) b.wire_seconds = b.wire_bytes * 8 / (flags.link_gbit * 1e9);
      b.memory_seconds = copy;
    }
    print_header(set, flags, ranks, hosts, config);
    print_table(variants, totals, bounds, copy > 0 ? set_bytes / copy / 1e9 : 0, flags.repetitions,
                ranks);
  }
  arcreduce::shutdown();
  MPI_Finalize();
  return mismatches == 0 ? 0 : 1;
}
