#!/usr/bin/env python3
"""Training-step time of a PyTorch MLP on Fashion-MNIST batches, one process per rank.

A step is zero_grad, forward, cross-entropy, backward, the gradient exchange and the SGD
(momentum) step; selecting the batch is not timed. Variants:

  floor         no communication: each rank steps its own model (the compute floor)
  dense         arcreduce.torch DistributedOptimizer, compressor none
  arctopk       arcreduce.torch DistributedOptimizer, ARC-Top-K at --ratio (the rest: ARCREDUCE_*)
  ddp           DistributedDataParallel over gloo, buckets of --bucket-cap-mb (PyTorch's 25)
  ddp-powersgd  DDP with PyTorch's PowerSGD hook (rank --powersgd-rank, error feedback, warm start)
  ddp-hook      DDP (buckets of --bucket-cap-mb) with arcreduce's communication hook,
                ARC-Top-K at --ratio (the rest: ARCREDUCE_*); ddp-hook-dense: compressor none

Models: fmnist-mlp is examples/03_fashion_mnist's MLP (784-1024-1024-10, batch 64, lr 0.02,
momentum 0.9), so DDP can be set beside the C++ example; mlp4m is 784-2048-1024-512-10
(4,235,786 parameters). --warmup untimed steps, then --steps timed ones without a barrier
between them, as in training; per step the longest rank's duration counts. Rank 0 prints one
JSON line {"bench": "e2e", ...} (bench/e2e/make_report.py reads it): bytes sent, communication
calls and coordinator CPU per step come from arcreduce.torch.stats() of rank 0 for arcreduce
variants (null where the runtime lacks a counter); for DDP bytes are an estimate, the ring
all-reduce's 2(P-1)/P of what DDP hands to all-reduce.

With --overlap-steps N (dense and arctopk) rank 0 then prints a second line {"bench":
"overlap", ...}: N interleaved compute-only, communication-only and overlapped steps, as
examples/03's --overlap-steps measures them (measure_overlap below).

  arcrun -np 2 -x MASTER_PORT=29600 -- python3 bench/e2e/torch_step_bench.py --variant ddp
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time

sys.dont_write_bytecode = True  # the imports below are other folders' modules: leave them clean
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "04_pytorch_fashion_mnist"))
sys.path.insert(0, os.path.join(ROOT, "bench", "ddp"))

# One BLAS thread per rank (ranks share the machine's cores); set before torch loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fashion_mnist  # noqa: E402  (examples/04's IDX reader)
from ddp_bench import powersgd_payload, rank_and_size  # noqa: E402
import rendezvous  # noqa: E402  (examples/04's gloo rendezvous)

MODELS = {"fmnist-mlp": [784, 1024, 1024, 10], "mlp4m": [784, 2048, 1024, 512, 10]}
VARIANTS = ("floor", "dense", "arctopk", "ddp", "ddp-powersgd", "ddp-hook", "ddp-hook-dense")


def mlp(widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def median_p90(values):
    """The median (mean of the middle two for an even count) and the nearest-rank p90,
    round(0.9 (n - 1)), as the C++ example and make_report.py compute them."""
    ordered = sorted(values)
    return statistics.median(ordered), ordered[int(round(0.9 * (len(ordered) - 1)))]


class Arcreduce:
    """Gradients averaged by arcreduce.torch's DistributedOptimizer."""

    def __init__(self, args, model, sgd):
        import arcreduce.torch as arc
        self.arc = arc
        arc.init()
        self.rank, self.size = arc.rank(), arc.size()
        arc.broadcast_parameters(model.state_dict(), root_rank=0)
        compression = (arc.Compression("none") if args.variant == "dense"
                       else arc.Compression("arctopk", ratio=args.ratio))
        self.model = model
        self.optimizer = arc.DistributedOptimizer(sgd, named_parameters=model.named_parameters(),
                                                  compression=compression)

    def sum_(self, tensor, name):
        self.arc.allreduce_(tensor, name, op=self.arc.Sum, compression="none")

    def counters(self):
        s = self.arc.stats()
        return {k: s.get(k) for k in ("bytes_sent", "collectives", "negotiation_collectives",
                                      "coordinator_cpu_seconds", "held_steps")}

    def close(self):
        self.arc.shutdown()


