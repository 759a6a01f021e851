#!/usr/bin/env python3
"""Step time of PyTorch DDP (gloo) on a gradient set's shapes: what users run today.

Runs one process per rank under mpirun/arcrun (rank and size from Open MPI's or torchrun's
environment) and times DDP's backward, which ends when every gradient bucket is all-reduced:

  * dense:    DDP's own bucketed all-reduce (average), bucket_cap_mb as given (PyTorch: 25);
  * powersgd: DDP with PyTorch's PowerSGD communication hook (powerSGD_hook, error feedback and
              warm start on, matrix_approximation_rank q, start_powerSGD_iter 2 and a warm-up of
              at least 2 untimed steps so that every timed step is compressed); a bucket's
              hook starts when the previous bucket's has finished (see ordered_powersgd_hook).

The parameters have the shapes printed by `gradient_set_shapes SET` (bench/gradient_sets.h), so
the tensors match compressor_bench's. The loss is sum(p * c) with a fixed random c per
parameter: backward costs one pass and the gradients are random, not low-rank.

Rank 0 prints one result line (see --help for the fields), readable by bench/report scripts:
  ddp <variant> median_ms=.. p90_ms=.. min_ms=.. compute_ms=.. payload_mb=.. ranks=..
payload_mb is the data each rank hands to all-reduce per step (dense: every gradient; PowerSGD:
P and Q of compressed matrices plus uncompressed tensors), before the ring's 2(P-1)/P factor.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # leave examples/04, imported below, clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples", "04_pytorch_fashion_mnist"))
import rendezvous  # noqa: E402  (examples/04's gloo rendezvous)


def rank_and_size():
    for rank_var, size_var in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                               ("PMI_RANK", "PMI_SIZE"), ("RANK", "WORLD_SIZE")):
        if rank_var in os.environ:
            return int(os.environ[rank_var]), int(os.environ[size_var])
    return 0, 1


def read_shapes(args):
    if args.shapes_file:
        with open(args.shapes_file, encoding="utf-8") as f:
            text = f.read()
    else:
        text = subprocess.run([args.shapes_tool, args.set], check=True, capture_output=True,
                              text=True).stdout
    shapes = []
    for line in text.splitlines():
        words = line.split()
        if words:
            shapes.append((words[0], [int(w) for w in words[1:]]))
    if not shapes:
        sys.exit("ddp_bench: no tensor shapes read")
    return shapes  # backward order


def powersgd_payload(shapes, q, min_compression_rate=2.0):
    """Floats PyTorch's powerSGD_hook all-reduces per step: uncompressed tensors whole (1-D, or
    where (n + m) q * rate >= n m), P (n x q) and Q (m x q) for the others."""
    floats = 0
    for _, shape in shapes:
        if len(shape) < 2:
            floats += shape[0] if shape else 1
            continue
        n, m = shape[0], 1
        for d in shape[1:]:
            m *= d
        q_eff = min(n, m, q)
        if (n + m) * q_eff * min_compression_rate < n * m:
            floats += (n + m) * q_eff
        else:
            floats += n * m
    return floats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=["dense", "powersgd"], default="dense")
    parser.add_argument("--rank-q", type=int, default=1, help="PowerSGD matrix_approximation_rank")
    parser.add_argument("--set", default="tiny-transformer-24M")
    parser.add_argument("--shapes-tool", default="gradient_set_shapes",
                        help="path of the gradient_set_shapes program")
    parser.add_argument("--shapes-file", help="read shapes from this file instead")
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0,
                        help="DDP bucket size (PyTorch's default 25)")
    parser.add_argument("--master-addr", help="gloo's rendezvous host (default: MASTER_ADDR, "
                        "else 127.0.0.1 where every rank runs on this host)")
    parser.add_argument("--master-port", help="gloo's rendezvous port (default: MASTER_PORT, "
                        "else 29517)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, size = rank_and_size()
    torch.set_num_threads(args.threads)
    shapes = read_shapes(args)
    rendezvous.init_gloo(dist, rank, size,
                         rendezvous.init_method(address=args.master_addr, port=args.master_port))

    class Params(torch.nn.Module):
        def __init__(self):
            super().__init__()
            forward_order = list(reversed(shapes))
            self.weights = torch.nn.ParameterList(
                [torch.nn.Parameter(torch.zeros(*shape)) for _, shape in forward_order])
            generator = torch.Generator().manual_seed(1000 + rank)
            self.coefficients = [torch.randn(*shape, generator=generator)
                                 for _, shape in forward_order]

        def forward(self):
            return sum((w * c).sum() for w, c in zip(self.weights, self.coefficients))

    model = DDP(Params(), bucket_cap_mb=args.bucket_cap_mb)
    warmup = args.warmup
    if args.variant == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
        state = powerSGD.PowerSGDState(process_group=None,
                                       matrix_approximation_rank=args.rank_q,
                                       start_powerSGD_iter=2, use_error_feedback=True,
                                       warm_start=True)
        # powerSGD_hook chains each bucket's all-reduces in future callbacks. Over NCCL one stream
        # orders them; over gloo, with several buckets in flight, ranks issue them in different
        # orders and gloo aborts ("op.preamble.length <= op.nbytes"). Starting a bucket only when
        # the previous bucket's chain has finished gives every rank the same order.
        previous = []

        def ordered_powersgd_hook(hook_state, bucket):
            if previous:
                previous.pop().wait()
            future = powerSGD.powerSGD_hook(hook_state, bucket)
            previous.append(future)
            return future

        model.register_comm_hook(state, ordered_powersgd_hook)
        warmup = max(warmup, 2)  # PyTorch reduces densely before start_powerSGD_iter

    def step(sync=True):
        for p in model.parameters():
            p.grad = None
        dist.barrier()
        start = time.perf_counter()
        if sync:
            model().backward()
        else:
            with model.no_sync():
                model().backward()
        elapsed = time.perf_counter() - start
        slowest = torch.tensor([elapsed], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        return slowest.item()

    for _ in range(warmup):
        step()
    times = [step() for _ in range(args.repetitions)]
    compute = [step(sync=False) for _ in range(max(3, args.repetitions // 3))]

    elements = 0
    for _, shape in shapes:
        n = 1
        for d in shape:
            n *= d
        elements += n
    floats = elements if args.variant == "dense" else powersgd_payload(shapes, args.rank_q)
    label = "dense" if args.variant == "dense" else f"powersgd-q{args.rank_q}"
    if rank == 0:
        times.sort()
        p90 = times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]
        print(f"ddp {label} median_ms={statistics.median(times) * 1e3:.1f} "
              f"p90_ms={p90 * 1e3:.1f} min_ms={times[0] * 1e3:.1f} "
              f"compute_ms={statistics.median(compute) * 1e3:.1f} "
              f"payload_mb={floats * 4 / 1e6:.3f} ranks={size}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
