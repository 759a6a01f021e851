#!/usr/bin/env python3
"""Time to accuracy composed as steps to the target times the step time on the cluster.

  compose_steps.py --tta DIR [--tta DIR ...] --steps RESULTS.jsonl [--workload lm]

Steps: the bench-tta rows (results.jsonl in each DIR) of the workload, per variant and seed (a
run that reached its target stops there; dense trains its whole budget and defines the target).
Step times: scripts/bench-lm-steps.sh's rows, per rate and variant. DDP averages gradients as the
dense path does and is given dense's steps where it was not trained itself. Prints, per rate, the median steps over the seeds,
the step time, the composed time and its multiple of DDP's and of All-Gather Top-K's.
"""
import argparse
import json
import os
import statistics

NAMES = {"arctopk-default": "arctopk"}  # bench-tta's variant -> bench-lm-steps' variant


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tta", action="append", required=True)
    p.add_argument("--steps", required=True)
    p.add_argument("--workload", default="lm")
    a = p.parse_args()
    steps = {}  # variant -> {seed: steps or None}
    for d in a.tta:
        for line in open(os.path.join(d, "results.jsonl")):
            r = json.loads(line)
            if r.get("workload") != a.workload or r.get("failed"):
                continue
            v = NAMES.get(r["variant"], r["variant"])
            last = r["points"][-1]["step"]
            reached = r.get("reached") or v == "dense"
            steps.setdefault(v, {})[r["seed"]] = last if reached else None
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