class ArcreduceDdp(Arcreduce):
    """DDP whose gradient exchange is arcreduce's communication hook (arc.register_ddp_hook):
    the SGD's momentum paired with the runtime's error feedback as DistributedOptimizer pairs
    it; DDP's gloo group meets as the Gloo variants' does."""

    def __init__(self, args, model, sgd):
        import arcreduce.torch as arc
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        self.arc, self.dist = arc, dist
        arc.init()
        self.rank, self.size = arc.rank(), arc.size()
        rendezvous.init_gloo(dist, self.rank, self.size, rendezvous.init_method(
            address=args.master_addr, port=args.master_port))
        self.model = DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
        self.optimizer = sgd
        compression = (arc.Compression("none") if args.variant == "ddp-hook-dense"
                       else arc.Compression("arctopk", ratio=args.ratio))
        self.hook = arc.register_ddp_hook(self.model, sgd, compression)

    def close(self):
        self.dist.barrier()
        del self.model, self.optimizer
        gc.collect()
        self.dist.destroy_process_group()
        self.arc.shutdown()


class Gloo:
    """DDP (dense or PowerSGD) over gloo; for the floor, a process group used only before and
    after the timed steps (the warm-up's length and the times)."""

    def __init__(self, args, model, sgd):
        import torch.distributed as dist
        self.dist = dist
        self.rank, self.size = rank_and_size()
        rendezvous.init_gloo(dist, self.rank, self.size, rendezvous.init_method(
            address=args.master_addr, port=args.master_port))
        self.pending = []
        self.model, self.optimizer = model, sgd
        if args.variant == "floor":
            return
        from torch.nn.parallel import DistributedDataParallel
        self.model = DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
        if args.variant == "ddp-powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
            state = powerSGD.PowerSGDState(
                process_group=None, matrix_approximation_rank=args.powersgd_rank,
                start_powerSGD_iter=2, use_error_feedback=True, warm_start=True)
            # Over gloo the ranks must issue each bucket's chained all-reduces in one order
            # (bench/ddp/ddp_bench.py): a bucket's hook starts when the previous one's is done.
            pending = self.pending

            def ordered_hook(hook_state, bucket):
                if pending:
                    pending.pop().wait()
                future = powerSGD.powerSGD_hook(hook_state, bucket)
                pending.append(future)
                return future

            self.model.register_comm_hook(state, ordered_hook)

    def sum_(self, tensor, name):
        self.dist.all_reduce(tensor)

    def counters(self):
        return None

    def close(self):
        # PyTorch 1.13 can deadlock destroying the reducer at exit while a gloo worker frees a
        # hook's tensor (examples/04's train.py): finish everything first.
        while self.pending:
            self.pending.pop().wait()
        self.dist.barrier()
        del self.model, self.optimizer
        gc.collect()
        self.dist.destroy_process_group()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", choices=VARIANTS, default="dense")
    p.add_argument("--model", choices=sorted(MODELS), default="mlp4m")
    p.add_argument("--steps", type=int, default=40, help="timed steps at most")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--budget", type=float, default=0.0,
                   help="seconds: time fewer steps (at least 10) when the warm-up says --steps "
                        "would take longer (0: always --steps)")
    p.add_argument("--batch-size", type=int, default=64, help="examples per rank per step")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--ratio", type=float, default=0.01, help="arctopk: fraction kept")
    p.add_argument("--powersgd-rank", type=int, default=1)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP bucket size")
    p.add_argument("--train-samples", type=int, default=16384, help="examples loaded")
    p.add_argument("--data-dir", default=fashion_mnist.DEFAULT_DIR)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overlap-steps", type=int, default=0,
                   help="dense and arctopk: steps of the overlap measurement after the timed "
                        "steps (0: none)")
    p.add_argument("--master-addr", help="gloo's rendezvous host (default: MASTER_ADDR, else "
                   "127.0.0.1 where every rank runs on this host)")
    p.add_argument("--master-port", help="gloo's rendezvous port (default: MASTER_PORT, else "
                   "29517)")
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.batch_size < 1:
        p.error("--steps and --batch-size must be at least 1, --warmup at least 0")
    if args.overlap_steps < 0 or (args.overlap_steps and args.variant not in ("dense", "arctopk")):
        p.error("--overlap-steps takes a count >= 0, and only with --variant dense or arctopk")
    return args


def from_every_rank(exchange, values, name):
    """Every rank's ``values`` (a list, or nested lists, of the same shape on every rank) as a
    float64 tensor indexed by rank first: one exact sum in which each rank fills its own slice.
    Collective."""
    own = torch.tensor(values, dtype=torch.float64)
    everyone = torch.zeros((exchange.size,) + tuple(own.shape), dtype=torch.float64)
    everyone[exchange.rank] = own
    exchange.sum_(everyone, name)
    return everyone


