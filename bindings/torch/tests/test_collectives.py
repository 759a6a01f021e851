"""allgather, alltoall, reducescatter and the grouped ops of arcreduce.torch against results
built here from every rank's inputs (each rank can rebuild the others')."""
import pytest
import torch

import arcreduce.torch as arc

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.uint8, torch.int8,
          torch.int16, torch.int32, torch.int64, torch.bool]


def block(r, rows, cols=3, dtype=torch.float32):
    """Rank r's rows: values that name the rank, the row and the column."""
    t = torch.arange(rows * cols, dtype=torch.float64).reshape(rows, cols) + 100 * (r + 1)
    return (t % 2).to(dtype) if dtype == torch.bool else t.to(dtype)


def own_rows(r):
    return 0 if r == 1 else r + 1  # rank 1 contributes nothing


@pytest.mark.parametrize("dtype", DTYPES)
def test_allgather_concatenates_every_rank_in_order(runtime, dtype):
    out = arc.allgather(block(arc.rank(), own_rows(arc.rank()), dtype=dtype),
                        f"coll.gather.{dtype}")
    expected = torch.cat([block(r, own_rows(r), dtype=dtype) for r in range(arc.size())])
    assert out.dtype == dtype and torch.equal(out, expected)


def test_allgather_async_grouped_and_objects(runtime):
    r, n = arc.rank(), arc.size()
    h = arc.allgather_async(torch.tensor([r]))
    assert torch.equal(arc.synchronize(h), torch.arange(n))
    outs = arc.grouped_allgather([torch.full((1,), r), torch.full((2, 2), r)])
    assert torch.equal(outs[0], torch.arange(n))
    assert torch.equal(outs[1], torch.arange(n).repeat_interleave(2).unsqueeze(1).expand(-1, 2))
    objects = arc.allgather_object({"rank": r, "name": "x" * r})
    assert objects == [{"rank": q, "name": "x" * q} for q in range(n)]


@pytest.mark.parametrize("with_splits", ["list", "tensor", "none"])
def test_alltoall_sends_each_rank_its_rows(runtime, with_splits):
    r, n = arc.rank(), arc.size()
    if with_splits == "none":
        splits = [2] * n
    else:
        splits = [(r + j) % 3 for j in range(n)]
    parts = [block(r * 10 + j, splits[j]) for j in range(n)]  # rows for rank j
    arg = {"list": splits, "tensor": torch.tensor(splits), "none": None}[with_splits]
    sent_to_me = [(q + r) % 3 if with_splits != "none" else 2 for q in range(n)]
    if arg is None:  # as Horovod: the received splits only where splits were given
        out = arc.alltoall(torch.cat(parts), arg, name=f"coll.a2a.{with_splits}")
    else:
        out, received = arc.alltoall(torch.cat(parts), arg, name=f"coll.a2a.{with_splits}")
        assert received.tolist() == sent_to_me
    assert torch.equal(out, torch.cat([block(q * 10 + r, sent_to_me[q]) for q in range(n)]))


