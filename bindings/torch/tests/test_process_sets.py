"""Process sets of arcreduce.torch: ops among the even and the odd ranks at once, against results
built here from the members' inputs; DistributedOptimizer on a set; the errors. At 1 rank the one
possible set is every rank, which add_process_set refuses (it is global_process_set)."""
import pytest
import torch

import arcreduce.torch as arc

DTYPES = [torch.float32, torch.float64, torch.float16, torch.int32, torch.int64]
NONE = arc.Compression.none  # exact results to compare with (compression has tests of its own)


@pytest.fixture
def sets(runtime):
    """(this rank's set, its ranks, the other set or None), removed afterwards on every rank."""
    if arc.size() < 2:
        pytest.skip("needs 2 ranks")
    even = arc.add_process_set([r for r in range(arc.size()) if r % 2 == 0])
    odd = arc.add_process_set([r for r in range(arc.size()) if r % 2 == 1])
    mine, other = (even, odd) if arc.rank() % 2 == 0 else (odd, even)
    yield mine, mine.ranks, other
    assert arc.remove_process_set(odd) and arc.remove_process_set(even)


def value(r, shape, dtype):
    return (torch.arange(torch.Size(shape).numel(), dtype=torch.float64).reshape(shape) % 9
            + 10 * r).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (1,), (17,), (5, 3)])
def test_allreduce_sums_and_averages_over_members(sets, dtype, shape):
    mine, ranks, _ = sets
    r = arc.rank()
    summed = arc.allreduce(value(r, shape, dtype), op=arc.Sum, compression=NONE, process_set=mine)
    expected = sum(value(q, shape, torch.float64) for q in ranks)
    assert summed.dtype == dtype and torch.equal(summed.double(), expected)
    averaged = arc.allreduce(value(r, shape, dtype), compression=NONE, process_set=mine)
    want = expected / len(ranks)
    if not dtype.is_floating_point:
        want = torch.trunc(want)  # Horovod's integer average
    assert torch.allclose(averaged.double(), want, rtol=1e-2, atol=1e-2)


def test_set_helpers(sets):
    mine, ranks, other = sets
    assert mine.included() and not other.included()
    assert mine.size() == len(ranks) and mine.rank() == ranks.index(arc.rank())
    assert other.rank() == -1
    assert arc.global_process_set.ranks == list(range(arc.size()))
    assert arc.global_process_set.included()


def test_broadcast_root_is_a_rank_of_the_job(sets):
    mine, ranks, _ = sets
    for root in ranks:
        out = arc.broadcast(torch.full((4,), arc.rank()), root, process_set=mine)
        assert torch.equal(out, torch.full((4,), root))
    obj = arc.broadcast_object({"from": arc.rank()} if arc.rank() == ranks[-1] else None,
                               root_rank=ranks[-1], process_set=mine)
    assert obj == {"from": ranks[-1]}
    outsider = 1 if arc.rank() % 2 == 0 else 0
    with pytest.raises(arc.ArcreduceError, match="is not in process set"):
        arc.broadcast(torch.zeros(2), outsider, process_set=mine)


def test_allgather_alltoall_reducescatter_in_set_order(sets):
    mine, ranks, _ = sets
    me = mine.rank()
    gathered = arc.allgather(torch.full((me + 1, 2), arc.rank()), process_set=mine)
    assert torch.equal(gathered,
                       torch.cat([torch.full((k + 1, 2), q) for k, q in enumerate(ranks)]))
    n = len(ranks)
    # Set rank k sends one row to each member: its own rank of the job.
    out, received = arc.alltoall(torch.full((n, 1), arc.rank()), [1] * n, process_set=mine)
    assert torch.equal(out.flatten(), torch.tensor(ranks)) and received.tolist() == [1] * n
    scattered = arc.reducescatter(torch.ones(2 * n, 3), op=arc.Sum, process_set=mine)
    assert torch.equal(scattered, torch.full((2, 3), float(n)))
    arc.barrier(process_set=mine)


def test_grouped_and_autograd_in_a_set(sets):
    mine, ranks, _ = sets
    outs = arc.grouped_allreduce([torch.ones(3), torch.full((2,), 2.0)], op=arc.Sum,
                                 compression=NONE, process_set=mine)
    assert torch.equal(outs[0], torch.full((3,), float(len(ranks))))
    assert torch.equal(outs[1], torch.full((2,), 2.0 * len(ranks)))
    x = torch.ones(4, requires_grad=True)
    arc.allreduce(x, op=arc.Sum, compression=NONE, process_set=mine).sum().backward()
    assert torch.equal(x.grad, torch.full((4,), float(len(ranks))))
    y = torch.ones(2, 2, requires_grad=True)
    arc.allgather(y, process_set=mine).sum().backward()
    assert torch.equal(y.grad, torch.ones(2, 2))  # Horovod: the average of every member's


def test_ops_of_the_sets_and_the_job_interleave(sets):
    mine, ranks, _ = sets
    h_set = arc.allreduce_async(torch.ones(10), "ps.interleave", op=arc.Sum, compression=NONE,
                                process_set=mine)
    h_all = arc.allreduce_async(torch.ones(10), "ps.interleave", op=arc.Sum,
                                compression=NONE)  # the same name, in another set
    assert torch.equal(arc.synchronize(h_all), torch.full((10,), float(arc.size())))
    assert torch.equal(arc.synchronize(h_set), torch.full((10,), float(len(ranks))))
    assert arc.stats(mine)["ops_completed"] > 0


def test_rank_outside_the_set_is_refused(sets):
    _, _, other = sets
    with pytest.raises(arc.ArcreduceError, match="is not in process set"):
        arc.allreduce(torch.ones(2), process_set=other)


def test_distributed_optimizer_on_the_even_ranks(sets):
    mine, ranks, other = sets
    even = mine if arc.rank() % 2 == 0 else other
    torch.manual_seed(arc.rank())  # different data, different starting weights per rank
    model = torch.nn.Linear(4, 2)
    arc.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   compression="none", process_set=even)
    model(torch.randn(8, 4)).pow(2).sum().backward()
    opt.step()
    w = model.weight.detach().clone()
    gathered = arc.allgather(w.unsqueeze(0), process_set=mine)
    if mine is even:  # averaged gradients: every even rank holds the same weights
        assert all(torch.equal(g, w) for g in gathered)
    elif len(ranks) > 1:  # the odd ranks stepped on their own gradients
        assert not torch.equal(gathered[0], gathered[1])


def test_bad_sets_raise_value_error_on_every_rank(runtime):
    with pytest.raises(ValueError, match="process set 0"):
        arc.add_process_set(list(range(arc.size())))
    with pytest.raises(ValueError, match="not a rank of the job"):
        arc.add_process_set([arc.size()])
    with pytest.raises(ValueError, match="at least one rank"):
        arc.add_process_set([])
    with pytest.raises(ValueError, match="not registered"):
        arc.allreduce(torch.ones(1), process_set=arc.ProcessSet([0]))
    assert not arc.remove_process_set(arc.global_process_set)
    if arc.size() >= 2:
        first = arc.add_process_set([0])
        with pytest.raises(ValueError, match="has these ranks already"):
            arc.add_process_set([0])
        assert arc.remove_process_set(first) and first.process_set_id is None
        assert not arc.remove_process_set(first)
