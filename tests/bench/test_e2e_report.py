"""bench/e2e/make_report.py's table: rows of several passes and their spread."""
import importlib.util
import pathlib

_path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "e2e" / "make_report.py"
_spec = importlib.util.spec_from_file_location("e2e_make_report", _path)
e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(e2e)


def run(variant, median_s, passno):
    return {"setting": "8 hosts 100mbit, 0.22 core each", "workload": "cpp-mlp",
            "variant": variant, "pass": passno, "program": "arcreduce", "steps": 10,
            "median_s": median_s, "p90_s": median_s * 1.1, "ranks": 8, "hosts": 8}


def test_passes_are_labelled_and_their_spread_computed():
    rows = [run("dense", 1.0, 1), run("arctopk", 0.20, 1), run("dense", 1.2, 2),
            run("arctopk", 0.21, 2), run("dense", 1.1, 3), run("arctopk", 0.19, 3)]
    table = e2e.table(rows, {})
    assert "| dense #2 |" in table and "| arctopk #3 |" in table
    # dense: medians 1.0, 1.1, 1.2 s: median 1100 ms, range 1000-1200, spread 200/1100.
    assert "| dense | 3 | 1100.0 | 1000.0-1200.0 | 18.2% |" in table
    assert "| arctopk | 3 | 200.0 | 190.0-210.0 | 10.0% |" in table


def test_one_pass_keeps_the_plain_table():
    table = e2e.table([run("dense", 1.0, 1), run("paper", 0.3, 1)], {})
    assert "| dense |" in table and "#1" not in table and "spread" not in table
    # The paper preset sorts after the defaults and before All-Gather Top-K.
    assert e2e.variant_key({"variant": "paper"}) < e2e.variant_key({"variant": "topk"})


def test_step_ratios_divide_each_pass_by_denses_median():
    rows = [run("dense", 1.0, 1), run("dense", 1.2, 2), run("dense", 1.1, 3),
            run("arctopk", 0.11, 1), run("arctopk", 0.22, 2), run("arctopk", 0.132, 3)]
    ratios = e2e.step_ratios(rows)["8 hosts 100mbit, 0.22 core each"]
    mid, lo, hi = ratios["arctopk"]
    assert abs(mid - 0.12) < 1e-9 and abs(lo - 0.1) < 1e-9 and abs(hi - 0.2) < 1e-9
    assert "dense" not in ratios