def time_steps(args, exchange, images, labels):
    """Warm-up, then the timed steps; returns (this rank's durations, counters before, after)."""
    rank, size = exchange.rank, exchange.size
    net, optimizer = exchange.model, exchange.optimizer
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(args.seed))
    per_epoch = len(images) // (size * args.batch_size)

    def step(i):
        first = ((i % per_epoch) * size + rank) * args.batch_size
        index = order[first:first + args.batch_size]
        x, y = images[index], labels[index]
        start = time.perf_counter()
        optimizer.zero_grad()
        F.cross_entropy(net(x), y).backward()
        optimizer.step()
        return time.perf_counter() - start

    warmup_seconds = sum(step(i) for i in range(args.warmup))
    steps = args.steps
    if args.budget > 0 and args.warmup > 0:  # every rank must time the same number of steps
        mean = torch.tensor([warmup_seconds / args.warmup], dtype=torch.float64)
        exchange.sum_(mean, "bench.warmup")
        fit = int(args.budget / max(float(mean[0]) / size, 1e-9))
        steps = max(min(steps, 10), min(steps, fit))
    before = exchange.counters()
    cpu = time.process_time()
    own = [step(args.warmup + i) for i in range(steps)]
    # CPU of every thread of this process (training, coordinator or gloo, MPI) per timed step.
    cpu_per_step = (time.process_time() - cpu) / steps
    return own, before, exchange.counters(), cpu_per_step


