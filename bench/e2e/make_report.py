#!/usr/bin/env python3
"""The end-to-end step benchmark's bookkeeping and report (scripts/bench-e2e.sh).

  make_report.py meta OUT_DIR --commit C --steps N ...   writes OUT_DIR/meta.json: date, commit,
                                                          machine, MPI, torch, BLAS, run settings
  make_report.py collect KEY=VALUE... < OUTPUT            prints the {"bench": "e2e"} lines of a
                                                          run's output with those fields added
                                                          (or one "failed" line if there is none)
  make_report.py report OUT_DIR [--plot PNG]              OUT_DIR/results.jsonl -> table.md and
                                                          step-time.png (matplotlib)
  make_report.py ratios PNG OUT_DIR... [--workload W]     each compressed variant's step as a
                                                          multiple of dense's in the same
                                                          setting: median over passes, bar from
                                                          the fastest to the slowest pass

Median and p90 are recomputed from each run's per-step times (the median of an even count is the
mean of the middle two, p90 the nearest rank round(0.9 (n - 1))). "vs DDP" divides by the DDP
dense row of the same setting and workload; "vs floor" by the floor of the same program (the C++
example's for its rows, the PyTorch program's for PyTorch rows).
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys

# Variants in table order, and which floor each one is compared with.
ORDER = ["floor", "dense", "arctopk", "paper", "topk", "torch-floor", "ddp", "ddp-powersgd"]
WORKLOADS = {"cpp-mlp": "C++ example MLP (examples/03)", "torch-mlp": "PyTorch MLP 4.2M"}


def median_p90(values):
    ordered = sorted(values)
    return statistics.median(ordered), ordered[int(round(0.9 * (len(ordered) - 1)))]


def first_line(command):
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), model)
        with open("/proc/meminfo", encoding="utf-8") as f:
            kib = int(re.search(r"MemTotal:\s+(\d+)", f.read())[1])
    except (OSError, TypeError):
        kib = 0
    return {"nproc": os.cpu_count(), "cpu": model, "memory_gib": round(kib / 2**20, 1),
            "kernel": platform.release()}


def cmd_meta(args):
    # Debian's torch calls whichever libblas.so.3 the alternatives system points at.
    blas = next((os.path.realpath(p) for p in ("/usr/lib/x86_64-linux-gnu/libblas.so.3",
                                               "/usr/lib/aarch64-linux-gnu/libblas.so.3")
                 if os.path.exists(p)), "unknown/unknown")
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": args.commit, **machine(), "mpi": first_line(["mpirun", "--version"]),
            "torch": first_line([args.python, "-c", "import torch; print(torch.__version__)"]),
            "blas": os.path.basename(os.path.dirname(blas)) + "/" + os.path.basename(blas),
            "steps": args.steps, "warmup": args.warmup, "arc_warmup": args.arc_warmup,
            "budget_s": args.budget,
            "local_ranks": args.local_ranks}
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def cmd_collect(args):
    tags = dict(item.split("=", 1) for item in args.tags)
    for key in ("hosts", "ranks", "exit"):
        if key in tags:
            tags[key] = int(tags[key])
    found = False
    for line in sys.stdin:
        if line.startswith('{"bench": "e2e"'):
            result = json.loads(line)
            result.update(tags)  # the harness's names win (torch-floor, the setting)
            print(json.dumps(result))
            found = True
    if not found:
        print(json.dumps({"bench": "e2e", **tags, "failed": True}))


def fmt(value, scale=1.0, digits=1, unit=""):
    if value is None:
        return "n/a"
    return f"{value * scale:.{digits}f}{unit}"


def fmt_bytes(row):
    b = row.get("bytes_sent_per_step")
    if b is None:
        return "n/a"
    text = f"{b / 1e6:.3f} MB" if b >= 1e4 else f"{b:.0f} B"
    return text + (" (est.)" if row.get("bytes_source", "").startswith("estimate") else "")


def load(out_dir):
    rows = []
    with open(os.path.join(out_dir, "results.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if not row.get("failed") and row.get("step_s"):
                    row["median_s"], row["p90_s"] = median_p90(row["step_s"])
                rows.append(row)
    meta_path = os.path.join(out_dir, "meta.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
    return rows, meta


def settings_of(rows):
    seen = []
    for row in rows:
        key = (row.get("setting"), row.get("workload"))
        if key not in seen:
            seen.append(key)
    return seen


def variant_key(row):
    v = row.get("variant", "")
    return (ORDER.index(v) if v in ORDER else len(ORDER), int(row.get("pass") or 1))


def label(row, passes):
    """The variant, and which pass where a setting ran its variants more than once."""
    return f"{row.get('variant')} #{row.get('pass')}" if passes > 1 else str(row.get("variant"))


def spread_lines(group):
    """Per variant run in several passes: the passes' medians and their spread, (max - min) /
    median of the medians (the noise a gap must exceed to be a finding)."""
    lines = []
    for variant in sorted({r.get("variant") for r in group},
                          key=lambda v: ORDER.index(v) if v in ORDER else len(ORDER)):
        medians = [r["median_s"] for r in group
                   if r.get("variant") == variant and "median_s" in r]
        if len(medians) < 2:
            continue
        mid = statistics.median(medians)
        lines.append(f"| {variant} | {len(medians)} | {fmt(mid, 1e3)} | "
                     f"{fmt(min(medians), 1e3)}-{fmt(max(medians), 1e3)} | "
                     f"{100 * (max(medians) - min(medians)) / mid:.1f}% |")
    if not lines:
        return []
    return (["", "| variant | passes | median of medians, ms | range, ms | spread |",
             "|---|---|---|---|---|"] + lines)


def table(rows, meta):
    lines = ["# End-to-end training step", ""]
    if meta:
        lines += [f"- date {meta.get('date')}, commit {meta.get('commit')}",
                  f"- machine: {meta.get('nproc')} CPUs ({meta.get('cpu')}), "
                  f"{meta.get('memory_gib')} GiB, Linux {meta.get('kernel')}; {meta.get('mpi')}; "
                  f"torch {meta.get('torch')} (BLAS {meta.get('blas')})",
                  f"- steps: {meta.get('warmup')} warm-up ({arc_warmup(meta)}), then at most "
                  f"{meta.get('steps')} timed "
                  f"(fewer, but at least 10, where the warm-up says they would take over "
                  f"{meta.get('budget_s')} s; per row below); local setting: "
                  f"{meta.get('local_ranks')} ranks on this machine", ""]
    lines += ["Step time per step is the longest rank's; median and p90 over the timed steps. "
              "Bytes, coordinator CPU and collectives per step are rank 0's (arcreduce stats; "
              "DDP bytes are a ring all-reduce estimate, marked est.). Wait: the median over "
              "the timed steps of the longest rank's time in the gradient wait after backward "
              "(communication and compression not hidden; the C++ example only).", ""]
    for setting, workload in settings_of(rows):
        group = sorted((r for r in rows if r.get("setting") == setting
                        and r.get("workload") == workload), key=variant_key)
        head = group[0]
        lines += [f"## {WORKLOADS.get(workload, workload)}: {setting}", "",
                  f"{head.get('ranks', '?')} ranks, {head.get('hosts', '?')} host(s), link "
                  f"{head.get('link', '?')}; model {head.get('model', '?')}, "
                  f"{head.get('parameters', '?')} parameters, batch "
                  f"{head.get('batch_per_rank', '?')} per rank", "",
                  "| variant | program | steps | median ms | p90 ms | vs DDP dense | vs floor | "
                  "wait ms | bytes/step | coord. CPU ms/step | collectives/step | held steps |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        passes = max(int(r.get("pass") or 1) for r in group)
        ddp = next((r for r in group if r.get("variant") == "ddp" and "median_s" in r), None)
        floors = {r.get("program"): r for r in group
                  if r.get("variant") in ("floor", "torch-floor") and "median_s" in r}
        for r in group:
            if r.get("failed") or "median_s" not in r:
                lines.append(f"| {label(r, passes)} | {r.get('program', '')} | failed "
                             f"(exit {r.get('exit', '?')}) | | | | | | | | | |")
                continue
            floor = floors.get(r.get("program"))
            vs_ddp = f"{r['median_s'] / ddp['median_s']:.2f}x" if ddp else "n/a"
            vs_floor = f"{r['median_s'] / floor['median_s']:.2f}x" if floor else "n/a"
            lines.append(
                f"| {label(r, passes)} | {r.get('program')} | {r.get('steps')} | "
                f"{fmt(r['median_s'], 1e3)} | {fmt(r['p90_s'], 1e3)} | {vs_ddp} | {vs_floor} | "
                f"{fmt(r.get('median_wait_s'), 1e3)} | {fmt_bytes(r)} | "
                f"{fmt(r.get('coordinator_cpu_s_per_step'), 1e3, 2)} | "
                f"{fmt(r.get('collectives_per_step'))} | {held(r)} |")
        lines += spread_lines(group)
        lines.append("")
    return "\n".join(lines)


def arc_warmup(meta):
    """The arctopk rows' warm-up, where the meta records one (runs before it record none)."""
    if meta.get("arc_warmup") is None:
        return "the same for every row"
    return f"ARC-Top-K rows: {meta['arc_warmup']}, past the runtime's batching trial"


