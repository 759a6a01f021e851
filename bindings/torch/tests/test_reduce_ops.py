"""Min, Max and Product, and integer and bool tensors: exact results equal to a naive reduction
of every rank's values (each rank rebuilds the others' from their seeds)."""
import pytest
import torch

import arcreduce.torch as arc

INTEGERS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def values(dtype, rank, n):
    g = torch.Generator().manual_seed(1000 + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_floating_point:
        # Small halves: products of up to 3 ranks stay exact even in bfloat16.
        return (torch.randint(-6, 7, (n,), generator=g) * 0.5).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)


def naive(dtype, op, n):
    acc = values(dtype, 0, n)
    for r in range(1, arc.size()):
        x = values(dtype, r, n)
        if op == arc.Sum:
            acc = acc + x
        elif op == arc.Product:
            acc = acc * x if dtype != torch.bool else acc & x
        elif op == arc.Min:
            acc = torch.minimum(acc, x)
        else:
            acc = torch.maximum(acc, x)
    return acc.to(dtype)  # integer sums and products wrap as torch's do


@pytest.mark.parametrize("n", [0, 1, 37])
@pytest.mark.parametrize("op", [arc.Sum, arc.Min, arc.Max, arc.Product])
@pytest.mark.parametrize("dtype", INTEGERS + [torch.bool] + FLOATS)
def test_every_dtype_and_op_against_a_naive_reduction(runtime, dtype, op, n):
    if dtype == torch.bool and op == arc.Sum:
        pytest.skip("bool takes Min, Max and Product (test_errors.py)")
    name = f"ops.{dtype}.{op}.{n}"
    out = arc.allreduce(values(dtype, arc.rank(), n), name, op=op,
                        compression=arc.Compression.none)
    assert out.dtype == dtype
    assert torch.equal(out, naive(dtype, op, n)), (out, naive(dtype, op, n))


def test_integer_ops_ignore_the_jobs_compressor(runtime):
    # The job's default compressor (ARC-Top-K) applies to float gradients, never to integers.
    counts = torch.full((1000,), arc.rank() + 1, dtype=torch.int64)
    arc.allreduce_(counts, "ops.counts", op=arc.Sum)
    assert torch.equal(counts, torch.full((1000,), arc.size() * (arc.size() + 1) // 2))
    mins = torch.full((300, 100), float(arc.rank()))
    arc.allreduce_(mins, "ops.float_min", op=arc.Min)
    assert torch.equal(mins, torch.zeros(300, 100))
