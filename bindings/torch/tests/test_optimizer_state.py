"""DistributedOptimizer and the optimizer's state: the error-feedback pairing follows the
hyperparameters in force at each step, whatever load_state_dict() or broadcast_optimizer_state()
put there, so momentum is applied exactly once on every rank."""
import warnings

import pytest
import torch

import arcreduce.torch as arc
from conftest import same_on_all_ranks
from test_optimizer import make_model, rank_batch

# Ratio 1 keeps every row: the reduction is the exact average, so runs that should train alike
# agree to rounding, and one that applies momentum twice is far off.
EFM = arc.Compression("arctopk", ratio=1.0, error_feedback="efm")
STEPS = 4


def train(model, optimizer, first_batch=200):
    for step in range(STEPS):
        x, y = rank_batch(arc.rank(), first_batch + step)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


def reference_weights(prefix):
    """Every rank wraps SGD(momentum=0.9) and trains: momentum carried by the runtime."""
    model = make_model(seed=20)
    optimizer = arc.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=model.named_parameters(), compression=EFM, prefix=prefix)
    train(model, optimizer)
    return [p.detach().clone() for p in model.parameters()]


def assert_same_weights(model, expected):
    for (name, p), q in zip(model.named_parameters(), expected):
        torch.testing.assert_close(p.detach(), q, rtol=1e-5, atol=1e-6,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_loading_a_plain_sgd_checkpoint_does_not_apply_momentum_twice(runtime):
    expected = reference_weights("state.ref_a.")
    model = make_model(seed=20)
    optimizer = arc.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=model.named_parameters(), compression=EFM, prefix="state.load.")
    # A checkpoint written by a plain (undistributed) SGD with momentum 0.9.
    checkpoint = torch.optim.SGD(make_model(seed=20).parameters(), lr=0.05,
                                 momentum=0.9).state_dict()
    optimizer.load_state_dict(checkpoint)
    assert optimizer.momentum_in_runtime()
    train(model, optimizer)
    assert_same_weights(model, expected)
    # The checkpoint it writes holds the user's momentum, so a plain SGD can resume from it.
    assert all(g["momentum"] == 0.9 for g in optimizer.state_dict()["param_groups"])


def test_broadcast_state_decides_the_pairing_on_every_rank(runtime):
    """Rank 0 wraps SGD with momentum 0.9, the others without momentum (as when only rank 0
    loads a checkpoint); broadcast_optimizer_state() makes them alike, and the pairing made at
    the first step is efm everywhere: no mismatch, momentum applied once."""
    expected = reference_weights("state.ref_b.")
    model = make_model(seed=20)
    momentum = 0.9 if arc.rank() == 0 else 0.0
    optimizer = arc.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=momentum),
        named_parameters=model.named_parameters(), compression=EFM, prefix="state.bcast.")
    arc.broadcast_optimizer_state(optimizer, root_rank=0)
    assert optimizer.param_groups[0]["momentum"] == 0.9
    assert optimizer.gradient_compression().error_feedback == "efm"
    train(model, optimizer)
    assert_same_weights(model, expected)
    for name, p in model.named_parameters():
        assert same_on_all_ranks(p.detach(), f"state.bcast.{name}"), name


def test_momentum_loaded_after_wrapping_plain_sgd_is_carried(runtime):
    """Wrapped without momentum (ef14), then a checkpoint brings momentum 0.9: the next step
    pairs efm and carries it, as if it had been wrapped with it."""
    expected = reference_weights("state.ref_c.")
    model = make_model(seed=20)
    optimizer = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                         named_parameters=model.named_parameters(),
                                         compression=EFM, prefix="state.late.")
    assert optimizer.gradient_compression().error_feedback == "ef14"
    optimizer.load_state_dict(torch.optim.SGD(make_model(seed=20).parameters(), lr=0.05,
                                              momentum=0.9).state_dict())
    assert optimizer.gradient_compression().error_feedback == "efm"
    train(model, optimizer)
    assert_same_weights(model, expected)


def test_step_after_synchronize_warns_and_skip_synchronize_does_not(runtime):
    model = make_model(seed=21)
    optimizer = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                         named_parameters=model.named_parameters(),
                                         compression="none", prefix="state.skip.")
    x, y = rank_batch(arc.rank(), 0)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.synchronize()
    with pytest.warns(UserWarning, match=r"skip_synchronize"):
        optimizer.step()
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with optimizer.skip_synchronize():
            optimizer.step()
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()  # submitted, not synchronized
    with pytest.raises(RuntimeError, match=r"inside skip_synchronize\(\) while gradients"):
        with optimizer.skip_synchronize():
            optimizer.step()
    optimizer.step()
