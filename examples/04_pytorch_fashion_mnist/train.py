"""Data-parallel training of a small CNN on Fashion-MNIST with one of these gradient exchanges:

  dense         arcreduce.torch DistributedOptimizer, no compression
  arctopk       arcreduce.torch DistributedOptimizer, ARC-Top-K (--compress-ratio, error feedback)
  topk, randk, oktopk, powersgd
                the same with another of the runtime's compressors
  ddp           torch.nn.parallel.DistributedDataParallel over gloo
  ddp-powersgd  DDP over gloo with PyTorch's PowerSGD communication hook
  ddp-hook      DDP with arcreduce's communication hook (arc.register_ddp_hook): the runtime's
                compressor (--compress-ratio, --error-feedback) on DDP's buckets
  floor         no exchange: each rank steps its own model (the compute floor of the others'
                step time; its accuracy is rank 0's own model on its share of the test set)

One process per rank: arcrun -np 4 -- python3 train.py --variant arctopk. Rank 0 prints one
line per epoch and a summary line; --csv writes one row per epoch. Same seed, same model, same
data order for every variant. --tta trains until the test accuracy reaches --target-accuracy
instead (tta.py), for the time-to-accuracy benchmark (scripts/bench-tta.sh).
"""
import argparse
import csv
import gc
import os
import sys
import time

# One BLAS thread per rank (ranks share the machine's cores); set before torch loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch
import torch.nn as nn
import torch.nn.functional as F

import fashion_mnist
import rendezvous
import tta

VARIANTS = ("dense", "arctopk", "topk", "randk", "oktopk", "powersgd", "ddp", "ddp-powersgd",
            "ddp-hook", "floor")


