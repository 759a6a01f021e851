#!/usr/bin/env python3
"""Time to accuracy composed as steps to the target times the step time on the cluster.

  compose_steps.py --tta DIR [--tta DIR ...] --steps RESULTS.jsonl [--workload lm]

Steps: the bench-tta rows (results.jsonl in each DIR) of the workload, per variant and seed (a
run that reached its target stops there; dense trains its whole budget, defines the target, and
is counted to the first evaluation at it, as bench/tta/make_report.py counts it).
Step times: scripts/bench-lm-steps.sh's rows, per rate and variant. DDP averages gradients as the
dense path does and is given dense's steps where it was not trained itself. Prints, per rate,
the median steps over the seeds, the step time, the composed time and its multiple of DDP's and
of All-Gather Top-K's.
"""
import argparse
import json
import os
import statistics

NAMES = {"arctopk-default": "arctopk"}  # bench-tta's variant -> bench-lm-steps' variant


def first_at(points, target, loss):
    """The first evaluated step at the target (a loss at or below it, an accuracy at or above
    it; bench/tta/make_report.py's rule), or the last step where no other variant set one."""
    if target is None:
        return points[-1]["step"]
    for p in points:
        value = p["val_loss"] if loss else p["test_accuracy"]
        if (value <= target) if loss else (value >= target):
            return p["step"]
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tta", action="append", required=True)
    p.add_argument("--steps", required=True)
    p.add_argument("--workload", default="lm")
    a = p.parse_args()
    steps = {}  # variant -> {seed: steps or None}
    rows = []
    for d in a.tta:
        for line in open(os.path.join(d, "results.jsonl")):
            r = json.loads(line)
            if r.get("workload") == a.workload and not r.get("failed"):
                rows.append(r)
    targets = {r["seed"]: r["target"] for r in rows if r["variant"] != "dense"}
    for r in rows:
        v = NAMES.get(r["variant"], r["variant"])
        if v == "dense":  # trains its whole budget: its steps to the target its curve set
            steps.setdefault(v, {})[r["seed"]] = first_at(r["points"], targets.get(r["seed"]),
                                                          a.workload == "lm")
        else:  # stops at the target, or at its budget
            steps.setdefault(v, {})[r["seed"]] = r["points"][-1]["step"] if r.get("reached") \
                else None
    if "dense" in steps and "ddp" not in steps:  # not trained: DDP averages as dense does
        steps["ddp"] = dict(steps["dense"])
    times = {}
    for line in open(a.steps):
        r = json.loads(line)
        if r.get("bench") == "lm-steps" and not r.get("failed"):
            times.setdefault(r["rate"], {})[r["variant"]] = r["step_s"]
    for rate, by_variant in times.items():
        print(f"\n{a.workload}, 8 hosts x {rate}: composed time to target")
        print("| variant | steps per seed | median steps | step s | time s | x DDP | x All-Gather Top-K |")
        print("|---|---|---|---|---|---|---|")
        composed = {}
        for v, seeds in steps.items():
            reached = [s for s in seeds.values() if s is not None]
            if v not in by_variant or len(reached) < len(seeds):
                continue
            composed[v] = statistics.median(reached) * by_variant[v]
        for v, seeds in sorted(steps.items()):
            per_seed = ", ".join("-" if s is None else str(s) for _, s in sorted(seeds.items()))
            reached = [s for s in seeds.values() if s is not None]
            med = statistics.median(reached) if len(reached) == len(seeds) else None
            t = by_variant.get(v)
            c = composed.get(v)
            ddp = f"{c / composed['ddp']:.2f}x" if c and "ddp" in composed else "-"
            ag = f"{c / composed['topk']:.2f}x" if c and "topk" in composed else "-"
            print(f"| {v} | {per_seed} | {med if med else 'not all reached'} | "
                  f"{t:.3f} | {c:.0f} | {ddp} | {ag} |" if t and c else
                  f"| {v} | {per_seed} | {med if med else 'not all reached'} | "
                  f"{f'{t:.3f}' if t else '-'} | - | - | - |")


if __name__ == "__main__":
    main()
