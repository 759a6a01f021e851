#!/usr/bin/env python3
"""How much of a gradient's energy (sum of squares) each selection rule keeps, per tensor, on
examples/05's transformer: the question behind ARC-Top-K's accuracy on that model.

  row_energy.py [--steps N] [--ratios 0.01,0.2] [--corpus-dir DIR]

One process, no runtime: trains the model densely (AdamW, examples/05's defaults, batch 64 x 64)
for --steps steps, takes the next batch's gradient and, for every tensor ARC-Top-K compresses
(at least ARCREDUCE_MIN_COMPRESS_ELEMENTS' default of 16384 entries) in its matrix view (rows
split to at most 256 entries, as ARCREDUCE_ROW_LENGTH's default does), prints the share of the
energy kept by k = ratio x entries chosen as
  element  the k largest entries (Top-K),
  rows     the ratio x rows of largest norm (ARC-Top-K with an exact sketch),
  sketch   the rows of largest norm in a rank-4 Gaussian sketch (ARC-Top-K's scores),
  default  half of the rows by sketch, half uniformly at random from the others
           (ARCREDUCE_RANDOM_ROWS=0.5; the runtime draws the random half first and fills up
           by score, a slightly different draw),
  random   rows uniformly at random (Rand-K by rows),
  columns  the ratio x columns of largest norm of the tensor's 2-D weight [out, in] (the same
           selection on the transposed matrix: one entry per output for each chosen input),
then the same over all those tensors together.
"""
import argparse
import importlib.util
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "05_char_transformer")
MIN_COMPRESS, ROW_LENGTH, SKETCH_RANK = 16384, 256, 4


def load_example():
    """examples/05's train.py (its model and batches) and corpus.py."""
    sys.path.insert(0, EXAMPLE)
    spec = importlib.util.spec_from_file_location("lm_train", os.path.join(EXAMPLE, "train.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import corpus
    return module, corpus


def matrix_view(t):
    """Rows of the tensor's first dimension, split into equal pieces of 128..256 entries: the
    rule of the runtime's arc_matrix_view (compressors/) at ARCREDUCE_ROW_LENGTH=256, which
    Python cannot call."""
    m = t.reshape(t.shape[0], -1)
    for piece in range(ROW_LENGTH, ROW_LENGTH // 2 - 1, -1):
        if m.shape[1] > ROW_LENGTH and m.shape[1] % piece == 0:
            return m.reshape(-1, piece)
    return m


def kept(g, ratio, generator):
    """Energy kept by each rule on matrix g (rows x cols)."""
    rows, cols = g.shape
    squares = g * g
    norms = squares.sum(1)
    k_rows = max(1, int(ratio * rows))  # as the runtime's kept(): max(1, floor(ratio n))
    sketch = (g @ torch.randn(cols, SKETCH_RANK, generator=generator)).pow(2).sum(1)
    by_sketch = sketch.argsort(descending=True)
    order = torch.randperm(rows, generator=generator)
    half = set(by_sketch[:k_rows - k_rows // 2].tolist())
    for i in order.tolist():
        if len(half) == k_rows:
            break
        half.add(i)
    return {
        "element": squares.flatten().topk(max(1, int(ratio * g.numel()))).values.sum(),
        "rows": norms.topk(k_rows).values.sum(),
        "sketch": norms[by_sketch[:k_rows]].sum(),
        "default": norms[sorted(half)].sum(),
        "random": norms[order[:k_rows]].sum(),
    }


def columns_kept(weight, ratio):
    """Energy of the ratio x columns of largest norm of the weight as [out, in]."""
    m = weight.reshape(weight.shape[0], -1)
    norms = (m * m).sum(0)
    return norms.topk(max(1, int(ratio * norms.numel()))).values.sum()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100, help="dense AdamW steps before measuring")
    p.add_argument("--ratios", default="0.01,0.2")
    p.add_argument("--corpus-dir", default=None)
    args = p.parse_args()
    lm, corpus = load_example()
    torch.set_num_threads(2)
    text = corpus.read_corpus(args.corpus_dir or corpus.DEFAULT_DIR)
    vocabulary = corpus.Vocabulary(text)
    ids = torch.tensor(corpus.split(vocabulary.encode(text))[0], dtype=torch.long)
    torch.manual_seed(0)
    model = lm.CharTransformer(len(vocabulary), 64, 256, 4, 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    generator = torch.Generator().manual_seed(0)

    def gradient():
        rows = torch.randint(0, len(ids) - 65, (64,), generator=generator).tolist()
        x, y = lm.batch(ids, rows, 64)
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()

    for _ in range(args.steps):
        gradient()
        optimizer.step()
    gradient()
    rules = ("element", "rows", "sketch", "default", "random", "columns")
    print(f"energy kept after {args.steps} dense steps (share of each tensor's sum of squares)")
    for ratio in (float(r) for r in args.ratios.split(",")):
        total = dict.fromkeys(rules, 0.0)
        energy = 0.0
        print(f"\nratio {ratio}\n| tensor | view | " + " | ".join(rules) + " |")
        print("|---|---|" + "---|" * len(rules))
        for name, param in model.named_parameters():
            if param.numel() < MIN_COMPRESS:
                continue
            g = matrix_view(param.grad)
            e = float((g * g).sum())
            shares = {rule: float(v) for rule, v in kept(g, ratio, generator).items()}
            shares["columns"] = float(columns_kept(param.grad, ratio))
            energy += e
            for rule in rules:
                total[rule] += shares[rule]
            print(f"| {name} | {g.shape[0]}x{g.shape[1]} | " +
                  " | ".join(f"{shares[r] / e:.2f}" for r in rules) + " |")
        print("| all | | " + " | ".join(f"{total[r] / energy:.3f}" for r in rules) + " |")


if __name__ == "__main__":
    main()