@pytest.mark.parametrize("op", [arc.Sum, arc.Average, arc.Max])
def test_reducescatter_keeps_this_ranks_block(runtime, op):
    r, n = arc.rank(), arc.size()
    rows = 7  # uneven blocks at 2 and 3 ranks
    inputs = [block(q, rows, 2, torch.float64) * (q + 1) for q in range(n)]
    stacked = torch.stack(inputs)
    total = {arc.Sum: stacked.sum(0), arc.Average: stacked.mean(0),
             arc.Max: stacked.max(0).values}[op]
    counts = [rows // n + (1 if q < rows % n else 0) for q in range(n)]
    first = sum(counts[:r])
    out = arc.reducescatter(inputs[r], f"coll.rs.{op}", op=op)
    torch.testing.assert_close(out, total[first:first + counts[r]])
    ints = arc.reducescatter(torch.full((n * 2,), r + 1, dtype=torch.int32), op=arc.Sum,
                             postscale_factor=1)
    assert torch.equal(ints, torch.full((2,), n * (n + 1) // 2, dtype=torch.int32))
    scaled = arc.grouped_reducescatter([torch.ones(n, 2)], op=arc.Sum, prescale_factor=2.0,
                                       postscale_factor=0.5)
    assert torch.equal(scaled[0], torch.full((1, 2), float(n)))


def test_grouped_allreduce(runtime):
    r, n = arc.rank(), arc.size()
    tensors = [torch.full((3,), float(r)), torch.full((2, 2), 1.0)]
    outs = arc.grouped_allreduce(tensors, op=arc.Sum, compression="none")
    assert torch.equal(outs[0], torch.full((3,), float(n * (n - 1) // 2)))
    assert torch.equal(outs[1], torch.full((2, 2), float(n)))
    assert torch.equal(tensors[0], torch.full((3,), float(r)))  # out of place
    handle = arc.grouped_allreduce_async_(tensors, compression="none")
    results = arc.synchronize(handle)
    assert arc.poll(handle) and results[0] is tensors[0]
    assert torch.equal(tensors[1], torch.ones(2, 2))


def test_gradients_flow_through_allgather_alltoall_and_reducescatter(runtime):
    r, n = arc.rank(), arc.size()
    weights = [float(q + 1) for q in range(n)]  # rank q's loss weight
    x = torch.ones(2, 3, requires_grad=True)
    (arc.allgather(x, "coll.grad.gather") * weights[r]).sum().backward()
    # Every rank's output holds x: as Horovod, the average of their gradients.
    torch.testing.assert_close(x.grad, torch.full((2, 3), sum(weights) / n))
    y = torch.ones(n * 2, requires_grad=True)
    out = arc.alltoall(y, name="coll.grad.a2a")
    (out * weights[r]).sum().backward()
    # Rows sent to rank j were used in j's loss: their gradient is j's weight.
    assert torch.equal(y.grad, torch.tensor(weights).repeat_interleave(2))
    z = torch.ones(n, 2, requires_grad=True)
    (arc.reducescatter(z, "coll.grad.rs", op=arc.Average) * weights[r]).sum().backward()
    # Row j went to rank j: as Horovod, the allgather of the gradients (Sum: times n).
    torch.testing.assert_close(z.grad, torch.tensor(weights).unsqueeze(1).expand(n, 2))
    z.grad = None
    (arc.reducescatter(z, "coll.grad.rs_sum", op=arc.Sum) * weights[r]).sum().backward()
    torch.testing.assert_close(z.grad, torch.tensor(weights).unsqueeze(1).expand(n, 2) * n)


def test_errors_reach_every_rank(runtime):
    r, n = arc.rank(), arc.size()
    if n > 1:
        cols = 4 if r == n - 1 else 3
        with pytest.raises(arc.ArcreduceError, match=r"'coll.bad_shape' was submitted "
                                                     r"differently across ranks \(shape"):
            arc.allgather(torch.zeros(2, cols), "coll.bad_shape")
        splits = [5] * n if r == 0 else [1] * n  # bad on rank 0: ValueError there, and the
        if r == 0:                               # others' op fails with its reason
            with pytest.raises(ValueError, match=r"summing to the first dimension"):
                arc.alltoall(torch.zeros(n), splits, name="coll.bad_splits")
        else:
            with pytest.raises(arc.ArcreduceError, match=r"'coll.bad_splits' was refused on "
                                                         r"rank 0: ValueError"):
                arc.alltoall(torch.zeros(n), splits, name="coll.bad_splits")
    with pytest.raises(arc.ArcreduceError, match=r"a scalar has none"):
        arc.allgather(torch.tensor(1.0), "coll.scalar")
    with pytest.raises(TypeError, match=r"torch.complex64"):
        arc.allgather(torch.zeros(2, dtype=torch.complex64), "coll.complex")
    arc.allgather(torch.zeros(1), "coll.after_errors")
