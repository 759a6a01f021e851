#!/usr/bin/env python3
"""A test of check_docs.py's figure check: a page whose figures are its logs' passes, and pages
broken on purpose (a figure drifted from its log, an unlinked ratio beside a linked log, a figure
found only outside the log section the link names, a table row the log does not hold) fail, each
with the figure named.

  check_docs_selftest.py
Exits 1 if the check passes a broken page or fails the good one."""
import importlib.util
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("check_docs", HERE / "check_docs.py")
check_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_docs)

LOG = """\
# Link rates

## Dated run

| link | ARC-Top-K step | time to accuracy / DDP's |
|---|---|---|
| 100 Mbit/s | 126 ms (4%) | 0.26x (0.20-0.30) |
| 1 Gbit/s | 105 ms (4%) | 1.63x (1.24-1.88) |

Steps to the target: 475, 575, 11,184 KB per step; 8 hosts, five seeds, 86.8% accuracy.

## Another run

ARC-Top-K against All-Gather Top-K: 0.68x.
"""

GOOD = """\
# Guide

## When it helps

On 8 hosts at 100 Mbit/s ARC-Top-K takes 0.26x DDP's time (0.20-0.30, five seeds) and 1.63x at
1 Gbit/s ([log](results/link-rates.md)). It sends 11184 KB; see
[results/link-rates.md](results/link-rates.md) and `ARCREDUCE_COMPRESS_RATIO=0.05`.

| link | step | / DDP's |
|---|---|---|
| 100 Mbit/s | 126 ms | 0.260x |

## The section of one run

Against All-Gather Top-K: 86.8% accuracy
([log](results/link-rates.md#dated-run)).

## No log here

A design note may say 0.59x and rank 4 without a log under its heading.
"""

BROKEN = {
    "a figure drifted from its log": ("0.26x DDP's time", "0.25x DDP's time", "'0.25'"),
    "a measured figure in a sentence without a link": (
        "It sends 11184 KB;", "It sends 11184 KB. The CNN takes 0.59x;", "'0.59'"),
    "a figure outside the linked section of the log": (
        "86.8% accuracy", "0.68x, 86.8% accuracy", "'0.68'"),
    "a table row the log does not hold": ("| 126 ms |", "| 176 ms |", "'176'"),
    "a range's end drifted": ("(0.20-0.30,", "(0.20-0.28,", "'0.28'"),
}


def problems_of(page):
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "docs" / "results").mkdir(parents=True)
        (root / "docs" / "results" / "link-rates.md").write_text(LOG, encoding="utf-8")
        (root / "docs" / "guide.md").write_text(page, encoding="utf-8")
        check_docs.log_figures.__defaults__[0].clear()  # a fresh log per page
        return check_docs.check_figures(root, root / "docs" / "guide.md")


def main():
    failures = []
    found = problems_of(GOOD)
    if found:
        failures.append(f"the good page fails: {found}")
    for what, (old, new, figure) in BROKEN.items():
        assert old in GOOD, old
        found = problems_of(GOOD.replace(old, new, 1))
        if not any(figure in p for p in found):
            failures.append(f"{what}: not caught ({found})")
        else:
            print(f"caught, {what}: {found[0]}")
    for f in failures:
        print(f"FAIL {f}")
    print("check_docs_selftest: " + ("ok" if not failures else f"{len(failures)} failure(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
