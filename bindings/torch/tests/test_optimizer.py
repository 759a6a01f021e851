"""DistributedOptimizer: gradients equal gloo's dense average; replicas stay identical."""
import pytest
import torch

import arcreduce.torch as arc
from arcreduce.torch.optimizer import ADAPTIVE_RATIO
from conftest import same_on_all_ranks


def make_model(seed):
    torch.manual_seed(seed)
    # 64 x 256 = 16384 weights: at ARCREDUCE_MIN_COMPRESS_ELEMENTS' default, so compressed.
    return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 256),
                               torch.nn.ReLU(), torch.nn.Linear(256, 4))


def rank_batch(rank, step, n=16):
    g = torch.Generator().manual_seed(10000 * rank + step)
    return torch.randn(n, 20, generator=g), torch.randint(0, 4, (n,), generator=g)


def test_gradients_equal_gloo_dense_average(runtime, gloo):
    x, y = rank_batch(arc.rank(), 0)
    reference = make_model(seed=1)  # same initial weights, plain local backward
    torch.nn.functional.cross_entropy(reference(x), y).backward()
    model = make_model(seed=1)
    optimizer = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         compression="none", prefix="gloo_grad.")
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.synchronize()  # the averaged gradients can be read (e.g. clipped) before step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        expected = q.grad
        gloo.all_reduce(expected)
        expected /= gloo.get_world_size()
        torch.testing.assert_close(p.grad, expected, rtol=1e-6, atol=1e-7,
                                   msg=lambda m, name=name: f"{name}: {m}")
    with optimizer.skip_synchronize():
        optimizer.step()  # already synchronized: no second reduction
    assert same_on_all_ranks(model[0].weight.detach(), "gloo_grad.after_step")


@pytest.mark.parametrize("label", ["none", "arctopk"])
def test_fifty_steps_keep_replicas_identical(runtime, label):
    compression = {"none": "none",
                   "arctopk": arc.Compression("arctopk", ratio=0.1, error_feedback="ef14")}[label]
    model = make_model(seed=100 + arc.rank())
    arc.broadcast_parameters(model.state_dict(), root_rank=0)
    base = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    optimizer = arc.DistributedOptimizer(base, named_parameters=model.named_parameters(),
                                         compression=compression, prefix=f"fifty.{label}.")
    arc.broadcast_optimizer_state(optimizer, root_rank=0)
    first_weight = model[2].weight.detach().clone()
    for step in range(50):
        x, y = rank_batch(arc.rank(), step)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    assert not torch.equal(model[2].weight, first_weight)  # it did train
    for name, p in model.named_parameters():
        assert same_on_all_ranks(p.detach(), f"fifty.{label}.{name}"), name


def test_unused_parameter_and_backward_passes(runtime):
    model = make_model(seed=3)
    extra = torch.nn.Linear(2, 2)  # in the optimizer, never used in forward
    params = list(model.parameters()) + list(extra.parameters())
    named = list(model.named_parameters()) + [("extra." + n, p) for n, p in
                                               extra.named_parameters()]
    optimizer = arc.DistributedOptimizer(torch.optim.SGD(params, lr=0.1), named_parameters=named,
                                         compression="none", backward_passes_per_step=2,
                                         prefix="passes.")
    for step in range(2):
        x, y = rank_batch(arc.rank(), step)
        torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    assert torch.equal(extra.weight.grad, torch.zeros(2, 2))
    assert same_on_all_ranks(model[0].weight.grad, "passes.grad")


def test_misuse_is_reported(runtime):
    model = make_model(seed=4)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"not in named_parameters"):
        arc.DistributedOptimizer(sgd, named_parameters=list(model.named_parameters())[:2])
    with pytest.raises(ValueError, match=r"holds the name '0.weight' twice"):
        named = list(model.named_parameters())
        arc.DistributedOptimizer(sgd, named_parameters=named + named[:1])
    with pytest.raises(TypeError, match=r"torch.optim.Optimizer"):
        arc.DistributedOptimizer(model, named_parameters=model.named_parameters())
    optimizer = arc.DistributedOptimizer(sgd, named_parameters=model.named_parameters(),
                                         compression="none", prefix="misuse.")
    assert isinstance(optimizer, torch.optim.SGD)
    x, y = rank_batch(arc.rank(), 0)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    with pytest.raises(RuntimeError, match=r"zero_grad\(\) was called while gradients"):
        optimizer.zero_grad()
    with pytest.raises(RuntimeError, match=r"produced again before step"):
        torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()