class SmallCNN(nn.Module):
    """conv 3x3 (32) - pool - conv 3x3 (64) - pool - fc 1600x128 - fc 128x10: 225,034 weights."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", choices=VARIANTS, default="arctopk")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=64, help="examples per rank per step")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--compress-ratio", type=float, default=None,
                   help="fraction kept (default: the runtime's ARCREDUCE_COMPRESS_RATIO, 0.01)")
    p.add_argument("--error-feedback", default=None,
                   help="arctopk: none, ef14, ef21, ef21m, efm (default: ARCREDUCE_ERROR_FEEDBACK, "
                        "else the runtime's efm, which takes the SGD momentum over)")
    p.add_argument("--powersgd-rank", type=int, default=1, help="ddp-powersgd: approximation rank")
    p.add_argument("--train-samples", type=int, default=None, help="use the first N examples")
    p.add_argument("--test-samples", type=int, default=None)
    p.add_argument("--data-dir", default=fashion_mnist.DEFAULT_DIR)
    p.add_argument("--csv", default=None, help="rank 0 writes one row per epoch here")
    p.add_argument("--tta", action="store_true",
                   help="train to --target-accuracy, evaluating every --eval-every steps, and "
                   "print one JSON line (time-to-accuracy benchmark)")
    p.add_argument("--target-accuracy", type=float, default=0.0,
                   help="with --tta: stop at this test accuracy, percent (0: --max-steps)")
    p.add_argument("--max-steps", type=int, default=1000, help="with --tta: steps at most")
    p.add_argument("--eval-every", type=int, default=25,
                   help="with --tta: steps between evaluations")
    args = p.parse_args()
    for name in ("epochs", "batch_size", "max_steps", "eval_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.compress_ratio is not None and not 0 < args.compress_ratio <= 1:
        p.error("--compress-ratio must be in (0, 1]")
    return args


def sgd(args, params):
    return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum)


def pair_ef21m_with_sgd(args, settings):
    """EF21M (as ARCREDUCE_PRESET=paper sets it) keeps a momentum of its own, which diverges
    stacked on SGD's: as the paper pairs them, SGD runs without momentum at the learning rate
    divided by its eta (ARCREDUCE_EF_ETA), and EF21M's state starts at zero. Returns the
    arguments to build SGD with (the same ones for any other error feedback)."""
    feedback = args.error_feedback or settings["error_feedback"]
    if feedback != "ef21m" or args.momentum <= 0:
        return args
    eta = float(settings["ef_momentum"])
    os.environ.setdefault("ARCREDUCE_EF_INIT", "zero")  # read by init(), which follows
    paired = argparse.Namespace(**vars(args))
    paired.momentum, paired.lr = 0.0, args.lr / eta
    if int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")) == 0:
        print(f"error feedback: ef21m replaces the SGD momentum (ARCREDUCE_EF_ETA={eta:g}, "
              f"ARCREDUCE_EF_INIT={os.environ['ARCREDUCE_EF_INIT']}); SGD runs without momentum "
              f"at lr {paired.lr:g}", flush=True)
    return paired


class ArcreduceExchange:
    """Gradients through arcreduce.torch's DistributedOptimizer. ``make_optimizer(args, params)``
    builds the optimizer it wraps (SGD with --lr and --momentum; examples/05 passes AdamW)."""

    def __init__(self, args, model, make_optimizer=sgd):
        import arcreduce.torch as arc
        self.arc = arc
        if make_optimizer is sgd and args.variant in ("arctopk", "topk", "randk"):
            args = pair_ef21m_with_sgd(args, arc.config())
        arc.init()
        self.rank, self.size = arc.rank(), arc.size()
        arc.broadcast_parameters(model.state_dict(), root_rank=0)
        # Unset --compress-ratio / --error-feedback leave them to the runtime's configuration.
        compression = (arc.Compression("none") if args.variant == "dense" else
                       arc.Compression(args.variant, ratio=args.compress_ratio,
                                       error_feedback=args.error_feedback))
        self.optimizer = arc.DistributedOptimizer(make_optimizer(args, model.parameters()),
                                                  named_parameters=model.named_parameters(),
                                                  compression=compression)
        arc.broadcast_optimizer_state(self.optimizer, root_rank=0)
        self.model = model

    def gradient_compression(self):
        """The Compression of the gradients once paired with the optimizer."""
        return self.optimizer.gradient_compression()

    def error_feedback_used(self):
        """The error feedback the gradients get once paired with the optimizer."""
        compression = self.gradient_compression()
        if compression.compressor == "none":
            return "none"
        return compression.error_feedback or self.arc.config()["error_feedback"]

    def ratio_used(self):
        """The ratio the gradients get once paired with the optimizer (None: not compressed)."""
        compression = self.gradient_compression()
        settings = self.arc.config()
        if (compression.compressor or settings["compressor"]) in ("none", "fp16", "powersgd"):
            return None
        return compression.ratio or settings["compress_ratio"]

    def sum_(self, tensor, name):
        return self.arc.allreduce_(tensor, name, op=self.arc.Sum, compression="none")

    def bytes_sent(self):
        return self.arc.stats()["bytes_sent"]

    def close(self):
        self.arc.shutdown()


class DdpExchange:
    """Gradients through DistributedDataParallel over gloo (optionally the PowerSGD hook)."""

    def __init__(self, args, model, make_optimizer=sgd):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        self.dist = dist
        env = os.environ
        self.rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("RANK", "0")))
        self.size = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("WORLD_SIZE", "1")))
        rendezvous.init_gloo(dist, self.rank, self.size)
        self.model = DistributedDataParallel(model)  # broadcasts rank 0's parameters
        self.pending_futures = []
        self.powersgd = args.variant == "ddp-powersgd"
        if self.powersgd:
            self._register_powersgd(args)
        self.optimizer = make_optimizer(args, self.model.parameters())

    def _register_powersgd(self, args):
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
        state = powerSGD.PowerSGDState(process_group=None,
                                       matrix_approximation_rank=args.powersgd_rank,
                                       start_powerSGD_iter=2, use_error_feedback=True,
                                       warm_start=True, random_seed=args.seed)
        # Over gloo, ranks must issue each bucket's chained all-reduces in the same order: a
        # bucket starts only when the previous bucket's chain has finished.
        previous = self.pending_futures

        def ordered_hook(hook_state, bucket):
            if previous:
                previous.pop().wait()
            future = powerSGD.powerSGD_hook(hook_state, bucket)
            previous.append(future)
            return future

        self.model.register_comm_hook(state, ordered_hook)

    def error_feedback_used(self):
        return "powersgd-ef" if self.powersgd else "none"

    def sum_(self, tensor, name):
        self.dist.all_reduce(tensor)
        return tensor

    def bytes_sent(self):
        return None

    def close(self):
        # PyTorch 1.13 can deadlock when the DDP reducer is destroyed at exit while a gloo worker
        # still has to free a tensor of the Python hook (it waits for the GIL the exiting
        # thread holds). Finish every hook future and every queued gloo op first.
        while self.pending_futures:
            self.pending_futures.pop().wait()
        self.dist.barrier()
        del self.model, self.optimizer
        gc.collect()
        self.dist.destroy_process_group()


class DdpHookExchange(ArcreduceExchange):
    """DistributedDataParallel whose gradient exchange is arcreduce's communication hook
    (arc.register_ddp_hook): DDP's buckets go to the runtime, each parameter's gradient with its
    own shape, compressed as the job configures it (--compress-ratio, --error-feedback); the
    hook pairs the error feedback with the optimizer as DistributedOptimizer does. The gloo
    group DDP needs comes from the MPI launch (arc.init_process_group)."""

    def __init__(self, args, model, make_optimizer=sgd):
        import arcreduce.torch as arc
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        self.arc, self.dist = arc, dist
        if make_optimizer is sgd:
            args = pair_ef21m_with_sgd(args, arc.config())
        arc.init_process_group("gloo", timeout=rendezvous.GLOO_TIMEOUT)  # also arc.init()
        self.rank, self.size = arc.rank(), arc.size()
        self.model = DistributedDataParallel(model)  # broadcasts rank 0's parameters
        self.optimizer = make_optimizer(args, self.model.parameters())
        compression = arc.Compression(ratio=args.compress_ratio, error_feedback=args.error_feedback)
        self.hook = arc.register_ddp_hook(self.model, self.optimizer, compression=compression)

    def gradient_compression(self):
        return self.hook.gradient_compression()

    def close(self):
        self.dist.barrier()
        del self.model, self.optimizer
        gc.collect()
        self.dist.destroy_process_group()
        self.arc.shutdown()


class NoExchange:
    """The compute floor: no gradient leaves the rank, no runtime is started; metrics stay local
    (``sum_`` scales a rank's own value as if every rank had it)."""

    def __init__(self, args, model, make_optimizer=sgd):
        env = os.environ
        self.rank = int(env.get("OMPI_COMM_WORLD_RANK", "0"))
        self.size = int(env.get("OMPI_COMM_WORLD_SIZE", "1"))
        self.model, self.optimizer = model, make_optimizer(args, model.parameters())

    def sum_(self, tensor, name):
        tensor *= self.size
        return tensor

    def bytes_sent(self):
        return 0

    def error_feedback_used(self):
        return "none"

    def close(self):
        pass


def evaluate(model, exchange, images, labels, rank, size):
    """Test accuracy over the whole test set, each rank scoring its shard."""
    model.eval()
    correct = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        x, y = images[rank::size], labels[rank::size]
        for i in range(0, len(x), 1000):
            predicted = model(x[i:i + 1000]).argmax(1)
            correct[0] += (predicted == y[i:i + 1000]).sum().item()
        correct[1] = len(x)
    exchange.sum_(correct, "eval.correct")
    model.train()
    return float(correct[0] / correct[1])


def format_seconds(s):
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.1f} s"


