#!/usr/bin/env python3
"""A model of each compressor's training step, checked on the simulated cluster and projected
beyond it (docs/scaling-model.md).

    step = compute + runtime CPU + max(0, link time - BACKWARD_SHARE x compute)

compute is the same setting's `floor` row (no communication, the same CPU budget); the runtime's
CPU is the coordinator's CPU seconds per step, stretched by the host's CPU budget (the budget is
shared by the training and the coordinator thread); the link time is the sum over the step's
collectives, each from its calls and payload per step (arcreduce::Stats, by algorithm and kind)
and the link the runtime measured at init (latency a per round, b seconds per byte), by the
textbook costs of COSTS below; collectives run while backward computes, so up to its share of
the compute is hidden. On the simulated cluster, each link is a token bucket whose burst (refilled
while the host computes) passes at once: that many bytes a step cost no time there. The
projection keeps every row's calls, scales the payloads to a model of another size and to more
nodes by the laws of SCALING, and adds a GPU step's compute.

    step_model.py report RESULTS.jsonl [--out DIR]   check table, projection table, plot
"""
import argparse
import json
import math
import os
import statistics
import sys
from collections import defaultdict

VARIANTS = ["dense", "arctopk", "topk", "oktopk", "powersgd"]
NAMES = {"dense": "dense", "arctopk": "ARC-Top-K", "topk": "All-Gather Top-K",
         "oktopk": "Ok-Topk", "powersgd": "PowerSGD"}
RING_BYTES = 256 * 1024  # the runtime's ring threshold up to 8 ranks (ops/allreduce_algorithm.h)
# Backward's share of a step's compute, behind which the collectives run (forward 1 GEMM per
# layer, backward 2, the optimizer a pass over the weights).
BACKWARD_SHARE = 0.6


def simulated_burst(rate):
    """Bytes scripts/sim-cluster.sh's token bucket lets through at once: 4 ms of line time, at
    least 64 KiB."""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for unit, scale in units.items():
        if rate.endswith(unit):
            return max(65536.0, float(rate[:-len(unit)]) * scale / 8 / 250)
    return 0.0


def log2c(p):
    return math.ceil(math.log2(p)) if p > 1 else 0


def allreduce_cost(algorithm, p, n):
    """(rounds, bytes on the busiest link) of one All-Reduce of n bytes over p ranks."""
    if p <= 1:
        return 0, 0
    if algorithm == "ring":
        return 2 * (p - 1), 2 * (p - 1) / p * n
    q = 1 << int(math.floor(math.log2(p)))  # off a power of two, the extra ranks fold in and out
    fold = (2, 2 * n) if q != p else (0, 0)
    lg = int(math.log2(q))
    if algorithm == "rabenseifner":
        return 2 * lg + fold[0], 2 * (q - 1) / q * n + fold[1]
    return lg + fold[0], lg * n + fold[1]  # doubling (and MPI's, for small messages)


# Other collectives: (rounds, bytes) of one call of payload n (CommunicationUsage's definition).
COSTS = {
    "allgather": lambda p, n: (log2c(p), (p - 1) * n),              # n: this rank's block
    "allgatherv": lambda p, n: (log2c(p), (p - 1) / p * n),         # n: the gathered total
    "alltoallv": lambda p, n: (p - 1, n),                           # n: sent to the others
    "broadcast": lambda p, n: (log2c(p), log2c(p) * n),             # binomial tree
    "gatherv": lambda p, n: (log2c(p), n),                          # the root takes it all
    "point_to_point": lambda p, n: (1, n),                          # per call, n: sent
}

# How a count measured at p0 ranks becomes one at p ranks (calls, payload), for the projection:
# All-Reduce payloads do not grow with ranks (that is the point of ARC-Top-K and PowerSGD);
# All-Gather Top-K's block does not either, but every rank receives p - 1 of them (COSTS);
# Ok-Topk's reduced entries (allgatherv) are the global top-k, flat, while its per-peer traffic
# (alltoallv counts, point-to-point sends) reaches p - 1 peers.
SCALING = {
    "allgather": lambda p, p0: (1, 1),
    "allgatherv": lambda p, p0: (1, 1),
    "alltoallv": lambda p, p0: (1, (p - 1) / (p0 - 1)),
    "broadcast": lambda p, p0: (1, 1),
    "gatherv": lambda p, p0: (1, 1),
    "point_to_point": lambda p, p0: ((p - 1) / (p0 - 1), ((p - 1) / p) / ((p0 - 1) / p0)),
}
SIZE_FREE = {"alltoallv", "broadcast", "gatherv"}  # counts and negotiation: not the model's size


