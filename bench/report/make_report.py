#!/usr/bin/env python3
"""Tables and plots of the benchmark report from the raw outputs of scripts/bench-report.sh.

Reads, from the results folder:
  local.txt           compressor_bench on one host (4 ranks, shared memory)
  cluster.txt         scripts/bench-cluster.sh at 4 hosts (1 and 10 Gbit/s), DDP lines included
  scaling.txt         scripts/bench-cluster.sh at 2 and 8 hosts, 1 Gbit/s
  accuracy-<ef>-seed<s>.csv  train_fashion_mnist --compare --csv, per error feedback and seed
and writes report.md (every table, each with the file it comes from), step-time.png,
scaling.png and accuracy.png beside them. Missing inputs leave their tables out (with a line
that says so), so a partial run still gives a partial report.
"""
import argparse
import csv
import glob
import os
import re
import statistics
import subprocess
import sys

LABEL_WIDTH = 22  # compressor_bench prints "%-22s" labels
COLUMNS = ["median", "p90", "min", "per_mpi", "per_dense", "sent", "bound_mb", "bound_ms",
           "per_bound", "sketch", "values", "indices", "fallbacks"]


def parse_bench(text):
    """Sections of compressor_bench output: [(title, {label: row}, header_lines)]."""
    sections, title, rows, header, in_table = [], "one host", None, [], False
    for line in text.splitlines():
        m = re.match(r"=== (\d+) hosts at (\S+) ===", line)
        if m:
            title = f"{m.group(1)} hosts, {m.group(2).replace('gbit', ' Gbit/s')}"
            continue
        if line.startswith("compressor_bench "):
            rows, header = {}, [line]
            sections.append((title, rows, header))
            continue
        if rows is None:
            continue
        if line.startswith("variant "):
            in_table = True
            continue
        if in_table and not line.strip():
            in_table = False
            continue
        if in_table:
            label, values = line[:LABEL_WIDTH].strip(), line[LABEL_WIDTH:].split()
            row = {}
            for key, value in zip(COLUMNS, values):
                row[key] = None if value == "-" else float(value)
            rows[label] = row
        elif re.match(r"(ranks|machine|commit|tensor set|mpi) ", line):
            header.append(line)
        m = re.match(r"ddp (\S+) (.*)", line)
        if m:
            fields = dict(kv.split("=") for kv in m.group(2).split())
            # "powersgd-q1" -> "DDP powersgd" (the hook at its default rank 1)
            rows["DDP " + m.group(1).split("-")[0]] = {k: float(v) for k, v in fields.items()}
    return sections


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def step_table(title, rows, source):
    out = [f"### {title}", "", f"From `{source}`.", "",
           "| variant | median ms | p90 ms | / raw MPI | / dense | / DDP dense | / DDP PowerSGD |"
           " MB sent per rank | lower bound ms | / bound |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    ddp = rows.get("DDP dense", {}).get("median_ms")
    ddp_psgd = rows.get("DDP powersgd", {}).get("median_ms")
    for label, r in rows.items():
        if label.startswith("DDP"):
            continue
        m = r["median"]
        out.append(f"| {label} | {fmt(m)} | {fmt(r['p90'])} | {fmt(r['per_mpi'], 3)} | "
                   f"{fmt(r['per_dense'], 3)} | {fmt(m / ddp if ddp else None, 3)} | "
                   f"{fmt(m / ddp_psgd if ddp_psgd else None, 3)} | {fmt(r['sent'], 3)} | "
                   f"{fmt(r['bound_ms'])} | {fmt(r['per_bound'], 2)} |")
    for label in ("DDP dense", "DDP powersgd"):
        if label in rows:
            r = rows[label]
            out.append(f"| PyTorch {label} (gloo) | {fmt(r['median_ms'])} | {fmt(r['p90_ms'])} |"
                       f" | | {fmt(r['median_ms'] / ddp if ddp else None, 3)} | | "
                       f"{fmt(r['payload_mb'], 3)} (payload) | | |")
    return out


def targets(rows):
    """The issue's targets at 1 Gbit/s and 4 hosts, measured against the same run."""
    def med(label):
        return rows.get(label, {}).get("median")

    arc, dense = med("arctopk 0.01 ef21m"), med("dense none")
    ddp = rows.get("DDP dense", {}).get("median_ms")
    ddp_psgd = rows.get("DDP powersgd", {}).get("median_ms")
    checks = []

    def check(name, value, goal, ok):
        checks.append(f"| {name} | {goal} | {value} | {'met' if ok else 'missed'} |")

    if dense and ddp:
        check("dense path / DDP dense", f"{dense / ddp:.3f}", "<= 1.05", dense / ddp <= 1.05)
    if arc and dense:
        check("dense / ARC-Top-K 0.01", f"{dense / arc:.1f}x", ">= 10x", dense / arc >= 10)
    if arc and ddp_psgd:
        check("DDP PowerSGD q=1 / ARC-Top-K 0.01", f"{ddp_psgd / arc:.1f}x", ">= 4x",
              ddp_psgd / arc >= 4)
    topk = med("topk 0.01 ef14")
    if arc and topk:
        check("All-Gather Top-K 0.01 / ARC-Top-K 0.01", f"{topk / arc:.1f}x", ">= 3x",
              topk / arc >= 3)
    for other in ("oktopk 0.01 none", "powersgd q=4 none", "powersgd q=1 none"):
        if arc and med(other):
            check(f"{other} / ARC-Top-K 0.01 (bytes {fmt(rows[other]['sent'], 2)} vs "
                  f"{fmt(rows['arctopk 0.01 ef21m']['sent'], 2)} MB)", f"{med(other) / arc:.2f}x",
                  "> 1", med(other) / arc > 1)
    if arc:
        b = rows["arctopk 0.01 ef21m"]["per_bound"]
        check("ARC-Top-K 0.01 / its lower bound", f"{b:.2f}", "<= 2", b <= 2)
    default = med("arctopk 0.01 none")
    if default and dense:
        check("dense / ARC-Top-K 0.01 without error feedback (the default)",
              f"{dense / default:.1f}x", ">= 10x", dense / default >= 10)
    return ["| target | goal | measured | |", "|---|---|---|---|"] + checks


def gnuplot(script):
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        return True
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"make_report: gnuplot failed: {e}", file=sys.stderr)
        return False