def measure_overlap(args, exchange, images, labels):
    """Interleaves compute-only, communication-only and overlapped steps, each after a barrier, on
    the same batches, without optimizer steps (the model does not change), as examples/03's
    --overlap-steps does. Compute only: zero_grad, forward and backward of a twin of the model
    (the same weights, outside arcreduce). Communication only: the twin's gradients handed to
    the runtime at once in backward's order, under the model's names and with the
    DistributedOptimizer's compression, and waited for. Overlapped: zero_grad, forward and
    backward of the model, whose hooks hand each gradient over as backward produces it, then
    synchronize(). Returns two triples of seconds: each rank's median averaged over the ranks,
    and the median over steps of each step's longest rank (a synchronous job's step time)."""
    arc, net, optimizer = exchange.arc, exchange.model, exchange.optimizer
    rank, size = exchange.rank, exchange.size
    twin = mlp(MODELS[args.model])
    twin.load_state_dict(net.state_dict())
    # Backward's order, under the names the DistributedOptimizer submits: both steps that
    # communicate submit the same tensors, as in examples/03, so the runtime's step learning
    # (what a step holds back and until when) sees one kind of step, not two.
    own = dict(net.named_parameters())
    submitted_as = optimizer.gradient_names()
    twin_params = [(submitted_as[own[name]], p)
                   for name, p in reversed(list(twin.named_parameters()))]
    compression = optimizer.gradient_compression()  # as paired with the optimizer's momentum
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(args.seed + 1))
    per_epoch = len(images) // (size * args.batch_size)
    flag = torch.zeros(1)

    def barrier():
        arc.allreduce_(flag, "bench.overlap.barrier", op=arc.Sum, compression="none")

    times = ([], [], [])
    for i in range(args.overlap_steps):
        first = ((i % per_epoch) * size + rank) * args.batch_size
        index = order[first:first + args.batch_size]
        x, y = images[index], labels[index]
        barrier()
        start = time.perf_counter()
        twin.zero_grad()
        F.cross_entropy(twin(x), y).backward()
        times[0].append(time.perf_counter() - start)
        barrier()
        start = time.perf_counter()
        handles = [arc.allreduce_async_(p.grad, name, arc.Average, compression)
                   for name, p in twin_params]
        for handle in handles:
            arc.synchronize(handle)
        times[1].append(time.perf_counter() - start)
        barrier()
        start = time.perf_counter()
        optimizer.zero_grad()
        F.cross_entropy(net(x), y).backward()
        optimizer.synchronize()
        times[2].append(time.perf_counter() - start)
    everyone = from_every_rank(exchange, times, "bench.overlap.times")
    # statistics.median, not torch's (the lower middle value of an even count).
    mean = [sum(statistics.median(everyone[r, phase].tolist()) for r in range(size)) / size
            for phase in range(3)]
    longest = [statistics.median(everyone[:, phase].max(dim=0).values.tolist())
               for phase in range(3)]
    return mean, longest


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    try:
        images, labels = fashion_mnist.load("train", args.data_dir, args.train_samples)
    except fashion_mnist.DataError as e:
        print(f"torch_step_bench: {e}", file=sys.stderr)
        return 1
    images = images.flatten(1)
    torch.manual_seed(args.seed)
    widths = MODELS[args.model]
    model = mlp(widths)
    sgd = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    exchange = (Arcreduce if args.variant in ("dense", "arctopk") else
                ArcreduceDdp if args.variant.startswith("ddp-hook") else Gloo)(args, model, sgd)
    rank, size = exchange.rank, exchange.size
    if len(images) < size * args.batch_size:
        print("torch_step_bench: fewer examples than one global batch", file=sys.stderr)
        return 2
    if args.variant == "ddp-powersgd":
        args.warmup = max(args.warmup, 2)  # PowerSGD reduces densely before start_powerSGD_iter
    own, before, after, cpu_per_step = time_steps(args, exchange, images, labels)
    steps = len(own)
    times = from_every_rank(exchange, own, "bench.times").max(0).values.tolist()

    parameters = sum(p.numel() for p in model.parameters())
    ring = 2 * (size - 1) / size
    per_step = {"bytes_sent_per_step": None, "collectives_per_step": None,
                "negotiation_collectives_per_step": None, "coordinator_cpu_s_per_step": None,
                "process_cpu_s_per_step": round(cpu_per_step, 6)}
    if before is not None:
        source = "arcreduce stats, rank 0"
        for key, name in (("bytes_sent", "bytes_sent_per_step"),
                          ("collectives", "collectives_per_step"),
                          ("negotiation_collectives", "negotiation_collectives_per_step"),
                          ("coordinator_cpu_seconds", "coordinator_cpu_s_per_step")):
            if before[key] is not None and after[key] is not None:
                per_step[name] = round((after[key] - before[key]) / steps, 6)
        if before.get("held_steps") is not None and after.get("held_steps") is not None:
            per_step["held_steps"] = after["held_steps"] - before["held_steps"]
    elif args.variant == "floor":
        source = "none (no communication)"
        per_step["bytes_sent_per_step"] = 0.0
    else:
        # Backward order, as DDP's buckets and the hook see the gradients.
        shapes = [(n, list(p.shape)) for n, p in reversed(list(model.named_parameters()))]
        floats = (parameters if args.variant == "ddp"
                  else powersgd_payload(shapes, args.powersgd_rank))
        source = f"estimate: ring 2(P-1)/P x {floats * 4} payload bytes"
        per_step["bytes_sent_per_step"] = ring * floats * 4
    if rank == 0:
        median, p90 = median_p90(times)
        result = {"bench": "e2e", "program": "torch_step_bench.py", "variant": args.variant,
                  "model": "mlp " + "-".join(map(str, widths)), "parameters": parameters,
                  "gradient_bytes": 4 * parameters, "batch_per_rank": args.batch_size,
                  "ranks": size,
                  "compressor": {"dense": "none", "arctopk": "arctopk", "ddp-hook": "arctopk",
                                 "ddp-hook-dense": "none"}.get(args.variant),
                  "ratio": args.ratio if args.variant in ("arctopk", "ddp-hook") else 0,
                  "powersgd_rank": args.powersgd_rank if args.variant == "ddp-powersgd" else None,
                  "bucket_cap_mb": args.bucket_cap_mb if args.variant.startswith("ddp") else None,
                  "warmup": args.warmup, "steps": steps, "timing": "per step, the longest rank",
                  "median_s": round(median, 6), "p90_s": round(p90, 6), **per_step,
                  "bytes_source": source, "step_s": [round(t, 6) for t in times]}
        print(json.dumps(result), flush=True)
    if args.overlap_steps:
        mean, longest = measure_overlap(args, exchange, images, labels)
        if rank == 0:
            compute, communication, overlapped = mean
            slow = dict(zip(("compute", "communication", "overlapped"), longest))
            print(json.dumps({
                "bench": "overlap", "program": "torch_step_bench.py", "variant": args.variant,
                "model": "mlp " + "-".join(map(str, widths)), "ranks": size,
                "steps": args.overlap_steps, "timing": "medians, mean over ranks",
                "compute_s": round(compute, 6), "communication_s": round(communication, 6),
                "overlapped_s": round(overlapped, 6),
                "overlapped_over_sum": round(overlapped / (compute + communication), 4),
                "longest_rank": {f"{k}_s": round(v, 6) for k, v in slow.items()},
                "longest_rank_overlapped_over_sum": round(
                    slow["overlapped"] / (slow["compute"] + slow["communication"]), 4)}),
                flush=True)
    exchange.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
