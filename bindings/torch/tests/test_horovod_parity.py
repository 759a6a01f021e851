"""What Horovod users' code relies on beyond allreduce and broadcast: generated names,
barrier, pre/post-scaling, autograd through the collectives, Horovod's Compression interface,
duplicate names refused at submission, clear refusals of what is not built."""
import os
import tempfile

import pytest
import torch

import arcreduce.torch as arc
from conftest import same_on_all_ranks

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS)
def test_unnamed_ops_get_the_same_generated_names_on_every_rank(runtime, dtype):
    size, r = arc.size(), arc.rank()
    # Several unnamed ops in flight at once: each must meet its own counterpart on every rank.
    tensors = [torch.full((5,), float(r + k), dtype=dtype) for k in range(3)]
    handles = [arc.allreduce_async_(t, op=arc.Sum, compression="none") for t in tensors]
    for k, h in enumerate(handles):
        expected = sum(q + k for q in range(size))
        assert torch.equal(arc.synchronize(h), torch.full((5,), float(expected), dtype=dtype))
    root = torch.arange(4, dtype=dtype) if r == 0 else torch.zeros(4, dtype=dtype)
    assert torch.equal(arc.broadcast(root, 0), torch.arange(4, dtype=dtype))


def test_barrier_orders_what_ranks_do_around_it(runtime):
    path = arc.broadcast_object(tempfile.mktemp(prefix="arcreduce-barrier-"), 0,
                                name="parity.barrier.path")
    if arc.rank() == 0:
        with open(path, "w") as f:
            f.write("written before the barrier")
    arc.barrier()
    with open(path) as f:
        assert f.read() == "written before the barrier"
    arc.barrier()  # nobody reads after rank 0 removed it
    if arc.rank() == 0:
        os.remove(path)


@pytest.mark.parametrize("op", [arc.Sum, arc.Average])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_prescale_and_postscale(runtime, op, dtype):
    size, r = arc.size(), arc.rank()
    t = torch.full((7,), float(r + 1), dtype=dtype)
    out = arc.allreduce(t, f"parity.scale.{op}.{dtype}", op=op, compression="none",
                        prescale_factor=3.0, postscale_factor=0.5)
    total = 3.0 * sum(q + 1 for q in range(size))
    expected = (total if op == arc.Sum else total / size) * 0.5
    torch.testing.assert_close(out, torch.full((7,), expected, dtype=dtype))
    assert torch.equal(t, torch.full((7,), float(r + 1), dtype=dtype))  # out of place
    h = arc.allreduce_async_(t, f"parity.scale_.{op}.{dtype}", op=op, compression="none",
                             postscale_factor=2.0)
    torch.testing.assert_close(arc.synchronize(h), torch.full(
        (7,), 2.0 * (sum(q + 1 for q in range(size)) / (1 if op == arc.Sum else size)),
        dtype=dtype))


@pytest.mark.parametrize("op", [arc.Sum, arc.Average])
def test_allreduce_is_differentiable(runtime, op):
    size, r = arc.size(), arc.rank()
    x = torch.full((3, 2), float(r), requires_grad=True)
    out = arc.allreduce(x, f"parity.grad.{op}", op=op, compression="none")
    assert out.requires_grad
    (out * (r + 1)).sum().backward()  # d loss / d out = r + 1, different on every rank
    weights = sum(q + 1 for q in range(size))
    expected = weights if op == arc.Sum else weights / size
    torch.testing.assert_close(x.grad, torch.full((3, 2), float(expected)))


def test_broadcast_is_differentiable(runtime):
    size, r = arc.size(), arc.rank()
    root = size - 1
    x = torch.full((4,), float(r), requires_grad=True)
    out = arc.broadcast(x, root, "parity.grad.broadcast")
    assert torch.equal(out.detach(), torch.full((4,), float(root)))
    (out * (r + 1)).sum().backward()
    # As Horovod: the root gets the average over ranks of the output's gradient.
    expected = sum(q + 1 for q in range(size)) / size if r == root else 0.0
    torch.testing.assert_close(x.grad, torch.full((4,), expected))


def test_horovod_compression_interface(runtime):
    t = torch.linspace(-1, 1, 9, dtype=torch.float64)
    sent, ctx = arc.Compression.fp16.compress(t)
    assert sent.dtype == torch.float16
    back = arc.Compression.fp16.decompress(sent, ctx)
    assert back.dtype == torch.float64
    torch.testing.assert_close(back, t, rtol=1e-3, atol=1e-3)
    same, ctx = arc.Compression.none.compress(t)
    assert same is t and arc.Compression.none.decompress(same, ctx) is t
    ints, ctx = arc.Compression.fp16.compress(torch.arange(3))
    assert ints.dtype == torch.int64


def test_what_is_not_built_is_refused_clearly(runtime):
    with pytest.raises(NotImplementedError, match=r"'parity.adasum': op Adasum is not supported"):
        arc.allreduce(torch.ones(2), "parity.adasum", op=arc.Adasum)
    with pytest.raises(TypeError, match=r"prescale_factor must be a number"):
        arc.allreduce(torch.ones(2), "parity.factor", prescale_factor="2")
    arc.allreduce_(torch.ones(2), "parity.after_refusals", compression="none")


def test_broadcast_optimizer_state_gives_every_parameter_a_gradient(runtime):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    arc.broadcast_optimizer_state(optimizer, root_rank=0)
    for p in model.parameters():
        assert p.grad is not None and torch.equal(p.grad, torch.zeros_like(p))
    assert same_on_all_ranks(torch.tensor([optimizer.param_groups[0]["lr"]]), "parity.lr")


def test_join_adds_zeros_until_every_rank_joined(runtime):
    """The last rank runs out of data first: the others' averages still divide by every rank,
    their broadcasts fail naming it, and every rank learns who joined last."""
    r, n = arc.rank(), arc.size()
    if n < 2:
        pytest.skip("needs a rank that keeps working")
    early = n - 1
    if r == early:
        last = arc.join()
    else:
        for step in range(3):
            out = arc.allreduce(torch.ones(4), f"parity.join.{step}", compression="none")
            torch.testing.assert_close(out, torch.full((4,), (n - 1) / n))
        with pytest.raises(arc.ArcreduceError, match=rf"rank {early} has joined"):
            arc.broadcast(torch.ones(2), 0, "parity.join.broadcast")
        last = arc.join()
    assert last != early
    assert arc.allgather_object(last, name="parity.join.last") == [last] * n


def test_elastic_has_horovods_api(runtime):
    import arcreduce.torch.elastic as elastic
    for name in ("TorchState", "ObjectState", "ElasticSampler", "run"):
        assert callable(getattr(elastic, name)), name
