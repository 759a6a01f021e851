"""save_state / load_state through the binding: a resumed run continues where it stopped. Last file on
purpose: after load_state the runtime accepts only tensors the loaded file knows."""
import copy
import os
import shutil
import tempfile

import pytest
import torch

import arcreduce.torch as arc
from test_optimizer import make_model, rank_batch


def train(model, optimizer, steps, first_step):
    for step in range(first_step, first_step + steps):
        x, y = rank_batch(arc.rank(), step)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


def test_resume_with_load_state_continues_exactly(runtime):
    directory = tempfile.mkdtemp(prefix="arcreduce-torch-test-")
    try:
        model = make_model(seed=7)
        sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        optimizer = arc.DistributedOptimizer(
            sgd, named_parameters=model.named_parameters(), prefix="resume.",
            compression=arc.Compression("arctopk", ratio=0.05, error_feedback="ef14"))
        train(model, optimizer, 3, 0)
        path = os.path.join(directory, f"state.rank{arc.rank()}")
        arc.save_state(path)
        saved = copy.deepcopy((model.state_dict(), optimizer.state_dict()))
        train(model, optimizer, 3, 3)
        straight = [p.detach().clone() for p in model.parameters()]

        model.load_state_dict(saved[0])
        optimizer.load_state_dict(saved[1])
        arc.load_state(path)  # error-feedback residuals as they were after step 3
        train(model, optimizer, 3, 3)
        # Not bit for bit with 3+ ranks: fusion follows timing, and MPI's summation order follows
        # the bucket's size (rounding differences of ~1e-7). Without load_state the residuals of
        # step 6 instead of step 3 move most weights, by up to ~5e-5: far outside the tolerance.
        for a, b in zip(straight, model.parameters()):
            torch.testing.assert_close(b.detach(), a, rtol=1e-5, atol=1e-6)

        with pytest.raises(arc.ArcreduceError):
            arc.load_state(os.path.join(directory, "missing"))
    finally:
        shutil.rmtree(directory)


def test_ddp_hook_trains_as_distributed_optimizer(runtime, gloo):
    """DDP with the hook and DistributedOptimizer at the same settings (ARC-Top-K at 0.05 with
    efm carrying the SGD momentum) under the same names, each from a fresh runtime (the
    compressor's draws follow the name and the step): the same training, up to the rounding
    of sums fused differently."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    compression = arc.Compression("arctopk", ratio=0.05)
    arc.shutdown()
    arc.init()
    reference = make_model(seed=9)
    optimizer = arc.DistributedOptimizer(
        torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9),
        named_parameters=reference.named_parameters(), compression=compression, prefix="same.")
    train(reference, optimizer, 5, 0)
    assert optimizer.momentum_in_runtime()
    arc.shutdown()
    arc.init()
    model = DDP(make_model(seed=9))
    sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    state = arc.register_ddp_hook(model, sgd, compression, prefix="same.")
    train(model, sgd, 5, 0)
    assert state.momentum_in_runtime()
    for (name, p), q in zip(model.module.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_ddp_hook_resumes_with_load_state(runtime, gloo):
    """A DDP job with the arcreduce hook (ARC-Top-K with efm, the SGD momentum in the runtime)
    checkpoints the model, the optimizer and the runtime's state (residuals and velocity), and a
    new DDP model, optimizer and hook resumed from them continue as the run that went on. The
    runtime is started afresh first: the previous test's load_state admits only its file's
    tensors."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    arc.shutdown()
    arc.init()
    compression = arc.Compression("arctopk", ratio=0.05)

    def job(model_state=None, optimizer_state=None):
        model = DDP(make_model(seed=8))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        state = arc.register_ddp_hook(model, optimizer, compression, prefix="ddp.resume.")
        assert state.momentum_in_runtime()
        if model_state is not None:
            model.module.load_state_dict(model_state)
            optimizer.load_state_dict(optimizer_state)
        return model, optimizer

    directory = tempfile.mkdtemp(prefix="arcreduce-torch-test-")
    try:
        model, optimizer = job()
        train(model, optimizer, 3, 0)
        path = os.path.join(directory, f"ddp.rank{arc.rank()}")
        arc.save_state(path)
        saved = copy.deepcopy((model.module.state_dict(), optimizer.state_dict()))
        train(model, optimizer, 3, 3)
        straight = [p.detach().clone() for p in model.parameters()]

        model, optimizer = job(*saved)
        arc.load_state(path)
        train(model, optimizer, 3, 3)
        for a, b in zip(straight, model.parameters()):
            torch.testing.assert_close(b.detach(), a, rtol=1e-5, atol=1e-6)
    finally:
        shutil.rmtree(directory)