def ring_threshold(p):
    """Where the ring takes over among p ranks (ops/allreduce_algorithm.cc, ring_threshold_for):
    1 MiB at two ranks, 256 KiB up to 8, then 32 KiB a rank."""
    if p == 2:
        return 4 * RING_BYTES
    return RING_BYTES if p <= 8 else RING_BYTES // 8 * p


def choose(p, n, latency, per_byte):
    """The runtime's `auto` across hosts for a message of n bytes (ops/link_model.cc): the ring
    from its threshold, below it the tree of least time on the link (doubling at two ranks)."""
    if n >= ring_threshold(p):
        return "ring"
    if p == 2:
        return "doubling"

    def seconds(algorithm):
        rounds, nbytes = allreduce_cost(algorithm, p, n)
        return rounds * latency + nbytes * per_byte
    return min(("rabenseifner", "doubling"), key=seconds)


def comm_seconds(row, p, latency, per_byte, size_scale=1.0, p0=None, rechoose=False, burst=0.0):
    """Link seconds of one step's collectives; with p0, the counts of p0 ranks moved to p; the
    first `burst` bytes of the step free."""
    rounds_total, bytes_total, parts = 0.0, 0.0, defaultdict(float)
    calls = row.get("allreduce_calls_per_step") or {}
    payload = row.get("allreduce_bytes_per_step") or {}
    for algorithm, c in calls.items():
        if c <= 0:
            continue
        n = payload.get(algorithm, 0) / c * size_scale
        chosen = choose(p, n, latency, per_byte) if rechoose else algorithm
        rounds, nbytes = allreduce_cost(chosen, p, n)
        parts["allreduce"] += c * (rounds * latency + nbytes * per_byte)
        rounds_total += c * rounds
        bytes_total += c * nbytes
    kcalls = row.get("collective_calls_per_step") or {}
    kbytes = row.get("collective_bytes_per_step") or {}
    for kind, c in kcalls.items():
        if c <= 0 or kind not in COSTS:
            continue
        n = kbytes.get(kind, 0) / c
        if kind not in SIZE_FREE:
            n *= size_scale
        if p0 is not None:
            call_scale, byte_scale = SCALING[kind](p, p0)
            c *= call_scale
            n *= byte_scale / call_scale
        rounds, nbytes = COSTS[kind](p, n)
        parts[kind] += c * (rounds * latency + nbytes * per_byte)
        rounds_total += c * rounds
        bytes_total += c * nbytes
    total = rounds_total * latency + max(0.0, bytes_total - burst) * per_byte
    return total, parts


def budget_cores(row):
    setting = row.get("setting", "")
    for word in setting.split(","):
        word = word.strip()
        if word.endswith("core each"):
            return float(word.split()[0])
    return 1.0


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                if r.get("bench") == "e2e" and not r.get("failed") and r.get("median_s"):
                    rows.append(r)
    return rows


def rate_of(row):
    return row.get("setting", "").split()[2].rstrip(",")


def check(rows):
    """Model against measurement for every (hosts, rate, variant): medians over passes."""
    by = defaultdict(list)
    for r in rows:
        by[(r["hosts"], rate_of(r), r["variant"])].append(r)
    out = []
    for (hosts, rate, variant), runs in sorted(by.items()):
        if variant not in VARIANTS:
            continue
        floor = by.get((hosts, rate, "floor"))
        if not floor:
            continue
        compute = statistics.median(f["median_s"] for f in floor)
        measured = statistics.median(r["median_s"] for r in runs)
        modelled = []
        for r in runs:
            latency = r["link_latency_us"] * 1e-6
            per_byte = 8 / (r["link_mbit_per_s"] * 1e6)
            comm, _ = comm_seconds(r, hosts, latency, per_byte, burst=simulated_burst(rate))
            plain, _ = comm_seconds(r, hosts, latency, per_byte)
            cpu = r["coordinator_cpu_s_per_step"] / min(1.0, budget_cores(r))
            exposed = max(0.0, comm - BACKWARD_SHARE * compute)
            modelled.append((compute + cpu + exposed, compute, cpu, comm, compute + cpu + plain))
        m = [statistics.median(x[i] for x in modelled) for i in range(5)]
        out.append({"hosts": hosts, "rate": rate, "variant": variant, "passes": len(runs),
                    "measured_s": measured, "spread": (min(r["median_s"] for r in runs),
                                                       max(r["median_s"] for r in runs)),
                    "model_s": m[0], "compute_s": m[1], "cpu_s": m[2], "comm_s": m[3],
                    "serial_s": m[4], "error": m[0] / measured - 1})
    return out


