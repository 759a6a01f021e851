"""Runs train.py once per variant (floor, dense, arctopk, ddp, ddp-powersgd) with the same seed
and epochs through arcrun, and prints a table of test accuracy and step time, each step time also
over dense's and over the floor's (the same training with no exchange: its accuracy is rank 0's
own model's, not a trained-together one's).

  python3 compare.py --ranks 4 --epochs 1 [-- extra train.py flags]

arcrun and the arcreduce Python package are taken from --build-dir (default: build/ of this
repository) when they are there, else from PATH / the installed package. The Python that runs
train.py is --python (default /usr/bin/python3, Debian's, which has torch).
"""
import argparse
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VARIANTS = ["floor", "dense", "arctopk", "ddp", "ddp-powersgd"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--csv-dir", default=None, help="keep each variant's CSV here")
    p.add_argument("--arcrun-args", default="",
                   help="more arcrun flags, e.g. a hostfile and '--mpi-args \"-x PYTHONPATH\"' "
                        "for hosts that do not inherit this environment")
    p.add_argument("train_args", nargs="*", help="more train.py flags (after --)")
    args = p.parse_args()

    arcrun = os.path.join(args.build_dir, "launcher", "arcrun")
    if not os.access(arcrun, os.X_OK):
        arcrun = shutil.which("arcrun")
    if arcrun is None:
        sys.exit("compare.py: no arcrun in --build-dir or on PATH; build arcreduce first")
    env = dict(os.environ)
    package = os.path.join(args.build_dir, "python")
    if os.path.isdir(package):
        env["PYTHONPATH"] = package + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")

    results = []
    for variant in args.variants.split(","):
        env["MASTER_PORT"] = str(free_port())  # the DDP variants' rendezvous
        command = [arcrun, "-np", str(args.ranks)] + shlex.split(args.arcrun_args) + [
                   "--", args.python,
                   os.path.join(HERE, "train.py"), "--variant", variant, "--epochs",
                   str(args.epochs), "--seed", str(args.seed)] + args.train_args
        if args.csv_dir:
            os.makedirs(args.csv_dir, exist_ok=True)
            command += ["--csv", os.path.join(args.csv_dir, f"{variant}.csv")]
        print("compare: " + " ".join(command), flush=True)
        output = []
        with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as run:
            for line in run.stdout:  # progress lines as they come
                sys.stdout.write(line)
                sys.stdout.flush()
                output.append(line)
        match = re.search(r"^summary: .*test_accuracy=(\S+) step_time_ms=(\S+) "
                          r"bytes_sent_per_step=(\S+)", "".join(output), re.M)
        if run.returncode != 0 or not match:
            results.append((variant, None, None, None))
            print(f"compare: {variant} failed (exit {run.returncode})", flush=True)
            continue
        results.append((variant, float(match[1]), float(match[2]), match[3]))

    def ratio_to(name, ms):
        base = next((r[2] for r in results if r[0] == name and r[2]), None)
        return f"{ms / base:.2f}x" if base else "n/a"

    print(f"\n{args.ranks} ranks, {args.epochs} epoch(s), seed {args.seed}")
    print("| variant | test accuracy | step time (ms) | vs dense | vs floor "
          "| bytes sent per step (rank 0) |")
    print("|---|---|---|---|---|---|")
    for variant, accuracy, ms, sent in results:
        if accuracy is None:
            print(f"| {variant} | failed | | | | |")
            continue
        print(f"| {variant} | {100 * accuracy:.2f}% | {ms:.1f} | {ratio_to('dense', ms)} "
              f"| {ratio_to('floor', ms)} | {sent} |")
    return 0 if all(r[1] is not None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