def step_time_plot(results, sections, path):
    labels = ["raw MPI_Allreduce", "dense none", "fp16 none", "topk 0.01 ef14", "randk 0.01 ef14",
              "arctopk 0.01 ef21m", "arctopk 0.01 none", "oktopk 0.01 none", "powersgd q=1 none",
              "DDP dense", "DDP powersgd"]
    data = os.path.join(results, "step-time.dat")
    titles = [t for t, _, _ in sections]
    with open(data, "w", encoding="utf-8") as f:
        f.write("variant " + " ".join(f'"{t}"' for t in titles) + "\n")
        for label in labels:
            values = []
            for _, rows, _ in sections:
                r = rows.get(label, {})
                v = r.get("median", r.get("median_ms"))
                values.append("NaN" if v is None else f"{v / 1000:.4f}")
            name = label.replace("arctopk 0.01 none", "arctopk 0.01 no EF").replace(
                " none", "").replace(" ef14", "")
            f.write(f'"{name}" ' + " ".join(values) + "\n")
    cols = " , ".join(f"'{data}' using {i + 2}:xtic(1) title columnheader"
                      for i in range(len(titles)))
    return gnuplot(f"""set terminal pngcairo size 1100,500 noenhanced
set output '{path}'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel 'step time (s), log scale'
set xtics rotate by -30
set key top left
set title 'tiny-transformer-24M gradient reduction, 4 ranks (one per host on the cluster)'
plot {cols}
""")


