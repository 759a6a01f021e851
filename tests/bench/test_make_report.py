"""bench/tta/make_report.py's table against hand-computed expectations."""
import make_report


def curve(accuracies, step_seconds=1.0, every=25, bytes_per_step=1000.0):
    return [{"step": i * every, "seconds": i * every * step_seconds, "test_accuracy": a,
             "bytes_per_step": 0.0 if i == 0 else bytes_per_step}
            for i, a in enumerate(accuracies)]


def row(variant, seed, points, target=None, error_feedback="efm"):
    r = {"workload": "mlp", "setting": "local", "variant": variant, "seed": seed,
         "points": points, "error_feedback": error_feedback,
         "error_feedback_used": error_feedback}
    if target is not None:
        r["target"] = target
    return r


def cells(table, variant):
    for line in table.splitlines():
        if line.startswith(f"| {variant} |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row for {variant} in:\n{table}")


def test_variant_against_dense():
    # Dense reaches 0.80 at step 50 (50 s); the variant, twice as fast per step, at step 75.
    dense = row("dense", 0, curve([0.1, 0.7, 0.8, 0.85]), error_feedback="none")
    fast = row("arctopk", 0, curve([0.1, 0.6, 0.75, 0.8], step_seconds=0.5), target=0.8)
    table = make_report.table([dense, fast])
    c = cells(table, "arctopk")
    assert c[2] == "1/1"
    assert c[3] == "37.5"          # step 75 at 0.5 s per step
    assert c[4] == "0.75x"         # against dense's 50 s to the same target
    assert c[7] == "75"
    assert cells(table, "dense")[2] == "1/1"
    assert "seed 0: 80.00%" in table


def test_variant_that_misses():
    dense = row("dense", 1, curve([0.1, 0.8, 0.9]), error_feedback="none")
    slow = row("randk", 1, curve([0.1, 0.5, 0.6]), target=0.85)
    c = cells(make_report.table([dense, slow]), "randk")
    assert c[2] == "0/1" and c[3] == "—" and c[4] == "—" and c[7] == "—"
    assert c[6] == "60.00%"


def test_dense_alone_has_no_target():
    table = make_report.table([row("dense", 0, curve([0.1, 0.8]), error_feedback="none")])
    assert cells(table, "dense")[2] == "—"
    assert "none, as no variant besides dense ran" in table