def test_efm_takes_over_sgd_momentum_and_matches_heavy_ball(runtime, gloo):
    """At ratio 1 nothing is dropped, so efm with the optimizer's momentum handed over must
    train exactly like heavy-ball SGD on gloo's dense average (up to rounding). With masking
    (the default; CTest runs the 3-rank session without it) the matrix whose rows ARC-Top-K
    selects (all of them, a share above eta) keeps its velocity; the tensors it sends densely
    (below ARCREDUCE_MIN_COMPRESS_ELEMENTS, 1-D) have theirs cleared where sent, which at ratio
    1 is everywhere: plain SGD for them."""
    settings = arc.config()
    assert settings["ef_momentum"] == pytest.approx(0.1)  # the default eta: momentum 0.9
    model = make_model(seed=5)
    reference = make_model(seed=5)

    def momentum_of(q):
        selected = q.dim() >= 2 and q.numel() >= 16384  # the minimum compressed size's default
        return 0.9 if selected or not settings["ef_masking"] else 0.0
    base = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    optimizer = arc.DistributedOptimizer(
        base, named_parameters=model.named_parameters(), prefix="efm.",
        compression=arc.Compression("arctopk", ratio=1.0, error_feedback="efm"))
    # The groups keep their momentum; step() runs the update without it (test_optimizer_state).
    assert all(g["momentum"] == 0.9 for g in optimizer.param_groups)
    assert optimizer.momentum_in_runtime()
    assert optimizer.gradient_compression().error_feedback == "efm"
    heavy_ball = torch.optim.SGD([{"params": [q], "momentum": momentum_of(q)}
                                  for q in reference.parameters()], lr=0.05)
    for step in range(5):
        x, y = rank_batch(arc.rank(), 100 + step)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        heavy_ball.zero_grad()
        torch.nn.functional.cross_entropy(reference(x), y).backward()
        for q in reference.parameters():
            gloo.all_reduce(q.grad)
            q.grad /= gloo.get_world_size()
        heavy_ball.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_error_feedback_pairing_with_other_optimizers(runtime):
    model = make_model(seed=6)
    efm = arc.Compression("arctopk", ratio=0.1, error_feedback="efm")
    adam = arc.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=1e-3),
                                    named_parameters=model.named_parameters(), compression=efm)
    # Adam keeps its own moments and gets no error feedback; a ratio that is set stays.
    assert adam.gradient_compression().error_feedback == "none"
    assert adam.gradient_compression().ratio == 0.1
    plain = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=model.named_parameters(), compression=efm)
    assert plain.gradient_compression().error_feedback == "ef14"  # no momentum to carry
    # Refused pairings are reported when they are made: at a step's first submission (here
    # asked for directly), after any broadcast_optimizer_state() or load_state_dict().
    with pytest.raises(ValueError, match=r"ARCREDUCE_EF_ETA=0.1 .*momentum 0.95"):
        arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.95),
                                 named_parameters=model.named_parameters(),
                                 compression=efm).gradient_compression()
    with pytest.raises(ValueError, match=r"'ef21m' .* diverges stacked on SGD momentum 0.9"):
        arc.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
            named_parameters=model.named_parameters(),
            compression=arc.Compression("arctopk", ratio=0.1,
                                        error_feedback="ef21m")).gradient_compression()
    dense = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                     named_parameters=model.named_parameters(),
                                     compression=arc.Compression("none", error_feedback="efm"))
    assert dense.param_groups[0]["momentum"] == 0.9  # no error feedback on dense: untouched
    assert dense.gradient_compression().compressor == "none"


def test_adaptive_optimizers_get_their_own_ratio_and_no_feedback(runtime, monkeypatch):
    model = make_model(seed=8)
    monkeypatch.delenv("ARCREDUCE_COMPRESS_RATIO", raising=False)

    def paired(optimizer, compression):
        return arc.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                        compression=compression).gradient_compression()

    for cls in (torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop, torch.optim.Adagrad):
        c = paired(cls(model.parameters(), lr=1e-3), "arctopk")
        assert (c.compressor, c.ratio, c.error_feedback) == (
            "arctopk", ADAPTIVE_RATIO, "none"), cls.__name__
    # What the user sets stays: a ratio, and an error feedback other than efm.
    c = paired(torch.optim.AdamW(model.parameters(), lr=1e-3),
               arc.Compression("topk", ratio=0.05, error_feedback="ef14"))
    assert (c.compressor, c.ratio, c.error_feedback) == ("topk", 0.05, "ef14")
    monkeypatch.setenv("ARCREDUCE_COMPRESS_RATIO", "0.02")
    c = paired(torch.optim.Adam(model.parameters(), lr=1e-3), "randk")
    assert (c.ratio, c.error_feedback) == (None, "none")  # the runtime's 0.02 applies
    # A preset sets a ratio too: ARCREDUCE_PRESET=paper's 0.2 applies, and its ef21m stays.
    monkeypatch.delenv("ARCREDUCE_COMPRESS_RATIO")
    monkeypatch.setenv("ARCREDUCE_PRESET", "paper")
    c = paired(torch.optim.AdamW(model.parameters(), lr=1e-3), "arctopk")
    assert (c.ratio, c.error_feedback) == (None, None)
    assert (arc.config()["compress_ratio"], arc.config()["error_feedback"]) == (0.2, "ef21m")
    monkeypatch.setenv("ARCREDUCE_PRESET", "default")
    c = paired(torch.optim.AdamW(model.parameters(), lr=1e-3), "arctopk")
    assert (c.ratio, c.error_feedback) == (ADAPTIVE_RATIO, "none")
    monkeypatch.delenv("ARCREDUCE_PRESET")
    # Not adaptive: SGD without momentum, and an optimizer of the user's own.
    class Sign(torch.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 1e-3})

    for optimizer in (torch.optim.SGD(model.parameters(), lr=0.1), Sign(model.parameters())):
        c = paired(optimizer, "arctopk")
        assert (c.ratio, c.error_feedback) == (None, "ef14"), type(optimizer).__name__
    # Dense reduction is left alone.
    c = paired(torch.optim.Adam(model.parameters(), lr=1e-3), "none")
    assert (c.compressor, c.ratio, c.error_feedback) == ("none", None, None)


def test_gradient_names_carry_the_prefix(runtime):
    model = make_model(seed=7)
    optimizer = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(), prefix="n.")
    names = optimizer.gradient_names()
    assert [names[p] for p in model.parameters()] == [
        "n." + name for name, _ in model.named_parameters()]
    names.clear()  # a copy: the optimizer keeps its own
    assert len(optimizer.gradient_names()) == len(list(model.parameters()))
    unnamed = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), prefix="u.")
    assert sorted(unnamed.gradient_names().values()) == sorted(
        f"u.0.{i}" for i in range(len(list(model.parameters()))))