def scaling_plot(results, points, path):
    data = os.path.join(results, "scaling.dat")
    with open(data, "w", encoding="utf-8") as f:
        f.write("hosts arctopk_ms topk_ms dense_ms arctopk_mb topk_mb\n")
        for hosts in sorted(points):
            p = points[hosts]
            f.write(f"{hosts} " + " ".join(fmt(p.get(k), 3).replace("-", "NaN") for k in
                                           ("arctopk_ms", "topk_ms", "dense_ms", "arctopk_mb",
                                            "topk_mb")) + "\n")
    return gnuplot(f"""set terminal pngcairo size 1000,420 noenhanced
set output '{path}'
set multiplot layout 1,2
set xlabel 'hosts (1 Gbit/s each)'
set xtics (2, 4, 8)
set key top left
set ylabel 'step time (ms)'
plot '{data}' using 1:2 with linespoints title 'ARC-Top-K 0.01', '' using 1:3 with linespoints \
title 'All-Gather Top-K 0.01', '' using 1:4 with linespoints title 'dense'
set ylabel 'MB sent per rank per step'
plot '{data}' using 1:5 with linespoints title 'ARC-Top-K 0.01', '' using 1:6 with linespoints \
title 'All-Gather Top-K 0.01'
unset multiplot
""")


