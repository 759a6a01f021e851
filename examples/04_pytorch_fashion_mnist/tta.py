"""Time-to-accuracy mode of train.py (--tta): train until the test accuracy reaches a target.

The whole test set is evaluated every --eval-every steps and the clock stops while it evaluates,
so "seconds" is training time only (forward, backward, exchange, optimizer step). Training stops
at the first evaluation at or above --target-accuracy (percent; 0 trains --max-steps steps).
Rank 0 prints a progress line per evaluation and, at the end, one JSON line in the format of
examples/03's --tta (read by bench/tta/make_report.py).
"""
import json
import time

import torch
import torch.nn.functional as F


def epoch_order(seed, epoch, examples):
    """The order of the training examples in epoch ``epoch`` (from 1), the same on every rank."""
    return torch.randperm(examples, generator=torch.Generator().manual_seed(seed * 1000 + epoch))


def train_step(net, optimizer, x, y):
    """One optimizer step on the batch (x, y), exchange included: (seconds, loss)."""
    t = time.perf_counter()
    optimizer.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - t, loss.item()


def ddp_bytes_per_step(model, variant, size, powersgd_rank):
    """What each rank sends per step in a ring all-reduce, 2 (P - 1) / P times the bytes DDP hands
    to all-reduce: every gradient for ddp; for ddp-powersgd the P and Q factors of the matrices
    PyTorch's hook compresses (those at least twice smaller so, its min_compression_rate) and the
    other tensors whole. An estimate: gloo's traffic is not counted."""
    floats = 0
    for p in model.parameters():
        if variant == "ddp-powersgd" and p.dim() > 1:
            n = p.shape[0]
            m = p.numel() // n
            factors = (n + m) * powersgd_rank
            floats += factors if p.numel() >= 2 * factors else p.numel()
        else:
            floats += p.numel()
    return 2.0 * (size - 1) / size * 4 * floats


def bytes_per_step(sent, sent_before, steps, estimate):
    """Mean bytes sent per step over the last ``steps`` steps: the runtime's counter (``sent``
    now, ``sent_before`` at the previous evaluation), or where it has none (DDP: ``sent`` is
    None) the ``estimate``; 0 over no step."""
    if steps == 0:
        return 0.0
    if sent is None:
        return estimate or 0.0
    return (sent - sent_before) / steps


def train_to_target(args, exchange, model, net, optimizer, train, test, evaluate):
    """Trains net (model wrapped by the exchange) in the global batch order of train.py's epochs
    and returns the JSON record. ``evaluate(net, exchange, x, y, rank, size)`` is train.py's."""
    rank, size = exchange.rank, exchange.size
    train_x, train_y = train
    steps_per_epoch = len(train_x) // (size * args.batch_size)
    target = args.target_accuracy / 100.0
    estimate = None
    if exchange.bytes_sent() is None and size > 1:
        estimate = ddp_bytes_per_step(model, args.variant, size, args.powersgd_rank)
    points = []
    bytes_mark, step_mark = exchange.bytes_sent(), 0
    train_seconds, loss_sum = 0.0, 0.0

    def record(step):
        nonlocal bytes_mark, step_mark, loss_sum
        accuracy = evaluate(net, exchange, test[0], test[1], rank, size)
        train_loss = torch.tensor([loss_sum / max(1, step - step_mark)], dtype=torch.float64)
        exchange.sum_(train_loss, "tta.train_loss")
        sent = exchange.bytes_sent()
        per_step = bytes_per_step(sent, bytes_mark, step - step_mark, estimate)
        points.append({"step": step, "seconds": round(train_seconds, 4),
                       "test_accuracy": accuracy, "train_loss": float(train_loss) / size,
                       "bytes_per_step": per_step})
        bytes_mark, step_mark, loss_sum = sent, step, 0.0
        if rank == 0 and step > 0:
            rate = step / train_seconds
            print(f"step {step}/{args.max_steps}  {args.variant}  loss "
                  f"{points[-1]['train_loss']:.4f}  test acc {100 * accuracy:.2f}%  train "
                  f"{train_seconds:.1f} s  {rate:.1f} steps/s  ETA at most "
                  f"{(args.max_steps - step) / rate:.0f} s", flush=True)
        return target > 0 and accuracy >= target

    reached = record(0)
    order = None
    for step in range(1, args.max_steps + 1):
        if reached:
            break
        epoch, position = divmod(step - 1, steps_per_epoch)
        if position == 0:
            order = epoch_order(args.seed, epoch + 1, len(train_x))
        first = (position * size + rank) * args.batch_size
        index = order[first:first + args.batch_size]
        seconds, loss = train_step(net, optimizer, train_x[index], train_y[index])
        train_seconds += seconds
        loss_sum += loss
        if step % args.eval_every == 0 or step == args.max_steps:
            reached = record(step)
    return {"bench": "tta", "program": "examples/04_pytorch_fashion_mnist",
            "model": "cnn", "variant": args.variant, "ranks": size,
            "batch_per_rank": args.batch_size, "train_examples": len(train_x),
            "test_examples": len(test[0]), "compressor": args.variant,
            "ratio": args.compress_ratio, "error_feedback": args.error_feedback or "default",
            "error_feedback_used": exchange.error_feedback_used(), "seed": args.seed,
            "lr": args.lr, "momentum": args.momentum, "target": target, "reached": reached,
            "bytes_estimated": estimate is not None, "steps_per_epoch": steps_per_epoch,
            "points": points}


def print_record(record):
    print(json.dumps(record), flush=True)
