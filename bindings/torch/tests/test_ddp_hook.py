"""arcreduce as DistributedDataParallel's communication hook (register_ddp_hook): with compressor
none it trains as DDP without a hook; every compressor trains through it, on each parameter's
own shape; DDP's features (no_sync, find_unused_parameters, static_graph,
gradient_as_bucket_view, bucket_cap_mb and the bucket rebuild, several dtypes, join()); the
pairing with the optimizer's momentum; the Future completed by the runtime; the refusals."""
import contextlib

import pytest
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import arcreduce.torch as arc
from conftest import same_on_all_ranks
from test_optimizer import make_model, rank_batch

F = torch.nn.functional


def train(model, optimizer, steps, first=0, accumulate=1):
    """SGD steps on each rank's own batches; with accumulate=k, k-1 backward passes under
    no_sync() before the one that reduces. Returns the losses."""
    losses = []
    for step in range(first, first + steps):
        optimizer.zero_grad()
        for micro in range(accumulate):
            x, y = rank_batch(arc.rank(), 10 * step + micro)
            last = micro == accumulate - 1
            with contextlib.nullcontext() if last else model.no_sync():
                loss = F.cross_entropy(model(x), y)  # no_sync() covers the forward too
                loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def assert_same_training(hooked, plain, hooked_losses, plain_losses, label):
    torch.testing.assert_close(torch.tensor(hooked_losses), torch.tensor(plain_losses),
                               rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(hooked.module.named_parameters(), plain.module.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6,
                                   msg=lambda m, name=name: f"{label} {name}: {m}")
        assert same_on_all_ranks(p.detach(), f"ddp.{label}.{name}"), name


# DDP's options, each trained with the hook (compressor none) against DDP without one.
FEATURES = {
    "default": {},
    "gradient_as_bucket_view": dict(gradient_as_bucket_view=True),
    "static_graph": dict(static_graph=True),
    # Buckets of about 10 KB: several per step, rebuilt in the order of the first backward.
    "small_buckets": dict(bucket_cap_mb=0.01),
    "find_unused_parameters": dict(find_unused_parameters=True),
}


@pytest.mark.parametrize("feature", list(FEATURES))
def test_hook_with_none_trains_as_ddp_without_hook(runtime, gloo, feature):
    options = FEATURES[feature]
    plain = DDP(make_model(seed=3), **options)
    hooked = DDP(make_model(seed=3), **options)
    sgd = dict(lr=0.05, momentum=0.9)
    plain_opt = torch.optim.SGD(plain.parameters(), **sgd)
    hooked_opt = torch.optim.SGD(hooked.parameters(), **sgd)
    state = arc.register_ddp_hook(hooked, hooked_opt, compression="none",
                                  prefix=f"ddp.none.{feature}.")
    assert not state.momentum_in_runtime()  # nothing compressed: the SGD keeps its momentum
    plain_losses = train(plain, plain_opt, 4)
    hooked_losses = train(hooked, hooked_opt, 4)
    assert_same_training(hooked, plain, hooked_losses, plain_losses, feature)


def test_no_sync_accumulation_equals_ddp(runtime, gloo, monkeypatch):
    plain = DDP(make_model(seed=4))
    hooked = DDP(make_model(seed=4))
    plain_opt = torch.optim.SGD(plain.parameters(), lr=0.05)
    hooked_opt = torch.optim.SGD(hooked.parameters(), lr=0.05)
    arc.register_ddp_hook(hooked, hooked_opt, compression="none", prefix="ddp.no_sync.")
    submitted = []
    submit = arc._C.bucket_allreduce_async

    def counting(buffer, names, *args):
        submitted.extend(names)
        return submit(buffer, names, *args)
    monkeypatch.setattr(arc._C, "bucket_allreduce_async", counting)
    plain_losses = train(plain, plain_opt, 3, accumulate=3)
    hooked_losses = train(hooked, hooked_opt, 3, accumulate=3)
    # One reduction of each of the 6 parameters per step, none in the no_sync() passes.
    assert len(submitted) == 3 * 6 and len(set(submitted)) == 6
    assert_same_training(hooked, plain, hooked_losses, plain_losses, "no_sync")


def test_join_with_uneven_inputs_equals_ddp(runtime, gloo):
    """DDP's join(): rank r runs 2 + r steps; the ranks that ran out shadow the others'
    reductions through the hook with zero buckets under the same names."""
    def run(hooked):
        model = DDP(make_model(seed=12))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        if hooked:
            arc.register_ddp_hook(model, optimizer, compression="none", prefix="ddp.join.")
        with model.join():
            losses = train(model, optimizer, 2 + arc.rank())
        return model, losses
    plain, plain_losses = run(False)
    hooked, hooked_losses = run(True)
    assert_same_training(hooked, plain, hooked_losses, plain_losses, "join")


def test_process_set_for_ddp_on_a_subgroup(runtime, gloo):
    """DDP over a group of ranks 0 and 1, the hook on the process set of the same ranks, trains
    as DDP without a hook over that group; the global set against that group is refused."""
    if arc.size() < 3:
        pytest.skip("a process set is a strict subset of the job's ranks")
    ps = arc.add_process_set([0, 1])
    group = gloo.new_group([0, 1])
    try:
        if arc.rank() < 2:
            plain = DDP(make_model(seed=14), process_group=group)
            hooked = DDP(make_model(seed=14), process_group=group)
            with pytest.raises(ValueError, match="has 2 ranks but the arcreduce process set"):
                arc.register_ddp_hook(hooked, compression="none", prefix="ddp.subgroup.")
            plain_opt = torch.optim.SGD(plain.parameters(), lr=0.05, momentum=0.9)
            hooked_opt = torch.optim.SGD(hooked.parameters(), lr=0.05, momentum=0.9)
            arc.register_ddp_hook(hooked, hooked_opt, compression="none", process_set=ps,
                                  prefix="ddp.subgroup.")
            plain_losses = train(plain, plain_opt, 3)
            hooked_losses = train(hooked, hooked_opt, 3)
            torch.testing.assert_close(torch.tensor(hooked_losses), torch.tensor(plain_losses),
                                       rtol=1e-5, atol=1e-6)
            for p, q in zip(hooked.parameters(), plain.parameters()):
                torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
    finally:
        arc.remove_process_set(ps)


def test_two_models_trained_in_turn_are_not_held_back(runtime, gloo):
    """Two DDP models with hooks, their backward passes in turn (a GAN's generator and
    discriminator): the runtime learns a step of both models' names, and each backward waits
    for its own only. The hook tells the runtime at the last bucket that DDP waits; otherwise
    each model's small tensors wait for the other's names until the hold's limit, which grows
    with every step (seconds by the third)."""
    import time

    models = [DDP(make_model(seed=15 + k)) for k in range(2)]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]
    for k, (m, o) in enumerate(zip(models, optimizers)):
        arc.register_ddp_hook(m, o, compression="none", prefix=f"ddp.turn{k}.")
    start = time.perf_counter()
    for step in range(8):
        for m, o in zip(models, optimizers):
            train(m, o, 1, first=step)
    assert time.perf_counter() - start < 15


