"""bench/tta/auto_compression_plot.py's ratios against hand-computed expectations."""
import json

import auto_compression_plot as plot


def run(workload, setting, variant, seed, seconds_at_target, target=None):
    # Evaluations every 25 steps; the run reaches 0.8 at its third evaluation.
    points = [{"step": 0, "seconds": 0.0, "test_accuracy": 0.1},
              {"step": 25, "seconds": seconds_at_target / 3, "test_accuracy": 0.5},
              {"step": 50, "seconds": seconds_at_target * 2 / 3, "test_accuracy": 0.7},
              {"step": 75, "seconds": seconds_at_target, "test_accuracy": 0.8}]
    r = {"workload": workload, "setting": setting, "variant": variant, "seed": seed,
         "points": points}
    if variant != "dense":
        r["target"] = 0.8 if target is None else target
    return r


def test_ratio_per_seed_against_dense_of_the_same_seed():
    rows = [run("mlp", "8x1gbit", "dense", 11, 60.0), run("mlp", "8x1gbit", "auto", 11, 30.0),
            run("mlp", "8x1gbit", "dense", 12, 40.0), run("mlp", "8x1gbit", "auto", 12, 50.0)]
    ratios = plot.ratios_by_setting(rows)
    assert ratios[("mlp 8x1gbit", "auto")] == [0.5, 1.25]
    assert ratios[("mlp 8x1gbit", "dense")] == [1.0, 1.0]


def test_workloads_of_one_setting_are_not_mixed():
    # The CNN's dense run must not be the MLP's baseline, though setting and seed are the same.
    rows = [run("mlp", "8x100mbit", "dense", 11, 100.0), run("mlp", "8x100mbit", "auto", 11, 25.0),
            run("cnn", "8x100mbit", "dense", 11, 60.0), run("cnn", "8x100mbit", "auto", 11, 90.0)]
    ratios = plot.ratios_by_setting(rows)
    assert ratios[("mlp 8x100mbit", "auto")] == [0.25]
    assert ratios[("cnn 8x100mbit", "auto")] == [1.5]


def test_a_run_that_misses_its_target_gives_no_ratio():
    rows = [run("mlp", "8x1gbit", "dense", 11, 60.0),
            run("mlp", "8x1gbit", "auto", 11, 30.0, target=0.9)]  # never reaches 0.9
    assert ("mlp 8x1gbit", "auto") not in plot.ratios_by_setting(rows)


def test_a_file_given_with_variants_lends_only_those(tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(json.dumps(r) for r in [
        run("mlp", "8x1gbit", "dense", 11, 60.0), run("mlp", "8x1gbit", "auto", 11, 90.0),
        run("mlp", "8x1gbit", "arctopk-default", 11, 66.0)]) + "\n")
    new = tmp_path / "new.jsonl"
    new.write_text("\n".join(json.dumps(r) for r in [
        run("mlp", "8x1gbit", "dense", 11, 60.0), run("mlp", "8x1gbit", "auto", 11, 30.0)]) + "\n")
    rows = plot.load_rows([f"{old}=arctopk-default", str(new)])
    assert sorted(r["variant"] for r in rows) == ["arctopk-default", "auto", "dense"]
    ratios = plot.ratios_by_setting(rows)
    assert ratios[("mlp 8x1gbit", "auto")] == [0.5]  # the old file's auto is left out
    assert ratios[("mlp 8x1gbit", "arctopk-default")] == [1.1]
