#!/usr/bin/env python3
"""Tables of scripts/bench-hierarchy.sh: per setting, flat against hierarchical step time and
bytes crossing host 1's link per step, the bytes also as a multiple of one rank per host's
(measured at the same commit, else the latest such rows: that path does not change with the
hierarchy).

    hierarchy_report.py RESULTS.jsonl [--commit C] [--mode M]
        C: default the last commit in the file; M: the ARCREDUCE_HIERARCHICAL setting set against
        flat (0), default every one measured (auto, sharded, ...), a table each.
"""
import argparse
import json
from collections import defaultdict


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--commit")
    parser.add_argument("--mode")
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.results) if line.startswith("{")]
    rows = [r for r in rows if r.get("bench") == "hierarchy"]
    commit = args.commit or (rows[-1]["commit"] if rows else None)
    baseline = {}
    for r in rows:  # one rank per host: the latest, this commit's preferred
        key = (r["hosts"], r["rate"], r["variant"])
        if r["slots"] == 1 and (r["commit"] == commit or baseline.get(key, {}).get("commit") != commit):
            baseline[key] = r
    rows = [r for r in rows if r["commit"] == commit]
    runs = defaultdict(list)
    for r in rows:
        runs[(r["hosts"], r["rate"], r["variant"], r["slots"], r["hierarchical"])].append(r)

    def median(key, field):
        values = sorted(r[field] for r in runs.get(key, []))
        return values[len(values) // 2] if values else None

    def kb(value):
        return f"{value / 1e3:.0f}" if value is not None else "-"

    modes = [args.mode] if args.mode else sorted({k[4] for k in runs if k[4] != "0"}) or ["auto"]
    for mode in modes:
        table(runs, baseline, commit, mode, median, kb)


def table(runs, baseline, commit, mode, median, kb):
    print(f"commit {commit}, ARCREDUCE_HIERARCHICAL={mode} against 0: "
          "median step s and bytes crossing host 1's link per step")
    print("| hosts | rate | variant | ranks per host | flat s | hierarchical s | hier. / flat | "
          "flat KB | hier. KB | hier. bytes / one rank per host's |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    settings = sorted({k[:3] for k in runs})
    one_s = {k: r["median_s"] for k, r in baseline.items()}
    for hosts, rate, variant in settings:
        one = baseline.get((hosts, rate, variant), {}).get("link_bytes_per_step")
        for slots in sorted({k[3] for k in runs if k[:3] == (hosts, rate, variant)}):
            flat_s = median((hosts, rate, variant, slots, "0"), "median_s")
            if slots == 1 and flat_s is None:
                flat_s = one_s.get((hosts, rate, variant))
            hier_s = median((hosts, rate, variant, slots, mode), "median_s")
            flat_b = median((hosts, rate, variant, slots, "0"), "link_bytes_per_step")
            hier_b = median((hosts, rate, variant, slots, mode), "link_bytes_per_step")
            step_ratio = f"{hier_s / flat_s:.2f}x" if flat_s and hier_s else "-"
            byte_ratio = f"{hier_b / one:.2f}x" if hier_b and one else "-"
            print(f"| {hosts} | {rate} | {variant} | {slots} | "
                  f"{flat_s:.4f} | " + (f"{hier_s:.4f}" if hier_s else "-") + f" | {step_ratio} | "
                  f"{kb(flat_b)} | {kb(hier_b)} | {byte_ratio} |")


if __name__ == "__main__":
    main()
