"""Data-parallel training of a small decoder-only transformer, a character-level language model
of Debian's `fortunes` corpus (corpus.py), with one of these gradient exchanges:

  dense         arcreduce.torch DistributedOptimizer, no compression
  arctopk       arcreduce.torch DistributedOptimizer, the runtime's compression (ARC-Top-K and
                its defaults unless ARCREDUCE_* or --compress-ratio / --error-feedback say more)
  topk, randk,  the same with the runtime's All-Gather Top-K, shared Rand-K, Ok-Topk or
  oktopk,       PowerSGD (rank 1) instead
  powersgd
  ddp           torch.nn.parallel.DistributedDataParallel over gloo
  ddp-powersgd  DDP over gloo with PyTorch's PowerSGD hook (rank --powersgd-rank)
  ddp-hook      DDP with arcreduce's communication hook: the runtime's compression, as arctopk
  floor         no communication at all: each rank trains its own copy (the compute floor)

One process per rank: arcrun -np 4 -- python3 train.py --variant arctopk. Rank 0 prints a line
per evaluation (validation loss, perplexity per character, training wall-clock, rate, ETA) and,
with --json, one JSON line {"bench": "lm", ...} with the curve. With --target-loss it stops at
the first evaluation at or below that loss: the time-to-accuracy benchmark's transformer
(scripts/bench-tta.sh, WORKLOADS=lm). AdamW, whose moments stay in the
optimizer (DistributedOptimizer gives an adaptive optimizer's gradients no error feedback where
efm is configured, and ratio 0.5 where no ratio is set: docs/pytorch.md). Every
nn.Linear weight is a row-structured matrix of the kind ARC-Top-K selects rows from.
"""
import argparse
import json
import math
import os
import sys
import time

# One BLAS thread per rank (ranks share the machine's cores); set before torch loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch
import torch.nn as nn
import torch.nn.functional as F

import corpus

sys.dont_write_bytecode = True  # examples/04's module below: leave its folder clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "04_pytorch_fashion_mnist"))
from train import ArcreduceExchange, DdpExchange, DdpHookExchange, NoExchange  # noqa: E402
from tta import bytes_per_step, ddp_bytes_per_step  # noqa: E402

VARIANTS = ("dense", "arctopk", "topk", "randk", "oktopk", "powersgd", "ddp", "ddp-powersgd",
            "ddp-hook", "floor")