def held(r):
    """Timed steps whose compressed tensors rank 0 held to one cycle, of the row's steps."""
    if r.get("held_steps") is None:
        return "n/a"
    return f"{r['held_steps']}/{r.get('steps', '?')}"


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is missing (apt-get install python3-matplotlib)"
    workloads = [w for w in WORKLOADS if any(r.get("workload") == w for r in rows)]
    workloads += sorted({r.get("workload") for r in rows} - set(workloads) - {None})
    if not workloads:
        return "no results"
    fig, axes = plt.subplots(len(workloads), 1, figsize=(10, 3.6 * len(workloads)), squeeze=False)
    for ax, workload in zip(axes[:, 0], workloads):
        ok = [r for r in rows if r.get("workload") == workload and "median_s" in r]
        settings = [s for s, w in settings_of(rows) if w == workload]
        variants = sorted({r["variant"] for r in ok},
                          key=lambda v: ORDER.index(v) if v in ORDER else len(ORDER))
        width = 0.8 / max(1, len(variants))
        for i, variant in enumerate(variants):
            xs, med, err = [], [], []
            for j, setting in enumerate(settings):
                r = next((r for r in ok if r["variant"] == variant and r["setting"] == setting),
                         None)
                if r:
                    xs.append(j + (i - (len(variants) - 1) / 2) * width)
                    med.append(r["median_s"] * 1e3)
                    err.append((r["p90_s"] - r["median_s"]) * 1e3)
            ax.bar(xs, med, width, yerr=[[0] * len(err), err], capsize=2, label=variant)
        ax.set_xticks(range(len(settings)))
        ax.set_xticklabels(settings)
        ax.set_ylabel("step time, ms (median, bar to p90)")
        ax.set_title(WORKLOADS.get(workload, workload))
        ax.set_yscale("log")
        ax.legend(fontsize="small", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return ""


def step_ratios(rows, workload="cpp-mlp"):
    """{setting: {variant: (median, min, max)}} of each variant's pass medians divided by the
    median over passes of dense's in the same setting (settings in first-seen order)."""
    out = {}
    for setting, w in settings_of(rows):
        if w != workload:
            continue
        group = [r for r in rows if r.get("setting") == setting and r.get("workload") == w
                 and "median_s" in r]
        dense = [r["median_s"] for r in group if r.get("variant") == "dense"]
        if not dense:
            continue
        base = statistics.median(dense)
        per = {}
        for variant in sorted({r["variant"] for r in group} - {"dense", "floor"},
                              key=lambda v: ORDER.index(v) if v in ORDER else len(ORDER)):
            ratios = [r["median_s"] / base for r in group if r["variant"] == variant]
            per[variant] = (statistics.median(ratios), min(ratios), max(ratios))
        out[setting] = per
    return out


LABELS = {"arctopk": "ARC-Top-K, defaults", "paper": "ARC-Top-K, the paper's settings",
          "topk": "All-Gather Top-K 1%", "ddp": "PyTorch DDP", "ddp-powersgd": "DDP + PowerSGD hook"}
Y_TOP = 1.15  # bars above are clipped and labelled with their value


def cmd_ratios(args):
    rows = []
    for out_dir in args.out_dirs:
        rows += load(out_dir)[0]
    ratios = step_ratios(rows, args.workload)
    for setting, per in ratios.items():
        for variant, (mid, lo, hi) in per.items():
            print(f"{setting}: {variant} {mid:.3f}x ({lo:.3f}-{hi:.3f})")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    settings = list(ratios)
    variants = [v for v in ORDER if any(v in per for per in ratios.values())]
    fig, ax = plt.subplots(figsize=(max(8, 1.8 * len(settings)), 3.8))
    width = 0.8 / max(1, len(variants))
    for i, variant in enumerate(variants):
        xs, mids, lows, highs = [], [], [], []
        for j, setting in enumerate(settings):
            if variant in ratios[setting]:
                mid, lo, hi = ratios[setting][variant]
                xs.append(j + (i - (len(variants) - 1) / 2) * width)
                mids.append(mid)
                lows.append(mid - lo)
                highs.append(hi - mid)
        ax.bar(xs, mids, width, yerr=[lows, highs], capsize=3,
               label=LABELS.get(variant, variant))
        for x, mid in zip(xs, mids):
            if mid > Y_TOP:
                ax.text(x, Y_TOP - 0.02, f"{mid:.1f}x", ha="center", va="top", rotation=90,
                        fontsize="x-small", color="white")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylim(0, Y_TOP)
    ax.text(-0.45, 1.02, "dense", ha="left", va="bottom", fontsize="small")
    ax.set_xticks(range(len(settings)))
    ax.set_xticklabels([s.replace(", ", "\n") for s in settings], fontsize="small")
    ax.set_ylabel("training step / dense's")
    ax.set_title("examples/03's MLP: step time against dense (median of passes, bar: range)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(args.png, dpi=100)
    print(f"plot: {args.png}")


def cmd_report(args):
    rows, meta = load(args.out_dir)
    text = table(rows, meta)
    with open(os.path.join(args.out_dir, "table.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    print(text)
    png = args.plot or os.path.join(args.out_dir, "step-time.png")
    error = plot(rows, png)
    print(f"plot: {png}" if not error else f"plot: not written: {error}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("meta")
    m.add_argument("out_dir")
    m.add_argument("--commit", default="unknown")
    m.add_argument("--steps", type=int)
    m.add_argument("--warmup", type=int)
    m.add_argument("--arc-warmup", type=int, help="warm-up steps of the arctopk rows")
    m.add_argument("--budget", type=float)
    m.add_argument("--local-ranks", type=int)
    m.add_argument("--python", default=sys.executable)
    c = sub.add_parser("collect")
    c.add_argument("tags", nargs="*", help="KEY=VALUE added to every line")
    r = sub.add_parser("report")
    r.add_argument("out_dir")
    r.add_argument("--plot", help="PNG path (default OUT_DIR/step-time.png)")
    q = sub.add_parser("ratios")
    q.add_argument("png")
    q.add_argument("out_dirs", nargs="+")
    q.add_argument("--workload", default="cpp-mlp")
    args = p.parse_args()
    {"meta": cmd_meta, "collect": cmd_collect, "report": cmd_report,
     "ratios": cmd_ratios}[args.command](args)


if __name__ == "__main__":
    main()
