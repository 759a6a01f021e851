#!/usr/bin/env python3
"""Time to the target as a multiple of dense's, per workload, setting and variant, from bench-tta
runs.

  auto_compression_plot.py OUT.png RESULTS.jsonl[=VARIANT,...]...

A file given as PATH=VARIANT,... contributes only those variants' rows (so that a run of an
earlier version of a variant can lend its other rows without its own).

Per workload and setting, seed and variant: the time to the target (the first evaluation at or
above it) over dense's time in the same workload, seed and setting; the bars show the median over
seeds, the ticks each seed. Prints the same figures as a table. Variants without dense's seed
are left out."""
import json
import statistics
import sys


def time_to_target(row, target):
    for p in row.get("points", []):
        if p["step"] > 0 and p.get("test_accuracy", 0) >= (target if target <= 1 else target / 100):
            return p["seconds"]
    return None


def load_rows(args):
    """The rows of RESULTS.jsonl[=VARIANT,...] arguments, failed runs left out."""
    rows = []
    for arg in args:
        path, _, keep = arg.partition("=")
        wanted = set(keep.split(",")) if keep else None
        with open(path) as f:
            rows += [r for r in (json.loads(line) for line in f if line.strip())
                     if wanted is None or r["variant"] in wanted]
    return [r for r in rows if not r.get("failed")]


def ratios_by_setting(rows):
    """{(setting, variant): [time to the target / dense's, per seed]}. A setting is the workload
    and the cluster ("mlp 8x1gbit"), so that ratios never mix workloads."""
    def setting(r):
        return f'{r.get("workload", "mlp")} {r["setting"]}'
    # Dense trains first with no target; the others carry the seed's target (bench-tta.sh).
    targets = {(setting(r), r["seed"]): r["target"] for r in rows if r["variant"] != "dense"}
    dense = {(setting(r), r["seed"]): time_to_target(r, targets[(setting(r), r["seed"])])
             for r in rows if r["variant"] == "dense" and (setting(r), r["seed"]) in targets}
    ratios = {}
    for r in rows:
        key = (setting(r), r["seed"])
        base = dense.get(key)
        t = time_to_target(r, targets[key]) if key in targets else None
        if base and t:
            ratios.setdefault((key[0], r["variant"]), []).append(t / base)
    return ratios


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    ratios = ratios_by_setting(load_rows(sys.argv[2:]))
    settings = sorted({s for s, _ in ratios})
    variants = [v for v in ("dense", "ddp", "auto", "arctopk-default")
                if any(v == w for _, w in ratios)]
    print("| setting | " + " | ".join(variants) + " |")
    print("|---|" + "---|" * len(variants))
    for s in settings:
        cells = []
        for v in variants:
            xs = ratios.get((s, v), [])
            cells.append(f"{statistics.median(xs):.2f}x ({len(xs)} seeds: "
                         + ", ".join(f"{x:.2f}" for x in xs) + ")" if xs else "—")
        print(f"| {s} | " + " | ".join(cells) + " |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("auto_compression_plot: no matplotlib, plot skipped", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 4.8))
    width = 0.8 / len(variants)
    labels = {"dense": "dense", "ddp": "PyTorch DDP", "auto": "the default (chooses)",
              "arctopk-default": "ARC-Top-K always (former default)"}
    for i, v in enumerate(variants):
        labelled = False  # the legend names a variant at its first bar
        for j, s in enumerate(settings):
            xs = ratios.get((s, v), [])
            if not xs:
                continue
            x = j + (i - (len(variants) - 1) / 2) * width
            ax.bar(x, statistics.median(xs), width, color=f"C{i}",
                   label=None if labelled else labels.get(v, v))
            labelled = True
            ax.plot([x] * len(xs), xs, "k_", markersize=10)
    ax.set_xticks(range(len(settings)))
    names = {"mlp": "examples/03's MLP", "cnn": "examples/04's CNN", "lm": "the transformer"}
    ax.set_xticklabels([f"{names.get(s.split()[0], s.split()[0])}\n"
                        + s.split()[1].replace("x", " hosts x ", 1) for s in settings])
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_ylabel("time to the target / dense's (median; ticks: seeds)")
    ax.set_title("Trained directly on simulated hosts, 0.22 core each")
    top = max(x for xs in ratios.values() for x in xs)
    ax.set_ylim(0, top * 1.35)  # room for the legend above the bars
    ax.legend(loc="upper center", ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
