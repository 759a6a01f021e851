#!/usr/bin/env python3
"""When compression pays, by link rate: time to accuracy composed from steps and step times.

  when_it_helps.py --tta TTA_DIR [--tta ...] --e2e E2E_DIR [--e2e ...] [--png PNG]

TTA_DIR/results.jsonl (scripts/bench-tta.sh) gives, per seed, the steps each variant took to the
target (dense's last-epoch accuracy less 0.5 points: the `target` of the compressed runs of the
same seed). E2E_DIR/results.jsonl (scripts/bench-e2e.sh over several RATES) gives each variant's
step time per setting (the median over passes of each pass's median step). A variant's time to
the target is its steps times its step time. DDP reduces gradients exactly as arcreduce's dense
path does, so it is given dense's steps; DDP with PowerSGD's hook has no steps measured here and
gets a step time only. Prints a Markdown table (per setting: each
variant's step and time to accuracy as multiples of DDP's, with the range over seeds) and the
link rate at which ARC-Top-K's time to accuracy crosses DDP's, and plots ARC-Top-K's time to
accuracy as a multiple of DDP's and of All-Gather Top-K's against link rate.
"""
import argparse
import json
import math
import re
import statistics

# e2e variant -> the tta variant whose steps it takes (None: dense's).
STEPS_OF = {"dense": "dense", "ddp": "dense", "ddp-powersgd": None, "arctopk": "arctopk-default",
            "topk": "topk", "paper": "paper", "randk": "randk", "oktopk": "oktopk"}
LABELS = {"dense": "arcreduce dense", "ddp": "PyTorch DDP", "ddp-powersgd": "DDP + PowerSGD hook",
          "arctopk": "ARC-Top-K (defaults)", "topk": "All-Gather Top-K 1%",
          "paper": "ARC-Top-K, paper preset", "randk": "shared Rand-K 1% (ef14)",
          "oktopk": "Ok-Topk 1%"}


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def steps_to_target(tta_rows):
    """{seed: {variant: steps}}: the first evaluation at or above the seed's target."""
    targets = {r["seed"]: r["target"] for r in tta_rows if r.get("target")}
    out = {}
    for r in tta_rows:
        target = targets.get(r["seed"])
        if target is None:
            continue
        hit = next((p["step"] for p in r["points"] if p["test_accuracy"] >= target), None)
        out.setdefault(r["seed"], {})[r["variant"]] = hit
    return out


def rate_mbit(setting):
    m = re.search(r"(\d+(?:\.\d+)?)(k|m|g)bit", setting)
    scale = {"k": 1e-3, "m": 1.0, "g": 1e3}[m.group(2)]
    return float(m.group(1)) * scale


def step_times(e2e_rows):
    """{setting: {variant: [pass medians]}} of the runs that completed."""
    out = {}
    for r in e2e_rows:
        if "median_s" in r:
            out.setdefault(r["setting"], {}).setdefault(r["variant"], []).append(r["median_s"])
    return out


def compose(steps, times, variant, seed, setting):
    source = STEPS_OF.get(variant)
    n = steps[seed].get(source) if source else None
    if n is None or variant not in times[setting]:
        return None
    return n * statistics.median(times[setting][variant])


def fmt_range(values):
    mid = statistics.median(values)
    return f"{mid:.2f}x ({min(values):.2f}-{max(values):.2f})"


def crossover(rates, ratios):
    """The rate (Mbit/s) where the ratio crosses 1, interpolated in log rate; None if it doesn't."""
    pairs = sorted(zip(rates, ratios))
    for (r0, y0), (r1, y1) in zip(pairs, pairs[1:]):
        if (y0 - 1) * (y1 - 1) <= 0 and y0 != y1:
            t = (1 - y0) / (y1 - y0)
            return math.exp(math.log(r0) + t * (math.log(r1) - math.log(r0)))
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tta", required=True, action="append", help="repeatable: seeds add up")
    p.add_argument("--e2e", required=True, action="append", help="repeatable: passes add up")
    p.add_argument("--png")
    args = p.parse_args()
    steps = steps_to_target([r for d in args.tta for r in load(f"{d}/results.jsonl")])
    times = step_times([r for d in args.e2e for r in load(f"{d}/results.jsonl")])
    seeds = sorted(steps)
    settings = sorted(times, key=rate_mbit)
    variants = [v for v in LABELS if any(v in times[s] for s in settings)]
    print(f"Steps to the target per seed ({', '.join(map(str, seeds))}):")
    for v in sorted({v for s in seeds for v in steps[s]}):
        print(f"  {v}: {', '.join(str(steps[s].get(v)) for s in seeds)}")
    print()
    print("| setting | variant | step, median of passes | step / DDP's | time to accuracy / DDP's "
          "(median, range over seeds) | / dense's |")
    print("|---|---|---|---|---|---|")
    curves = {"ddp": [], "topk": []}
    for setting in settings:
        ddp_step = statistics.median(times[setting]["ddp"]) if "ddp" in times[setting] else None
        for v in variants:
            if v not in times[setting]:
                continue
            step = statistics.median(times[setting][v])
            passes = times[setting][v]
            spread = (max(passes) - min(passes)) / step
            ratios, to_dense = [], []
            for seed in seeds:
                mine = compose(steps, times, v, seed, setting)
                ddp = compose(steps, times, "ddp", seed, setting)
                dense = compose(steps, times, "dense", seed, setting)
                if mine and ddp:
                    ratios.append(mine / ddp)
                if mine and dense:
                    to_dense.append(mine / dense)
            step_ratio = f"{step / ddp_step:.3f}x" if ddp_step else "—"
            tta = fmt_range(ratios) if ratios else "—"
            tta_dense = fmt_range(to_dense) if to_dense else "—"
            print(f"| {setting} | {LABELS[v]} | {step * 1000:.0f} ms ({100 * spread:.0f}% over "
                  f"{len(passes)}) | {step_ratio} | {tta} | {tta_dense} |")
        for base in curves:
            per_seed = []
            for seed in seeds:
                mine = compose(steps, times, "arctopk", seed, setting)
                other = compose(steps, times, base, seed, setting)
                if mine and other:
                    per_seed.append(mine / other)
            if per_seed:
                curves[base].append((rate_mbit(setting), statistics.median(per_seed),
                                     min(per_seed), max(per_seed)))
    print()
    for base, points in curves.items():
        if points:
            x = crossover([p[0] for p in points], [p[1] for p in points])
            where = f"at about {x:.0f} Mbit/s" if x else "not within the rates measured"
            print(f"ARC-Top-K's time to accuracy crosses {LABELS[base]}'s {where}")
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 3.8))
        for base, style in (("ddp", "o-"), ("topk", "s--")):
            pts = curves[base]
            if not pts:
                continue
            xs = [q[0] for q in pts]
            ax.plot(xs, [q[1] for q in pts], style, label=f"ARC-Top-K / {LABELS[base]}")
            ax.fill_between(xs, [q[2] for q in pts], [q[3] for q in pts], alpha=0.2)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("link rate per host (Mbit/s), 8 hosts")
        ax.set_ylabel("time to accuracy, multiple")
        ax.set_title("examples/03's MLP: ARC-Top-K's time to accuracy (band: seeds)")
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(args.png, dpi=100)
        print(f"plot: {args.png}")


if __name__ == "__main__":
    main()
