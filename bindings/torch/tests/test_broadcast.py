"""broadcast, broadcast_parameters, broadcast_optimizer_state, broadcast_object."""
import pytest
import torch

import arcreduce.torch as arc
from conftest import same_on_all_ranks

ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.uint8,
              torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]


def rank_tensor(rank, shape, dtype):
    g = torch.Generator().manual_seed(rank + 1)
    values = torch.randint(0, 100, shape, generator=g)
    return (values % 2).to(dtype) if dtype == torch.bool else values.to(dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_from_every_root(runtime, dtype):
    for root in range(arc.size()):
        for shape in [(0,), (1,), (), (4, 33)]:
            t = rank_tensor(arc.rank(), shape, dtype)
            arc.broadcast_(t, root, f"bcast.{dtype}.{root}.{shape}")
            assert torch.equal(t, rank_tensor(root, shape, dtype))


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                               torch.nn.Linear(8, 3))


def test_broadcast_parameters_makes_replicas_identical(runtime):
    model = make_model(seed=arc.rank())  # differently initialised replicas
    model(torch.randn(4, 6))  # BatchNorm running statistics (and its int64 counter) differ too
    root = arc.size() - 1
    reference = {k: v.clone() for k, v in make_model(seed=root).state_dict().items()}
    if arc.rank() != root and arc.size() > 1:
        assert not torch.equal(model[0].weight, reference["0.weight"])
    arc.broadcast_parameters(model.state_dict(), root_rank=root)
    root_state = {k: v.clone() for k, v in model.state_dict().items()}
    for name, tensor in model.state_dict().items():
        assert same_on_all_ranks(tensor, "params." + name), name
    # The parameters themselves changed (state_dict tensors share their storage).
    assert same_on_all_ranks(model[0].weight.detach(), "params.direct")
    assert torch.equal(model[3].bias, root_state["3.bias"])


def test_broadcast_parameters_accepts_named_parameters(runtime):
    model = make_model(seed=10 + arc.rank())
    arc.broadcast_parameters(model.named_parameters(), root_rank=0)
    for name, p in model.named_parameters():
        assert same_on_all_ranks(p.detach(), "named." + name), name


def test_broadcast_optimizer_state(runtime):
    model = make_model(seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01 * (arc.rank() + 1))
    if arc.rank() == 0:  # only the root has state
        model(torch.randn(4, 6)).sum().backward()
        optimizer.step()
    arc.broadcast_optimizer_state(optimizer, root_rank=0)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.01)
    state = optimizer.state_dict()["state"]
    assert len(state) == len(list(model.parameters()))
    for index, entry in state.items():
        assert same_on_all_ranks(entry["exp_avg"], f"adam.exp_avg.{index}")


def test_broadcast_object(runtime):
    obj = {"rank": arc.rank(), "values": torch.arange(5) * arc.rank(), "text": "x" * arc.rank()}
    got = arc.broadcast_object(obj, root_rank=arc.size() - 1)
    last = arc.size() - 1
    assert got["rank"] == last and got["text"] == "x" * last
    assert torch.equal(got["values"], torch.arange(5) * last)