def test_bucket_rebuild_keeps_names_and_shapes(runtime, gloo):
    model = DDP(make_model(seed=5), bucket_cap_mb=0.01)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    state = arc.register_ddp_hook(model, optimizer, compression="none", prefix="ddp.rebuild.")
    expected = {"ddp.rebuild." + name: tuple(p.shape)
                for name, p in model.module.named_parameters()}
    assert set(state.gradient_names().values()) == set(expected)
    for step in range(3):  # DDP rebuilds its buckets in the second iteration
        state._shapes.clear()
        train(model, optimizer, 1, first=step)
        assert state.submitted_shapes() == expected


class Branches(torch.nn.Module):
    """Two heads: even ranks use `a`, odd ranks `b` (a parameter without a gradient on some
    ranks); `never` has no gradient anywhere."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.body = torch.nn.Linear(20, 64)
        self.a = torch.nn.Linear(64, 4)
        self.b = torch.nn.Linear(64, 4)
        self.never = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = F.relu(self.body(x))
        return self.a(h) if arc.rank() % 2 == 0 else self.b(h)


def test_unused_parameters_on_some_ranks_equal_ddp(runtime, gloo):
    plain = DDP(Branches(seed=6), find_unused_parameters=True)
    hooked = DDP(Branches(seed=6), find_unused_parameters=True)
    plain_opt = torch.optim.SGD(plain.parameters(), lr=0.05, momentum=0.9)
    hooked_opt = torch.optim.SGD(hooked.parameters(), lr=0.05, momentum=0.9)
    arc.register_ddp_hook(hooked, hooked_opt, compression="none", prefix="ddp.unused.")
    plain_losses = train(plain, plain_opt, 3)
    hooked_losses = train(hooked, hooked_opt, 3)
    assert_same_training(hooked, plain, hooked_losses, plain_losses, "unused")
    assert hooked.module.never.weight.grad is None  # unused everywhere: DDP leaves it alone


class Mixed(torch.nn.Module):
    """float64, float32 and float16 parameters: DDP puts each dtype in buckets of its own."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.first = torch.nn.Linear(20, 64).double()
        self.second = torch.nn.Linear(64, 4)
        self.scale = torch.nn.Parameter(torch.ones(4, dtype=torch.float16))

    def forward(self, x):
        h = F.relu(self.first(x.double())).float()
        return self.second(h) * self.scale.float()


