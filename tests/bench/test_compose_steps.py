"""bench/tta/compose_steps.py: steps per seed and the composed table, against hand-computed
expectations."""
import json
import subprocess
import sys
from pathlib import Path

import compose_steps

SCRIPT = Path(compose_steps.__file__)


def points(values, key, every=25):
    return [{"step": i * every, key: v} for i, v in enumerate(values)]


def test_first_at_counts_dense_to_the_target():
    acc = points([0.1, 0.5, 0.8, 0.9], "test_accuracy")
    assert compose_steps.first_at(acc, 0.8, loss=False) == 50
    assert compose_steps.first_at(acc, 0.95, loss=False) is None
    assert compose_steps.first_at(acc, None, loss=False) == 75  # no target: the whole run
    loss = points([3.0, 2.0, 1.9, 1.8], "val_loss", every=50)
    assert compose_steps.first_at(loss, 1.95, loss=True) == 100


def test_composed_table(tmp_path):
    tta = tmp_path / "tta"
    tta.mkdir()
    rows = [
        {"workload": "cnn", "variant": "dense", "seed": 0, "target": 0.0,
         "points": points([0.1, 0.5, 0.8, 0.9], "test_accuracy", every=100)},
        {"workload": "cnn", "variant": "arctopk-default", "seed": 0, "target": 0.8,
         "reached": True, "points": points([0.1, 0.8], "test_accuracy", every=400)},
        {"workload": "cnn", "variant": "topk", "seed": 0, "target": 0.8, "reached": False,
         "points": points([0.1, 0.7], "test_accuracy", every=900)},
        {"workload": "mlp", "variant": "dense", "seed": 0, "points": []},  # another workload
    ]
    (tta / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    steps = tmp_path / "steps.jsonl"
    times = [{"bench": "lm-steps", "rate": "100mbit", "variant": v, "step_s": s}
             for v, s in (("dense", 0.5), ("arctopk", 0.1), ("ddp", 0.4), ("topk", 0.2))]
    steps.write_text("".join(json.dumps(t) + "\n" for t in times))
    out = subprocess.run([sys.executable, str(SCRIPT), "--tta", str(tta), "--steps", str(steps),
                          "--workload", "cnn"], capture_output=True, text=True, check=True).stdout
    lines = {line.split("|")[1].strip(): line for line in out.splitlines()
             if line.startswith("| ") and not line.startswith("| variant")}
    # dense reaches 0.8 at step 200: 200 x 0.5 = 100 s; DDP (not trained) gets dense's steps,
    # 200 x 0.4 = 80 s; ARC-Top-K 400 x 0.1 = 40 s, 0.50x DDP's; Top-K did not reach it.
    assert "| 200 | 0.500 | 100 | 1.25x |" in lines["dense"]
    assert "| 200 | 0.400 | 80 | 1.00x |" in lines["ddp"]
    assert "| 400 | 0.100 | 40 | 0.50x |" in lines["arctopk"]
    assert "not all reached" in lines["topk"]