def accuracy(results, path):
    runs = {}  # (compressor + error feedback, seed) -> [(epoch, acc, loss, step_s, bytes)]
    for file in sorted(glob.glob(os.path.join(results, "accuracy-*-seed*.csv"))):
        ef = re.match(r"accuracy-(\w+)-seed", os.path.basename(file)).group(1)
        with open(file, encoding="utf-8") as f:
            for row in csv.DictReader(f):
                c = row["compressor"]
                if c in ("topk", "randk", "arctopk"):
                    c += " " + ef
                runs.setdefault((c, row["seed"]), []).append(
                    (int(row["epoch"]), float(row["test_accuracy"]), float(row["train_loss"]),
                     float(row["step_time_s"]), float(row["bytes_per_step"])))
    if not runs:
        return ["No accuracy results (accuracy-<ef>-seed<s>.csv) found."]
    compressors = list(dict.fromkeys(c for c, _ in runs))
    seeds = sorted({s for _, s in runs}, key=int)
    ratio = None
    final = {}
    for (c, s), rows in runs.items():
        final[(c, s)] = max(rows)  # last epoch
    dense = [final[("dense", s)][1] for s in seeds if ("dense", s) in final]
    dense_mean = statistics.mean(dense) if dense else None
    out = ["| compressor | " + " | ".join(f"seed {s}" for s in seeds) +
           " | mean | vs dense (points) | sent per step | step ms |",
           "|---|" + "---|" * (len(seeds) + 4)]
    for c in compressors:
        accs = [final[(c, s)][1] * (100 if final[(c, s)][1] <= 1 else 1) for s in seeds
                if (c, s) in final]
        mean = statistics.mean(accs)
        d = None if dense_mean is None else mean - dense_mean * (100 if dense_mean <= 1 else 1)
        sent = statistics.mean(final[(c, s)][4] for s in seeds if (c, s) in final)
        step = statistics.mean(final[(c, s)][3] for s in seeds if (c, s) in final)
        out.append(f"| {c} | " + " | ".join(f"{a:.2f}%" for a in accs) +
                   f" | {mean:.2f}% | {fmt(d, 2)} | {sent / 1e3:.1f} KB | {step * 1e3:.1f} |")
    # Curves: mean over seeds per epoch.
    data = os.path.join(os.path.dirname(path), "accuracy.dat")
    epochs = sorted({e for rows in runs.values() for e, *_ in rows})
    with open(data, "w", encoding="utf-8") as f:
        for c in compressors:
            f.write(f'"{c}"\n')
            for e in epochs:
                vals = [r for s in seeds for r in runs.get((c, s), []) if r[0] == e]
                if vals:
                    acc = statistics.mean(v[1] for v in vals)
                    acc = acc * 100 if acc <= 1 else acc
                    f.write(f"{e} {acc:.3f} {statistics.mean(v[2] for v in vals):.5f}\n")
            f.write("\n\n")
    n = len(compressors)
    gnuplot(f"""set terminal pngcairo size 1000,420 noenhanced
set output '{path}'
set multiplot layout 1,2 title 'Fashion-MNIST MLP, 4 ranks, mean over seeds {", ".join(seeds)}'
set xlabel 'epoch'
set key bottom right
set xtics 1
set ylabel 'test accuracy (%)'
plot for [i=0:{n - 1}] '{data}' index i using 1:2 with linespoints title columnheader(1)
set key top right
set ylabel 'training loss'
plot for [i=0:{n - 1}] '{data}' index i using 1:3 with linespoints title columnheader(1)
unset multiplot
""")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", help="folder with the raw outputs; report.md is written there")
    args = parser.parse_args()
    r = args.results
    out = ["# Benchmark report (generated)", "",
           "Written by `bench/report/make_report.py` from the raw outputs in this folder "
           "(`bash scripts/bench-report.sh` regenerates everything). Reading and context: "
           "[../benchmarks.md](../benchmarks.md).", ""]
    all_sections = []
    for name in ("local.txt", "cluster.txt"):
        text = read(os.path.join(r, name))
        if text is None:
            out += [f"`{name}` is missing: its tables are left out.", ""]
            continue
        for title, rows, header in parse_bench(text):
            all_sections.append((title, rows, header))
            out += step_table(title, rows, name) + [""] + [f"    {h}" for h in header] + [""]
            if title == "4 hosts, 1 Gbit/s":
                out += ["#### Targets (4 hosts, 1 Gbit/s)", ""] + targets(rows) + [""]
    if all_sections and step_time_plot(r, all_sections, os.path.join(r, "step-time.png")):
        out += ["![step time per variant and link](step-time.png)", ""]

    points = {}
    for name in ("scaling.txt", "cluster.txt"):
        text = read(os.path.join(r, name))
        for title, rows, _ in parse_bench(text or ""):
            m = re.match(r"(\d+) hosts, 1 Gbit/s", title)
            if not m:
                continue
            p = points.setdefault(int(m.group(1)), {})
            for key, label in (("arctopk", "arctopk 0.01 ef21m"), ("topk", "topk 0.01 ef14"),
                               ("dense", "dense none")):
                if label in rows:
                    p[key + "_ms"] = rows[label]["median"]
                    p[key + "_mb"] = rows[label]["sent"]
    if points:
        out += ["### Scaling at 1 Gbit/s", "", "From `scaling.txt` (2 and 8 hosts) and "
                "`cluster.txt` (4 hosts).", "",
                "| hosts | ARC-Top-K 0.01 ms | MB per rank | All-Gather Top-K 0.01 ms | MB per rank |"
                " dense ms |", "|---|---|---|---|---|---|"]
        for hosts in sorted(points):
            p = points[hosts]
            out.append(f"| {hosts} | {fmt(p.get('arctopk_ms'))} | {fmt(p.get('arctopk_mb'), 3)} |"
                       f" {fmt(p.get('topk_ms'))} | {fmt(p.get('topk_mb'), 3)} |"
                       f" {fmt(p.get('dense_ms'))} |")
        out.append("")
        if scaling_plot(r, points, os.path.join(r, "scaling.png")):
            out += ["![scaling](scaling.png)", ""]

    out += ["### Accuracy (Fashion-MNIST MLP)", "", "From `accuracy-<ef>-seed<s>.csv` (ratio 0.01 for the sparsifiers, PowerSGD at its rank).", ""]
    out += accuracy(r, os.path.join(r, "accuracy.png"))
    if os.path.exists(os.path.join(r, "accuracy.png")):
        out += ["", "![accuracy per epoch](accuracy.png)"]
    with open(os.path.join(r, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print(f"make_report: wrote {os.path.join(r, 'report.md')}")


if __name__ == "__main__":
    main()