def test_parameters_of_several_dtypes(runtime, gloo):
    hooked = DDP(Mixed(seed=7))
    optimizer = torch.optim.SGD(hooked.parameters(), lr=0.05)
    arc.register_ddp_hook(hooked, optimizer, compression="none", prefix="ddp.dtypes.")
    reference = Mixed(seed=7)
    x, y = rank_batch(arc.rank(), 0)
    F.cross_entropy(hooked(x), y).backward()
    F.cross_entropy(reference(x), y).backward()
    for (name, p), q in zip(hooked.module.named_parameters(), reference.parameters()):
        assert p.grad.dtype == p.dtype
        expected = q.grad.double()
        gloo.all_reduce(expected)
        expected /= gloo.get_world_size()
        tolerance = dict(rtol=2e-2, atol=1e-3) if p.dtype == torch.float16 else {}
        torch.testing.assert_close(p.grad.double(), expected, **tolerance,
                                   msg=lambda m, name=name: f"{name}: {m}")
    optimizer.step()
    for name, p in hooked.module.named_parameters():
        assert same_on_all_ranks(p.detach(), "ddp.dtypes." + name), name


COMPRESSORS = ["fp16", "topk", "randk", "arctopk", "oktopk", "powersgd"]


@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_every_compressor_trains_through_the_hook(runtime, gloo, compressor):
    model = DDP(make_model(seed=8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    # A ratio of its own: not the job's compression, so ARCREDUCE_AUTO_COMPRESS's choice (made
    # once per runtime, for the tensors of the job's compression) is left to the tests after.
    ratio = 0.05 if compressor in ("topk", "randk", "arctopk") else None
    state = arc.register_ddp_hook(model, optimizer, prefix=f"ddp.{compressor}.",
                                  compression=arc.Compression(compressor, ratio=ratio))
    before = arc.stats()["compressors"].get(compressor, {}).get("tensors", 0)
    first = model.module[2].weight.detach().clone()
    losses = train(model, optimizer, 4)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert not torch.equal(model.module[2].weight, first)
    # The 64 x 256 matrix went to the compressor as a matrix, not as a slice of a flat bucket.
    assert state.submitted_shapes()[f"ddp.{compressor}.2.weight"] == (256, 64)
    assert arc.stats()["compressors"][compressor]["tensors"] > before
    for name, p in model.module.named_parameters():
        assert same_on_all_ranks(p.detach(), f"ddp.{compressor}.{name}"), name


def test_efm_takes_over_sgd_momentum_once(runtime, gloo):
    """ARC-Top-K at ratio 1 with efm: the SGD's momentum goes to the runtime and step() runs
    without it, so training matches heavy-ball SGD on DDP's dense average (momentum applied
    once). With masking (CTest's sessions other than the 3-rank one) the tensors ARC-Top-K
    sends densely have their velocity cleared where sent: plain SGD for them."""
    settings = arc.config()
    model = DDP(make_model(seed=9))
    reference = DDP(make_model(seed=9))

    def momentum_of(q):
        selected = q.dim() >= 2 and q.numel() >= 16384
        return 0.9 if selected or not settings["ef_masking"] else 0.0
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    state = arc.register_ddp_hook(
        model, optimizer, compression=arc.Compression("arctopk", ratio=1.0), prefix="ddp.efm.")
    assert state.gradient_compression().error_feedback == "efm"
    assert state.momentum_in_runtime()
    assert isinstance(optimizer, torch.optim.SGD)
    heavy_ball = torch.optim.SGD([{"params": [q], "momentum": momentum_of(q)}
                                  for q in reference.parameters()], lr=0.05)
    train(model, optimizer, 4)
    train(reference, heavy_ball, 4)
    assert all(g["momentum"] == 0.9 for g in optimizer.param_groups)  # the user's value stays
    for (name, p), q in zip(model.module.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_pairing_with_the_optimizer(runtime, gloo, monkeypatch):
    def hook(optimizer=None, compression=None, model=None):
        model = model or DDP(make_model(seed=10))
        return arc.register_ddp_hook(model, optimizer, compression=compression,
                                     prefix="ddp.pairing.")
    efm = arc.Compression("arctopk", ratio=0.1, error_feedback="efm")
    # Without the optimizer the default efm becomes ef14: the momentum stays with the optimizer.
    assert hook().gradient_compression().error_feedback == "ef14"
    assert not hook().momentum_in_runtime()
    with pytest.raises(ValueError, match=r"'efm' .* pass optimizer="):
        hook(compression=efm)
    monkeypatch.setenv("ARCREDUCE_ERROR_FEEDBACK", "efm")
    with pytest.raises(ValueError, match=r"'efm' .* pass optimizer="):
        hook()
    monkeypatch.delenv("ARCREDUCE_ERROR_FEEDBACK")
    params = make_model(seed=10).parameters
    adam = hook(torch.optim.Adam(params(), lr=1e-3), efm)
    assert adam.gradient_compression().error_feedback == "none"  # as DistributedOptimizer
    assert hook(torch.optim.SGD(params(), lr=0.1), efm).gradient_compression().error_feedback \
        == "ef14"
    with pytest.raises(ValueError, match=r"ARCREDUCE_EF_ETA=0.1 .*momentum 0.95"):
        hook(torch.optim.SGD(params(), lr=0.1, momentum=0.95), efm)
    with pytest.raises(ValueError, match=r"'ef21m' .* diverges stacked on SGD momentum 0.9"):
        hook(torch.optim.SGD(params(), lr=0.1, momentum=0.9),
             arc.Compression("arctopk", error_feedback="ef21m"))
    sgd = torch.optim.SGD(params(), lr=0.1, momentum=0.9)
    torch.optim.lr_scheduler.StepLR(sgd, step_size=1)
    with pytest.raises(ValueError, match="before creating the scheduler"):
        hook(sgd, efm)
    # A scheduler made afterwards wraps the step() that hands the momentum over.
    sgd = torch.optim.SGD(params(), lr=0.1, momentum=0.9)
    assert hook(sgd, efm).momentum_in_runtime()
    torch.optim.lr_scheduler.StepLR(sgd, step_size=1)


def test_refusals(runtime, gloo):
    with pytest.raises(TypeError, match="DistributedDataParallel"):
        arc.register_ddp_hook(make_model(seed=11))
    model = DDP(make_model(seed=11))
    with pytest.raises(ValueError, match="op must be"):
        arc.register_ddp_hook(model, op=arc.Min)
    with pytest.raises(NotImplementedError, match="Adasum"):
        arc.register_ddp_hook(model, op=arc.Adasum)
    distributed = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                           named_parameters=model.module.named_parameters(),
                                           prefix="ddp.refused.")
    with pytest.raises(ValueError, match="DistributedOptimizer"):
        arc.register_ddp_hook(model, distributed)
    sparse = DDP(torch.nn.Sequential(torch.nn.Embedding(10, 4, sparse=True)))
    with pytest.raises(TypeError, match="sparse=True"):
        arc.register_ddp_hook(sparse)


def test_future_completed_by_the_runtime(runtime):
    """The Future of a bucket holds the buffer once its ops completed, each view reduced with its
    own shape; an op's error fails it."""
    buffer = torch.arange(10, dtype=torch.float32) * (arc.rank() + 1)
    future = arc._C.bucket_allreduce_async(buffer, ["ddp.future.a", "ddp.future.b"], [0, 4],
                                           [[2, 2], [6]], 1, "none", None, None, None, 0)
    assert isinstance(future, torch._C.Future)  # torch.futures.Future's base
    result = future.wait()
    assert result is buffer or result.data_ptr() == buffer.data_ptr()
    mean = sum(r + 1 for r in range(arc.size())) / arc.size()
    torch.testing.assert_close(buffer, torch.arange(10, dtype=torch.float32) * mean)
    bad = arc._C.bucket_allreduce_async(torch.zeros(4), ["ddp.future.bad"], [0], [[4]], 1,
                                        "no-such-compressor", None, None, None, 0)
    with pytest.raises(RuntimeError, match="no-such-compressor"):
        bad.wait()
    with pytest.raises(ValueError, match="outside its DDP bucket"):
        arc._C.bucket_allreduce_async(torch.zeros(4), ["ddp.future.out"], [2], [[4]], 1, "none",
                                      None, None, None, 0)


def test_runtime_error_raises_from_backward(runtime, gloo):
    """An op the runtime fails (here an unknown compressor, refused on every rank) fails the
    bucket's Future, and DDP raises it from backward() with the runtime's message."""
    model = DDP(make_model(seed=13))
    arc.register_ddp_hook(model, compression="no-such-compressor", prefix="ddp.failing.")
    x, y = rank_batch(arc.rank(), 0)
    with pytest.raises(RuntimeError, match="no-such-compressor"):
        F.cross_entropy(model(x), y).backward()


def test_torch_distributed_env_agrees_on_every_rank(runtime, gloo):
    env = arc.torch_distributed_env()
    assert env["RANK"] == str(arc.rank()) and env["WORLD_SIZE"] == str(arc.size())
    assert env["LOCAL_RANK"] == str(arc.local_rank())
    everyone = arc.allgather_object((env["MASTER_ADDR"], env["MASTER_PORT"]),
                                    name="ddp.env.agree")
    assert len(set(everyone)) == 1
    if arc.local_size() == arc.size():
        assert env["MASTER_ADDR"] == "127.0.0.1"  # one host
    assert gloo.get_rank() == arc.rank() and gloo.get_world_size() == arc.size()
