#!/usr/bin/env python3
"""Time to the target as a multiple of dense's, per setting and variant, from bench-tta runs.

  auto_compression_plot.py OUT.png RESULTS.jsonl[=VARIANT,...]...

A file given as PATH=VARIANT,... contributes only those variants' rows (so that a run of an
earlier version of a variant can lend its other rows without its own).

Per setting, seed and variant: the time to the target (the first evaluation at or above it)
over dense's time in the same seed and setting; the bars show the median over seeds, the ticks
each seed. Prints the same figures as a table. Variants without dense's seed are left out."""
import json
import statistics
import sys


def time_to_target(row, target):
    for p in row.get("points", []):
        if p["step"] > 0 and p.get("test_accuracy", 0) >= (target if target <= 1 else target / 100):
            return p["seconds"]
    return None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, paths = sys.argv[1], sys.argv[2:]
    rows = []
    for arg in paths:
        path, _, keep = arg.partition("=")
        wanted = set(keep.split(",")) if keep else None
        rows += [r for r in (json.loads(line) for line in open(path) if line.strip())
                 if wanted is None or r["variant"] in wanted]
    rows = [r for r in rows if not r.get("failed")]
    # Dense trains first with no target; the others carry the seed's target (bench-tta.sh).
    targets = {(r["setting"], r["seed"]): r["target"] for r in rows if r["variant"] != "dense"}
    dense = {(r["setting"], r["seed"]): time_to_target(r, targets[(r["setting"], r["seed"])])
             for r in rows if r["variant"] == "dense" and (r["setting"], r["seed"]) in targets}
    ratios = {}  # (setting, variant) -> [ratio per seed]
    for r in rows:
        key = (r["setting"], r["seed"])
        base = dense.get(key)
        t = time_to_target(r, targets[key]) if key in targets else None
        if base and t:
            ratios.setdefault((r["setting"], r["variant"]), []).append(t / base)
    settings = sorted({s for s, _ in ratios})
    variants = [v for v in ("dense", "auto", "arctopk-default") if any(v == w for _, w in ratios)]
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
    fig, ax = plt.subplots(figsize=(7, 4.5))
    width = 0.8 / len(variants)
    labels = {"dense": "dense", "auto": "the default (chooses)",
              "arctopk-default": "ARC-Top-K always (former default)"}
    for i, v in enumerate(variants):
        for j, s in enumerate(settings):
            xs = ratios.get((s, v), [])
            if not xs:
                continue
            x = j + (i - (len(variants) - 1) / 2) * width
            ax.bar(x, statistics.median(xs), width, color=f"C{i}",
                   label=labels.get(v, v) if j == 0 else None)
            ax.plot([x] * len(xs), xs, "k_", markersize=10)
    ax.set_xticks(range(len(settings)))
    ax.set_xticklabels([s.replace("x", " hosts x ") for s in settings])
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_ylabel("time to the target / dense's (median; ticks: seeds)")
    ax.set_title("examples/03's MLP, 8 simulated hosts, 0.22 core each")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