class Block(nn.Module):
    """Pre-norm transformer block: causal multi-head self-attention, then a 4x MLP."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x, mask):
        b, t, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(w, dim=2)
        q, k, v = (z.view(b, t, self.heads, w // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(w // self.heads)
        attention = F.softmax(scores + mask[:t, :t], dim=-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(b, t, w))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class CharTransformer(nn.Module):
    def __init__(self, vocabulary, context, width, layers, heads):
        super().__init__()
        self.token = nn.Embedding(vocabulary, width)
        self.position = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocabulary)
        # Additive causal mask (-inf above the diagonal), float: DDP broadcasts buffers, and
        # gloo has no bool.
        self.register_buffer("mask", torch.triu(torch.full((context, context), float("-inf")), 1))

    def forward(self, ids):
        x = self.token(ids) + self.position(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x, self.mask)
        return self.head(self.norm(x))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", choices=VARIANTS, default="arctopk")
    p.add_argument("--steps", type=int, default=600, help="optimizer steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=16, help="sequences per rank per step")
    p.add_argument("--context", type=int, default=64, help="characters per sequence")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--compress-ratio", type=float, default=None,
                   help="arctopk, topk, randk: fraction kept (default: ARCREDUCE_COMPRESS_RATIO "
                        "if set, else 0.5, arcreduce.torch's ratio for adaptive optimizers)")
    p.add_argument("--error-feedback", default=None,
                   help="arctopk, topk, randk: none, ef14, ef21, ef21m, efm "
                        "(default: ARCREDUCE_ERROR_FEEDBACK; efm, the runtime's, becomes none "
                        "under AdamW)")
    p.add_argument("--powersgd-rank", type=int, default=1, help="ddp-powersgd: approximation rank")
    p.add_argument("--eval-every", type=int, default=50, help="steps between evaluations")
    p.add_argument("--eval-batches", type=int, default=8,
                   help="validation batches per rank per evaluation (fixed positions)")
    p.add_argument("--target-loss", type=float, default=0.0,
                   help="stop once the validation loss is at or below this (0: run --steps)")
    p.add_argument("--corpus-dir", default=corpus.DEFAULT_DIR)
    p.add_argument("--json", action="store_true", help="rank 0 prints the curve as a JSON line")
    args = p.parse_args()
    for name in ("steps", "batch_size", "context", "width", "layers", "heads", "eval_every",
                 "eval_batches"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.width % args.heads:
        p.error(f"--width {args.width} is not a multiple of --heads {args.heads}")
    if args.compress_ratio is not None and not 0 < args.compress_ratio <= 1:
        p.error("--compress-ratio must be in (0, 1]")
    return args


def adamw(args, params):
    return torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)


def batch(ids, rows, context):
    """Sequences starting at `rows` and their next-character targets."""
    x = torch.stack([ids[r:r + context] for r in rows])
    y = torch.stack([ids[r + 1:r + context + 1] for r in rows])
    return x, y


def validation_loss(model, exchange, valid, args, rank, size):
    """Mean cross-entropy (nats per character) over fixed validation positions, all ranks."""
    model.eval()
    total = torch.zeros(2, dtype=torch.float64)
    count = args.eval_batches * args.batch_size * size
    stride = max(1, (len(valid) - args.context - 1) // count)
    with torch.no_grad():
        for b in range(args.eval_batches):
            first = (b * size + rank) * args.batch_size
            rows = [(first + i) * stride for i in range(args.batch_size)]
            x, y = batch(valid, rows, args.context)
            logits = model(x)
            total[0] += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum").item()
            total[1] += y.numel()
    exchange.sum_(total, "eval.loss")
    model.train()
    return float(total[0] / total[1])


def main():
    args = parse_args()
    torch.set_num_threads(1)  # one core per rank: ranks share the machine
    try:
        text = corpus.read_corpus(args.corpus_dir)
    except corpus.CorpusError as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 1
    vocabulary = corpus.Vocabulary(text)
    train_ids, valid_ids = (torch.tensor(part, dtype=torch.long)
                            for part in corpus.split(vocabulary.encode(text)))
    torch.manual_seed(args.seed)
    model = CharTransformer(len(vocabulary), args.context, args.width, args.layers, args.heads)
    if args.variant == "floor":
        exchange = NoExchange(args, model, make_optimizer=adamw)
    elif args.variant in ("dense", "arctopk", "topk", "randk", "oktopk", "powersgd"):
        # An unset --compress-ratio / --error-feedback leaves them to the runtime's configuration.
        exchange = ArcreduceExchange(args, model, make_optimizer=adamw)
    elif args.variant == "ddp-hook":
        exchange = DdpHookExchange(args, model, make_optimizer=adamw)
    else:
        exchange = DdpExchange(args, model, make_optimizer=adamw)
    rank, size = exchange.rank, exchange.size
    net, optimizer = exchange.model, exchange.optimizer
    parameters = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"variant {args.variant}, {size} ranks, {parameters} parameters, vocabulary "
              f"{len(vocabulary)}, {len(train_ids)} training / {len(valid_ids)} validation "
              f"characters, batch {size} x {args.batch_size} x {args.context}, seed {args.seed}",
              flush=True)
    generator = torch.Generator().manual_seed(args.seed)
    # DDP's traffic is not counted: estimated from what it hands to all-reduce (examples/04).
    estimate = None
    if exchange.bytes_sent() is None and size > 1:
        estimate = ddp_bytes_per_step(model, args.variant, size, args.powersgd_rank)
    points = []
    bytes_mark, step_mark = exchange.bytes_sent(), 0
    train_seconds, loss_sum = 0.0, 0.0

    def evaluate(step):
        nonlocal bytes_mark, step_mark, loss_sum
        loss = validation_loss(net, exchange, valid_ids, args, rank, size)
        train_loss = torch.tensor([loss_sum / max(1, step - step_mark)], dtype=torch.float64)
        exchange.sum_(train_loss, "eval.train_loss")
        sent = exchange.bytes_sent()
        per_step = bytes_per_step(sent, bytes_mark, step - step_mark, estimate)
        points.append({"step": step, "seconds": round(train_seconds, 4), "val_loss": loss,
                       "perplexity": math.exp(loss), "train_loss": float(train_loss) / size,
                       "bytes_per_step": per_step})
        bytes_mark, step_mark, loss_sum = sent, step, 0.0
        if rank == 0 and step > 0:
            rate = step / train_seconds
            print(f"step {step}/{args.steps}  val loss {loss:.4f}  perplexity {math.exp(loss):.3f}"
                  f"  train loss {points[-1]['train_loss']:.4f}  train {train_seconds:.1f} s  "
                  f"{rate:.2f} steps/s  ETA at most {(args.steps - step) / rate:.0f} s", flush=True)
        return args.target_loss > 0 and loss <= args.target_loss

    reached = evaluate(0)
    for step in range(1, args.steps + 1):
        if reached:  # a target met before training (step 0) trains no step
            break
        # Every rank draws the same global batch positions and takes its own slice.
        rows = torch.randint(0, len(train_ids) - args.context - 1,
                             (size * args.batch_size,), generator=generator)
        x, y = batch(train_ids, rows[rank * args.batch_size:(rank + 1) * args.batch_size].tolist(),
                     args.context)
        t = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x).flatten(0, 1), y.flatten())
        loss.backward()
        optimizer.step()
        train_seconds += time.perf_counter() - t
        loss_sum += loss.item()
        if step % args.eval_every == 0 or step == args.steps:
            reached = evaluate(step)
    if rank == 0 and args.json:
        print(json.dumps({"bench": "lm", "program": "examples/05_char_transformer",
                          "variant": args.variant, "ranks": size, "parameters": parameters,
                          "seed": args.seed, "batch_per_rank": args.batch_size,
                          "context": args.context, "lr": args.lr,
                          "ratio": args.compress_ratio,
                          "ratio_used": getattr(exchange, "ratio_used", lambda: None)(),
                          "error_feedback": args.error_feedback or "default",
                          "error_feedback_used": exchange.error_feedback_used(),
                          "target_loss": args.target_loss, "reached": reached,
                          "bytes_estimated": estimate is not None, "points": points}),
              flush=True)
    # close() tears the exchange down; nothing else may hold the model (evaluate() still names
    # net, so the references are dropped rather than the names deleted).
    net = optimizer = None
    exchange.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