def main():
    args = parse_args()
    torch.set_num_threads(1)  # one core per rank: ranks share the machine
    try:
        train_x, train_y = fashion_mnist.load("train", args.data_dir, args.train_samples)
        test_x, test_y = fashion_mnist.load("test", args.data_dir, args.test_samples)
    except fashion_mnist.DataError as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 1
    torch.manual_seed(args.seed)
    model = SmallCNN()
    exchange = (NoExchange if args.variant == "floor" else
                DdpHookExchange if args.variant == "ddp-hook" else
                DdpExchange if args.variant.startswith("ddp") else ArcreduceExchange)(args, model)
    rank, size = exchange.rank, exchange.size
    net, optimizer = exchange.model, exchange.optimizer
    steps_per_epoch = len(train_x) // (size * args.batch_size)
    if steps_per_epoch == 0:
        print(f"train.py: {len(train_x)} training examples are fewer than one global batch "
              f"({size} ranks x {args.batch_size})", file=sys.stderr)
        return 2
    if rank == 0:
        print(f"variant {args.variant}, {size} ranks, {sum(p.numel() for p in model.parameters())}"
              f" parameters, {steps_per_epoch} steps/epoch of {size} x {args.batch_size}, "
              f"seed {args.seed}", flush=True)
    if args.tta:
        record = tta.train_to_target(args, exchange, model, net, optimizer, (train_x, train_y),
                                     (test_x, test_y), evaluate)
        if rank == 0:
            tta.print_record(record)
        del net, optimizer
        exchange.close()
        return 0
    rows, step_times = [], []
    bytes_before = exchange.bytes_sent()
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        epoch_start = time.perf_counter()
        order = tta.epoch_order(args.seed, epoch, len(train_x))
        loss_sum = torch.zeros(1, dtype=torch.float64)
        epoch_steps = []
        for step in range(steps_per_epoch):
            first = (step * size + rank) * args.batch_size
            index = order[first:first + args.batch_size]
            seconds, loss = tta.train_step(net, optimizer, train_x[index], train_y[index])
            epoch_steps.append(seconds)
            loss_sum += loss
        loss_sum /= steps_per_epoch * size
        exchange.sum_(loss_sum, "epoch.loss")
        accuracy = evaluate(net, exchange, test_x, test_y, rank, size)
        step_times += epoch_steps
        epoch_time = time.perf_counter() - epoch_start
        step_ms = 1000 * sum(epoch_steps) / len(epoch_steps)
        rate = steps_per_epoch * size * args.batch_size / epoch_time
        eta = (time.perf_counter() - start) / epoch * (args.epochs - epoch)
        rows.append([epoch, args.variant, args.seed, f"{float(loss_sum):.5f}", f"{accuracy:.4f}",
                     f"{step_ms:.3f}", f"{rate:.0f}"])
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs}  loss {float(loss_sum):.4f}  test accuracy "
                  f"{100 * accuracy:.2f}%  step {step_ms:.1f} ms  {rate:.0f} images/s  "
                  f"epoch {format_seconds(epoch_time)}  ETA {format_seconds(eta)}", flush=True)
    sent = exchange.bytes_sent()
    per_step = "n/a" if sent is None else f"{(sent - bytes_before) / len(step_times):.0f}"
    if rank == 0:
        if args.csv:
            with open(args.csv, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["epoch", "variant", "seed", "train_loss", "test_accuracy",
                                 "step_time_ms", "images_per_s"])
                writer.writerows(rows)
        mean_ms = 1000 * sum(step_times) / len(step_times)
        print(f"summary: variant={args.variant} ranks={size} epochs={args.epochs} "
              f"test_accuracy={float(rows[-1][4]):.4f} step_time_ms={mean_ms:.2f} "
              f"bytes_sent_per_step={per_step}", flush=True)
    del net, optimizer  # close() tears the exchange down; nothing else may hold the model
    exchange.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
