#!/usr/bin/env python3
"""Tables of scripts/bench-algorithms.sh's results (docs/design/communicators-allreduce.md).

  algorithm_report.py reduce RESULTS.jsonl --hosts N --rate R [--commit C]
  algorithm_report.py step RESULTS.jsonl --hosts N --rate R [--commit C]

reduce: per message size, each algorithm's median (the slowest rank's), the one "auto" took,
auto's time over the best fixed algorithm's, and the model's prediction for the algorithm auto
took over its measured time. step: per variant and algorithm, the median over passes of
examples/03's median step time (with the spread of the passes), bytes sent per step against the
bandwidth-optimal All-Reduce of the step's All-Reduce payload (2 (P - 1) / P of it), auto's step
over the best fixed algorithm's, and ARC-Top-K's over All-Gather Top-K's under auto.
"""
import argparse
import json
import statistics


def rows(path, kind, hosts, rate, commit):
    out = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if str(r.get("hosts")) != str(hosts) or r.get("rate") != rate:
                continue
            if commit and r.get("commit") != commit:
                continue
            if kind == "reduce" and r.get("bench") == "algorithms":
                out.append(r)
            if kind == "step" and r.get("bench") == "e2e":
                out.append(r)
    return out


def reduce_table(rs, hosts, rate):
    latest = {}
    for r in rs:
        latest[r["bytes"]] = r
    names = ["ring", "rabenseifner", "doubling", "mpi", "auto"]
    print(f"\nreduce-only, {hosts} hosts x {rate} (medians, ms; model/measured for auto's choice)")
    print("| KB | " + " | ".join(names) + " | auto took | auto / best fixed | model / measured |")
    print("|---" * (len(names) + 4) + "|")
    for size in sorted(latest):
        r = latest[size]
        m = r["median_s"]
        best = min(m[n] for n in names[:-1])
        took = r["auto"]
        model = r["model_s"].get(took)
        ratio = f"{model / m[took]:.2f}" if model and m.get(took) else "-"
        cells = " | ".join(f"{m[n] * 1e3:.2f}" for n in names)
        print(f"| {size / 1000:.0f} | {cells} | {took} | {m['auto'] / best:.3f} | {ratio} |")


def step_table(rs, hosts, rate):
    by = {}
    for r in rs:
        by.setdefault((r["name"], r["algorithm"]), []).append(r)
    print(f"\ntraining step (examples/03), {hosts} hosts x {rate}: median of the passes' medians")
    print("| variant | algorithm | passes | step s (min-max) | KB sent / step |"
          " / bandwidth-optimal | All-Reduces per step by algorithm |")
    print("|---|---|---|---|---|---|---|")
    medians = {}
    for (name, algorithm), runs in sorted(by.items()):
        steps = [r["median_s"] for r in runs]
        med = statistics.median(steps)
        medians[(name, algorithm)] = med
        sent = statistics.median(r["bytes_sent_per_step"] for r in runs)
        payload = statistics.median(r.get("allreduce_payload_bytes_per_step", 0) for r in runs)
        optimal = 2 * (hosts - 1) / hosts * payload
        over = f"{sent / optimal:.2f}x" if optimal > 0 else "-"
        calls = runs[-1].get("allreduce_calls_per_step", {})
        calls_text = ", ".join(f"{k} {v:.1f}" for k, v in sorted(calls.items()))
        print(f"| {name} | {algorithm} | {len(runs)} | {med:.4f} ({min(steps):.4f}-"
              f"{max(steps):.4f}) | {sent / 1e3:.0f} | {over} | {calls_text} |")
    for name in sorted({n for n, _ in medians}):
        fixed = {a: t for (n, a), t in medians.items() if n == name and a != "auto"}
        if (name, "auto") in medians and fixed:
            best = min(fixed, key=fixed.get)
            print(f"{name}: auto {medians[(name, 'auto')] / fixed[best]:.3f}x the best fixed "
                  f"({best})")
    if ("arctopk", "auto") in medians and ("topk", "auto") in medians:
        print(f"ARC-Top-K / All-Gather Top-K (auto): "
              f"{medians[('arctopk', 'auto')] / medians[('topk', 'auto')]:.3f}x")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["reduce", "step"])
    p.add_argument("results")
    p.add_argument("--hosts", type=int, required=True)
    p.add_argument("--rate", required=True)
    p.add_argument("--commit", default="")
    a = p.parse_args()
    rs = rows(a.results, a.kind, a.hosts, a.rate, a.commit)
    if not rs:
        print(f"no {a.kind} results for {a.hosts} hosts x {a.rate}")
        return
    (reduce_table if a.kind == "reduce" else step_table)(rs, a.hosts, a.rate)


if __name__ == "__main__":
    main()
