"""allreduce against naive references and torch.distributed's gloo dense average."""
import pytest
import torch

import arcreduce.torch as arc
from conftest import same_on_all_ranks

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def rank_input(rank, shape, dtype, salt):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (1,), (), (7, 3), (1000,)])
def test_dense_average_matches_naive_mean(runtime, dtype, shape):
    salt = DTYPES.index(dtype) * 10 + len(shape)
    t = rank_input(arc.rank(), shape, dtype, salt)
    out = arc.allreduce_(t, f"dense.{dtype}.{shape}", compression="none")
    assert out is t or out.data_ptr() == t.data_ptr()  # in place, no copy
    expected = sum(rank_input(r, shape, dtype, salt).double() for r in range(arc.size()))
    expected = expected / arc.size()
    tol = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 4e-3,
           torch.bfloat16: 3e-2}[dtype]
    torch.testing.assert_close(t.double(), expected, rtol=tol, atol=tol)
    assert same_on_all_ranks(t, f"dense.{dtype}.{shape}")


def test_sum_and_out_of_place(runtime):
    t = torch.full((5,), float(arc.rank() + 1))
    out = arc.allreduce(t, "sum.out_of_place", op=arc.Sum, compression="none")
    assert torch.equal(t, torch.full((5,), float(arc.rank() + 1)))  # input untouched
    assert torch.equal(out, torch.full((5,), float(arc.size() * (arc.size() + 1) // 2)))


def test_dense_equals_gloo_average(runtime, gloo):
    shapes = [(64, 32), (32,), (10, 64), (10,), (3, 3, 2, 2)]
    ours = [rank_input(arc.rank(), s, torch.float32, 7 + i) for i, s in enumerate(shapes)]
    theirs = [t.clone() for t in ours]
    handles = [arc.allreduce_async_(t, f"gloo.{i}", compression=arc.Compression.none)
               for i, t in enumerate(ours)]
    for h in handles:
        arc.synchronize(h)
    for t in theirs:
        gloo.all_reduce(t)
        t /= gloo.get_world_size()
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_arctopk_keeps_ranks_identical(runtime):
    t = rank_input(arc.rank(), (64, 512), torch.float32, 99)
    arc.allreduce_(t, "arctopk.identical",
                   compression=arc.Compression("arctopk", ratio=0.05, error_feedback="none"))
    assert same_on_all_ranks(t, "arctopk.identical")
    assert torch.count_nonzero(t) < t.numel()  # compressed: not the dense mean


def test_poll_and_handles_release_tensors(runtime):
    held = arc._C.held_tensors()
    t = torch.ones(3)
    h = arc.allreduce_async_(t, "poll", compression="none")
    assert arc._C.held_tensors() == held + 1
    arc.synchronize(h)
    assert arc.poll(h)  # unknown (released) handles count as complete
    assert arc._C.held_tensors() == held
    assert torch.equal(t, torch.ones(3))


def test_stats_count_ops(runtime):
    before = arc.stats()["ops_completed"]
    arc.allreduce_(torch.ones(2), "stats.count", compression="none")
    assert arc.stats()["ops_completed"] == before + 1


def test_stats_count_rounds_and_coordinator_cpu(runtime):
    before = arc.stats()
    arc.allreduce_(torch.ones(2), "stats.rounds", compression="none")
    after = arc.stats()
    assert after["cycles"] > before["cycles"]
    assert after["negotiation_collectives"] >= before["negotiation_collectives"]
    assert after["collectives"] - before["collectives"] >= (
        after["negotiation_collectives"] - before["negotiation_collectives"])
    if arc.size() > 1:
        assert after["negotiation_collectives"] > before["negotiation_collectives"]
    assert after["coordinator_cpu_seconds"] >= before["coordinator_cpu_seconds"] > 0
