#!/usr/bin/env python3
"""Table and plot of the time-to-accuracy benchmark (scripts/bench-tta.sh).

  make_report.py OUT_DIR     reads OUT_DIR/results.jsonl, writes OUT_DIR/table.md and
                             OUT_DIR/accuracy.png (test accuracy, or the transformer's
                             validation loss, against training seconds)

Per workload and setting (a table and a plot panel each), variant and seed: whether the variant
reached dense's target, the training wall-clock to the first evaluation at or above it (for the
transformer, `lm`: at or below its validation-loss target; evaluations not counted), that time
as a multiple of dense's own time to the same target, the accuracy (loss) the variant had when
dense had trained as long as it did in all (the last evaluation within that time: at equal
wall-clock), its best accuracy (lowest loss), and the mean bytes rank 0 sent per step.
"""
import json
import os
import statistics
import sys


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def where(r):
    """A row's table and plot: its workload (the MLP of examples/03 unless named) and setting."""
    return f'{r.get("workload", "mlp")}, {r.get("setting")}'


class Metric:
    """What a workload's runs are judged by: test accuracy (higher is better) or, for the
    transformer, validation loss (lower is better)."""

    def __init__(self, workload):
        self.loss = workload == "lm"
        self.key = "val_loss" if self.loss else "test_accuracy"
        self.name = "validation loss" if self.loss else "accuracy"

    def met(self, value, target):
        return value <= target if self.loss else value >= target

    def best(self, values):
        return min(values) if self.loss else max(values)

    def fmt(self, value):
        return f"{value:.3f}" if self.loss else f"{100 * value:.2f}%"

    def plotted(self, value):
        return value if self.loss else 100 * value


def time_to(points, target, metric):
    for p in points:
        if metric.met(p[metric.key], target):
            return p["seconds"], p["step"]
    return None, None


def value_at(points, seconds, metric):
    last = points[0][metric.key]
    for p in points:
        if p["seconds"] <= seconds:
            last = p[metric.key]
    return last


def mean_bytes(points):
    per_step = [p["bytes_per_step"] for p in points if p["step"] > 0]
    return statistics.mean(per_step) if per_step else 0.0


def fmt_s(x):
    return "—" if x is None else f"{x:.1f}"


def table(rows):
    out = []
    settings = []
    for r in rows:
        if where(r) not in settings:
            settings.append(where(r))
    for setting in settings:
        here = [r for r in rows if where(r) == setting]
        metric = Metric(here[0].get("workload"))
        dense = {r["seed"]: r for r in here if r["variant"] == "dense" and not r.get("failed")}
        best_name = "lowest loss" if metric.loss else "best accuracy"
        out.append(f"### {setting}\n")
        out.append("| variant | error feedback (used) | seeds at target | time to target s "
                   f"(per seed) | x dense's time | {metric.name} at dense's wall-clock (per seed) "
                   f"| {best_name} (per seed) | steps to target | KB sent per step |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        variants = []
        for r in here:
            if r["variant"] not in variants:
                variants.append(r["variant"])
        for v in variants:
            runs = sorted((r for r in here if r["variant"] == v), key=lambda r: r.get("seed", 0))
            times, ratios, equal, best, steps, kb, feedback = [], [], [], [], [], [], set()
            reached = 0
            for r in runs:
                if r.get("failed"):
                    times.append(None)
                    continue
                d = dense.get(r["seed"])
                target = d and (r["target"] if v != "dense" else None)
                if v == "dense" and d:
                    # dense's own target: the one the other variants of this seed trained to.
                    others = [o for o in here if o.get("seed") == r["seed"] and
                              o["variant"] != "dense" and not o.get("failed")]
                    target = others[0]["target"] if others else None
                t, s = time_to(r["points"], target, metric) if target else (None, None)
                dt = time_to(d["points"], target, metric)[0] if (d and target) else None
                reached += t is not None
                times.append(t)
                steps.append(s)
                ratios.append(t / dt if (t is not None and dt) else None)
                if d:
                    equal.append(value_at(r["points"], d["points"][-1]["seconds"], metric))
                best.append(metric.best(p[metric.key] for p in r["points"]))
                kb.append(mean_bytes(r["points"]) / 1e3)
                feedback.add(f'{r["error_feedback"]} ({r["error_feedback_used"]})'
                             if r["error_feedback"] != r["error_feedback_used"]
                             else r["error_feedback"])
            ok = [x for x in ratios if x is not None]
            # Dense alone has no target to reach (the others' is derived from its curve).
            untargeted = v == "dense" and not any(
                o["variant"] != "dense" and not o.get("failed") for o in here)
            out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} |".format(
                v, "—" if v in ("dense", "oktopk", "powersgd", "ddp") else
                ", ".join(sorted(feedback)),
                "—" if untargeted else f"{reached}/{len(runs)}",
                " / ".join(fmt_s(t) for t in times),
                f"{statistics.median(ok):.2f}x" if ok else "—",
                " / ".join(metric.fmt(a) for a in equal),
                " / ".join(metric.fmt(a) for a in best),
                " / ".join("—" if s is None else str(s) for s in steps),
                statistics.mean(kb) if kb else 0.0))
        targets = sorted({(r["seed"], r["target"]) for r in here
                          if r["variant"] != "dense" and not r.get("failed")})
        out.append("")
        rule = ("dense's final validation loss plus the margin" if metric.loss else
                "dense's last-epoch mean less the margin")
        out.append(f"Targets ({rule}): " + (", ".join(
            f"seed {s}: {metric.fmt(t)}" for s, t in targets) or
            "none, as no variant besides dense ran") + ".\n")
    return "\n".join(out) + "\n"


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("make_report: no matplotlib, plot skipped", file=sys.stderr)
        return
    settings = []
    for r in rows:
        if where(r) not in settings:
            settings.append(where(r))
    fig, axes = plt.subplots(1, len(settings), figsize=(7 * len(settings), 5), squeeze=False)
    for ax, setting in zip(axes[0], settings):
        here = [r for r in rows if where(r) == setting and not r.get("failed")]
        metric = Metric(here[0].get("workload") if here else None)
        seed = min(r["seed"] for r in here) if here else 0
        for r in here:
            if r["seed"] != seed:
                continue
            xs = [p["seconds"] for p in r["points"]]
            ys = [metric.plotted(p[metric.key]) for p in r["points"]]
            ax.plot(xs, ys, label=r["variant"], linewidth=2 if r["variant"] in
                    ("dense", "arctopk-default") else 1)
        targets = {r["target"] for r in here if r["seed"] == seed and r["variant"] != "dense"}
        for t in targets:
            ax.axhline(metric.plotted(t), color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"{setting}, seed {seed}")
        ax.set_xlabel("training wall-clock (s, evaluations excluded)")
        if metric.loss:
            ax.set_ylabel("validation loss (nats per character)")
            ax.set_ylim(1.5, 3.5)
        else:
            ax.set_ylabel("test accuracy (%)")
            ax.set_ylim(70, 90)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    rows = load(os.path.join(out_dir, "results.jsonl"))
    text = table(rows)
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(text)
    print(text)
    plot(rows, os.path.join(out_dir, "accuracy.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