def base_rows(rows, hosts):
    """Per variant, the pass with the median step at the most hosts measured (the projection's
    counts)."""
    chosen = {}
    for variant in VARIANTS:
        runs = sorted((r for r in rows if r["variant"] == variant and r["hosts"] == hosts),
                      key=lambda r: r["median_s"])
        if runs:
            chosen[variant] = runs[len(runs) // 2]
    return chosen


# The projection's settings: stated, not measured here.
PROJECT_NODES = [8, 16, 64, 256]
PROJECT_GBITS = [10, 25, 100]
PROJECT_LATENCY_US = 10.0  # one round between nodes through MPI over TCP or RoCE
PROJECT_GRADIENT_MB = 100.0  # a 25M-parameter model (about ResNet-50's size)
PROJECT_COMPUTE_S = [0.05, 0.2]  # one GPU step's forward + backward + optimizer


def project(base, gradient_bytes, p0):
    scale = PROJECT_GRADIENT_MB * 1e6 / gradient_bytes
    table = []
    for compute in PROJECT_COMPUTE_S:
        for gbit in PROJECT_GBITS:
            per_byte = 8 / (gbit * 1e9)
            latency = PROJECT_LATENCY_US * 1e-6
            for p in PROJECT_NODES:
                row = {"compute_s": compute, "gbit": gbit, "nodes": p}
                for variant, r in base.items():
                    comm, _ = comm_seconds(r, p, latency, per_byte, size_scale=scale, p0=p0,
                                           rechoose=True)
                    row[variant] = compute + max(0.0, comm - BACKWARD_SHARE * compute)
                    row[variant + ":link"] = comm
                table.append(row)
    return table


def markdown(checks, projection, p0, gradient_bytes):
    lines = ["Model against the simulated cluster (examples/03's MLP, one rank per host, each "
             "host's CPU budget; medians over passes)", "",
             "| hosts | link | variant | passes | measured s (min-max) | model s | compute | "
             "runtime CPU | collectives | model / measured | serial textbook / measured |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in checks:
        lines.append(
            f"| {c['hosts']} | {c['rate']} | {NAMES[c['variant']]} | {c['passes']} | "
            f"{c['measured_s']:.4f} ({c['spread'][0]:.4f}-{c['spread'][1]:.4f}) | "
            f"{c['model_s']:.4f} | {c['compute_s']:.4f} | {c['cpu_s']:.4f} | {c['comm_s']:.4f} | "
            f"{c['model_s'] / c['measured_s']:.2f}x | {c['serial_s'] / c['measured_s']:.2f}x |")
    worst = max(checks, key=lambda c: abs(c["error"])) if checks else None
    if worst:
        within = sum(abs(c["error"]) <= 0.2 for c in checks)
        lines += ["", f"{within} of {len(checks)} within 20%; the farthest: {worst['hosts']} "
                  f"hosts x {worst['rate']} {NAMES[worst['variant']]}, "
                  f"{worst['model_s'] / worst['measured_s']:.2f}x."]
    lines += ["", f"Projection: each variant's counts per step at {p0} hosts, payloads scaled "
              f"from {gradient_bytes / 1e6:.2f} MB to a {PROJECT_GRADIENT_MB:.0f} MB gradient, "
              f"{PROJECT_LATENCY_US:.0f} us per round; step seconds (GPU compute + the collectives "
              f"not hidden behind backward, {BACKWARD_SHARE} of the compute; the compressors' own "
              "device time not included); in brackets the link time alone", ""]
    header = "| compute s | Gbit/s | nodes | " + " | ".join(NAMES[v] for v in VARIANTS
                                                          if v in projection[0]) + " |"
    lines += [header, "|" + "---|" * (header.count("|") - 1)]
    for row in projection:
        values = " | ".join(f"{row[v]:.3f} ({row[v + ':link']:.3f})" for v in VARIANTS if v in row)
        lines.append(f"| {row['compute_s']:.2f} | {row['gbit']} | {row['nodes']} | {values} |")
    return "\n".join(lines) + "\n"


def plot(checks, projection, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = {"dense": "#444444", "arctopk": "#d62728", "topk": "#1f77b4", "oktopk": "#2ca02c",
              "powersgd": "#9467bd"}
    markers = {"100mbit": "o", "1gbit": "s", "25mbit": "^"}
    for c in checks:
        left.scatter(c["measured_s"], c["model_s"], color=colors[c["variant"]],
                     marker=markers.get(c["rate"], "x"), s=30)
    lo = min(min(c["measured_s"], c["model_s"]) for c in checks) * 0.8
    hi = max(max(c["measured_s"], c["model_s"]) for c in checks) * 1.25
    xs = [lo, hi]
    left.plot(xs, xs, color="black", lw=1)
    left.plot(xs, [x * 1.2 for x in xs], color="gray", lw=0.8, ls="--")
    left.plot(xs, [x * 0.8 for x in xs], color="gray", lw=0.8, ls="--")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("measured step (s), simulated cluster 2-8 hosts")
    left.set_ylabel("model (s)")
    left.set_title("model against measurement (dashed: 20%)")
    for v in VARIANTS:
        left.scatter([], [], color=colors[v], label=NAMES[v])
    for rate, m in markers.items():
        if any(c["rate"] == rate for c in checks):
            left.scatter([], [], color="gray", marker=m, label=rate)
    left.legend(fontsize=8)
    compute = PROJECT_COMPUTE_S[0]
    shown = [PROJECT_GBITS[0], PROJECT_GBITS[-1]]
    for gbit, style in zip(shown, ["-", ":"]):
        rows = [r for r in projection if r["compute_s"] == compute and r["gbit"] == gbit]
        for v in VARIANTS:
            if v in rows[0]:
                right.plot([r["nodes"] for r in rows], [r[v + ":link"] for r in rows],
                           color=colors[v], ls=style, marker="o", ms=3,
                           label=NAMES[v] if gbit == shown[0] else None)
    for gbit, style in zip(shown, ["-", ":"]):
        right.plot([], [], color="gray", ls=style, label=f"{gbit} Gbit/s")
    hidden = BACKWARD_SHARE * compute
    right.axhline(hidden, color="gray", lw=0.8, ls="--")
    right.text(PROJECT_NODES[0], hidden * 1.08,
               f"hidden behind backward of a {compute * 1000:.0f} ms step", fontsize=8)
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("nodes")
    right.set_ylabel("link time per step (s)")
    right.set_title(f"projected: {PROJECT_GRADIENT_MB:.0f} MB gradient, "
                    f"{PROJECT_LATENCY_US:.0f} us per round")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["report"])
    parser.add_argument("results")
    parser.add_argument("--out", help="write model.md and step-model.png there")
    parser.add_argument("--plot", help="the plot's path (default: OUT/step-model.png)")
    args = parser.parse_args()
    rows = load(args.results)
    checks = check(rows)
    if not checks:
        sys.exit("step_model: no variant with a floor row in " + args.results)
    # The projection starts from the most hosts at which every variant was measured.
    complete = [h for h in {r["hosts"] for r in rows}
                if all(any(r["hosts"] == h and r["variant"] == v for r in rows) for v in VARIANTS)]
    if not complete:
        sys.exit("step_model: no host count with every variant of " + " ".join(VARIANTS))
    p0 = max(complete)
    base = base_rows(rows, p0)
    gradient_bytes = next(iter(base.values()))["gradient_bytes"]
    projection = project(base, gradient_bytes, p0)
    text = markdown(checks, projection, p0, gradient_bytes)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "model.md"), "w") as f:
            f.write(text)
        plot(checks, projection, args.plot or os.path.join(args.out, "step-model.png"))


if __name__ == "__main__":
    main()
