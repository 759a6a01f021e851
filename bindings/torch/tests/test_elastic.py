"""arcreduce.torch.elastic (hvd.elastic): commit and restore, resuming a relaunched job from the
commits of ARCRUN_ELASTIC_DIR, Horovod's example pattern, the exit of a job whose communication
failed, and the error cases. The tests that resume load a compressor state (after which the
runtime takes only that state's tensors), so the module ends with a fresh runtime."""
import copy
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest
import torch

import arcreduce.torch as hvd
from conftest import same_on_all_ranks
from elastic_job import make_state, train

elastic = hvd.elastic
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module", autouse=True)
def fresh_runtime_after(runtime):
    yield
    hvd.shutdown()
    hvd.init()


@pytest.fixture
def shared_dir(runtime, monkeypatch):
    """A directory every rank sees (rank 0's, one host), named by ARCRUN_ELASTIC_DIR."""
    path = hvd.broadcast_object(tempfile.mkdtemp(prefix="arcreduce-elastic-")
                                if hvd.rank() == 0 else None, 0, "test.elastic.dir")
    monkeypatch.setenv(elastic.DIR_VARIABLE, path)
    yield path
    hvd.barrier()
    if hvd.rank() == 0:
        shutil.rmtree(path, ignore_errors=True)


def relaunch():
    """What a restart gives the next job: a runtime started afresh (no compressor state)."""
    hvd.shutdown()
    hvd.init()


def mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def step(model, optimizer, i):
    g = torch.Generator().manual_seed(100 * i + hvd.rank())
    x, y = torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()


def test_hvd_elastic_has_horovods_names(runtime):
    for name in ("TorchState", "ObjectState", "State", "ElasticSampler", "run"):
        assert hasattr(hvd.elastic, name), name
    assert hvd.elastic is sys.modules["arcreduce.torch.elastic"]


def test_commit_and_restore_round_trip(runtime, monkeypatch):
    monkeypatch.delenv(elastic.DIR_VARIABLE, raising=False)
    model = mlp(seed=1)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5),
        named_parameters=model.named_parameters(), compression=hvd.Compression.none,
        prefix="elastic.roundtrip.")
    state = elastic.TorchState(model, optimizer, epoch=3, batch=0, history=[])
    for i in range(2):
        step(model, optimizer, i)
    state.batch, state.history = 2, [0.5]
    state.commit()
    committed = (copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict()))
    assert any("momentum_buffer" in s for s in committed[1]["state"].values())
    for i in range(2, 4):
        step(model, optimizer, i)
    state.epoch, state.batch = 4, 7
    state.history.append(0.25)
    assert not torch.equal(model[0].weight, committed[0]["0.weight"])

    state.restore()
    assert (state.epoch, state.batch, state.history) == (3, 2, [0.5])
    assert state.model is model and state.optimizer is optimizer
    for name, value in model.state_dict().items():
        assert torch.equal(value, committed[0][name]), name
    restored = optimizer.state_dict()
    for key, s in committed[1]["state"].items():
        assert torch.equal(restored["state"][key]["momentum_buffer"], s["momentum_buffer"])
    assert restored["param_groups"] == committed[1]["param_groups"]
    # The restored state is a copy: changing it does not change the commit.
    state.history.append(1.0)
    state.restore()
    assert state.history == [0.5]

    objects = elastic.ObjectState(epoch=0, seen=[1])
    objects.epoch = 5
    objects.seen.append(2)
    objects.restore()
    assert (objects.epoch, objects.seen) == (0, [1])
    # Horovod's positional form: ObjectState(bcast_object, get_rank, **kwargs).
    horovod_form = elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=1)
    horovod_form.step = 2
    horovod_form.commit()
    horovod_form.step = 3
    horovod_form.restore()
    assert horovod_form.step == 2


def test_sync_makes_every_rank_rank_0s(runtime, monkeypatch):
    monkeypatch.delenv(elastic.DIR_VARIABLE, raising=False)
    model = mlp(seed=10 + hvd.rank())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * (1 + hvd.rank()))
    state = elastic.TorchState(model, optimizer, epoch=hvd.rank())
    state.sync()
    assert state.epoch == 0
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1)
    for p in model.parameters():
        assert same_on_all_ranks(p.detach(), "elastic.sync")
    # sync() saved what it made the same: restore() goes back there.
    state.epoch = 9
    state.restore()
    assert state.epoch == 0


def test_run_resumes_from_the_commit_of_a_previous_launch_bit_identically(shared_dir,
                                                                          monkeypatch):
    """First launch: 4 batches, commits at 2 and 4, 1 more batch uncommitted, ends. Second
    launch (fresh runtime, new objects with other weights on every rank): resumes at batch 4 and
    trains to 8. A job that never stopped (no directory) trains 8: the weights are equal bit for
    bit, which needs the runtime's state (efm's velocity, the residuals) of the commit."""
    relaunch()
    first = make_state(seed=50 + hvd.rank())
    elastic.run(train)(first, 8, 2, stop_at=5)
    assert first.batch == 5 and first.started == 0
    with open(os.path.join(shared_dir, "LATEST")) as f:
        latest = json.load(f)
    assert latest["commit"] == 2 and latest["size"] == hvd.size()
    assert sorted(os.listdir(shared_dir)) == ["LATEST", "commit-00000002"]

    relaunch()
    second = make_state(seed=70 + hvd.rank())
    elastic.run(train)(second, 8, 2)
    assert second.started == 4 and second.batch == 8
    assert second.optimizer.momentum_in_runtime()
    resumed = second.model.weight.detach().clone()
    assert same_on_all_ranks(resumed, "elastic.resumed")

    monkeypatch.delenv(elastic.DIR_VARIABLE)
    relaunch()
    reference = make_state(seed=50 + hvd.rank())
    elastic.run(train)(reference, 8, 2)
    assert reference.started == 0
    assert torch.equal(resumed, reference.model.weight.detach())


def test_resume_at_another_world_size_resets_the_residuals(shared_dir, caplog):
    """A commit that a job of another size made (its LATEST says so): the model and optimizer
    resume, the compressor's state is not loaded, and rank 0 logs a warning."""
    relaunch()
    state = make_state(seed=50 + hvd.rank(), prefix="elastic.size.")
    elastic.run(train)(state, 2, 2)
    committed = state.model.weight.detach().clone()
    if hvd.rank() == 0:
        path = os.path.join(shared_dir, "LATEST")
        with open(path) as f:
            latest = json.load(f)
        latest["size"] = hvd.size() + 1
        with open(path, "w") as f:
            json.dump(latest, f)
    hvd.barrier()

    relaunch()
    resets = []
    state = make_state(seed=90 + hvd.rank(), prefix="elastic.size.")
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    with caplog.at_level(logging.WARNING, logger="arcreduce.torch.elastic"):
        elastic.run(train)(state, 2, 2)
    assert state.started == 2 and resets == [hvd.size()]
    assert torch.equal(state.model.weight.detach(), committed)
    if hvd.rank() == 0:
        assert (f"made by a job of {hvd.size() + 1} ranks, with {hvd.size()}: the compressor's "
                "error-feedback residuals and momentum start from zero") in caplog.text
    # No compressor state was loaded: new tensors are still accepted.
    handle = hvd.allreduce_async_(torch.ones(20000), name="elastic.size.new",
                                  compression=hvd.Compression())
    hvd.synchronize(handle)


def test_horovods_example_pattern_runs(shared_dir, monkeypatch):
    """pytorch_synthetic_benchmark_elastic.py's and pytorch_mnist_elastic.py's use of the API,
    written as there, with commits every 2 batches and a reset callback."""
    relaunch()
    torch.manual_seed(0)
    model = mlp(seed=5)
    lr = 0.01
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * hvd.size(), momentum=0.5)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=hvd.Compression.none, op=hvd.Average)
    data, target = torch.randn(8, 6), torch.randint(0, 3, (8,))

    def benchmark_step(state):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(data), target).backward()
        optimizer.step()
        state.batch += 1
        if state.batch == 2:
            state.batch = 0
            state.commit()

    @hvd.elastic.run
    def run_benchmark(state):
        if not state.warm:
            for _ in range(2):
                benchmark_step(state)
            state.warm = True
            state.commit()
        for x in range(state.iter, 3):
            for _ in range(2):
                benchmark_step(state)
            state.img_secs.append(float(x))
            state.iter = x
            state.commit()

    def on_state_reset():
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr * hvd.size()

    state = hvd.elastic.TorchState(model, optimizer, img_secs=[], iter=0, batch=0, warm=False)
    state.register_reset_callbacks([on_state_reset])
    run_benchmark(state)
    assert state.img_secs == [0.0, 1.0, 2.0] and state.warm
    for p in model.parameters():
        assert same_on_all_ranks(p.detach(), "elastic.example")

    # The mnist example's loops over state.epoch and state.batch, a commit every batch.
    dataset = torch.utils.data.TensorDataset(torch.randn(24, 6), torch.randint(0, 3, (24,)))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, sampler=sampler)

    @hvd.elastic.run
    def train_epochs(state):
        for state.epoch in range(state.epoch, 3):
            state.model.train()
            steps_remaining = len(loader) - state.batch
            for state.batch, (x, y) in enumerate(loader):
                if state.batch >= steps_remaining:
                    break
                state.optimizer.zero_grad()
                torch.nn.functional.cross_entropy(state.model(x), y).backward()
                state.optimizer.step()
                state.train_sampler.record_batch(state.batch, 4)
                state.commit()
            state.batch = 0
            state.train_sampler.set_epoch(state.epoch + 1)

    monkeypatch.setenv(elastic.DIR_VARIABLE, os.path.join(shared_dir, "mnist"))
    state = hvd.elastic.TorchState(model, optimizer, train_sampler=sampler, epoch=1, batch=0)
    train_epochs(state)
    assert state.epoch == 2 and state.train_sampler.epoch == 3
    assert len(sampler) == -(-24 // hvd.size())
    for p in model.parameters():
        assert same_on_all_ranks(p.detach(), "elastic.mnist")


def test_errors_are_clear(shared_dir, monkeypatch):
    relaunch()

    @elastic.run
    def train_fn(state):
        return state

    with pytest.raises(TypeError, match=r"train_fn\(state, \.\.\.\) decorated with "
                                        r"arcreduce.torch.elastic.run takes an elastic State"):
        train_fn(42)

    # A commit that does not fit the model it resumes: every rank says so.
    state = elastic.TorchState(torch.nn.Linear(4, 3), torch.optim.SGD(
        torch.nn.Linear(4, 3).parameters(), lr=0.1), epoch=0)
    train_fn(state)
    state.commit()
    wider = torch.nn.Linear(5, 3)
    other = elastic.TorchState(wider, torch.optim.SGD(wider.parameters(), lr=0.1), epoch=0)
    with pytest.raises(RuntimeError, match=r"run\(\) could not resume from .*commit-00000001: "
                                           r"rank 0: .*state.model: the committed state does "
                                           r"not fit"):
        train_fn(other)
    fewer = elastic.TorchState(torch.nn.Linear(4, 3), epoch=0)
    with pytest.raises(RuntimeError, match=r"modules, optimizers and samplers named "
                                           r"\['model', 'optimizer'\], this TorchState "
                                           r"\['model'\]"):
        train_fn(fewer)

    # An attribute that cannot be written: the commit fails on every rank, naming it.
    unpicklable = elastic.ObjectState(callback=lambda: None)
    with pytest.raises(RuntimeError, match=r"state.commit\(\) could not write commit 2 to "
                                           r".*commit-00000002: rank 0: "):
        unpicklable.commit()

    # The directory is a file.
    path = hvd.broadcast_object(tempfile.mkstemp()[1] if hvd.rank() == 0 else None, 0,
                                "test.elastic.file")
    monkeypatch.setenv(elastic.DIR_VARIABLE, path)
    try:
        with pytest.raises(RuntimeError, match=rf"run\(\): ARCRUN_ELASTIC_DIR={re.escape(path)} "
                                               r"cannot hold commits: FileExistsError"):
            train_fn(elastic.ObjectState(epoch=0))
    finally:
        hvd.barrier()
        if hvd.rank() == 0:
            os.unlink(path)


def test_only_a_lost_job_ends_the_process(runtime, monkeypatch):
    monkeypatch.delenv(elastic.DIR_VARIABLE, raising=False)
    lost = [
        "stall shutdown on rank 0 in negotiation: no progress for 3 s; rank 2 did not answer a "
        "liveness check within 1 s (stopped, hung or unreachable)",
        "stall shutdown after 40 s (ARCREDUCE_STALL_SHUTDOWN_SECONDS): tensors never submitted "
        "by every rank: 'w'",
        "arcreduce coordinator failed on rank 1: std::bad_alloc",
        "arcreduce was shut down (shutdown() called on some rank) before this op completed",
        "MPI_Waitall failed at ops/mpi_communicator.cc:120: MPI_ERR_TRUNCATE (code 15)",
    ]
    going_on = [
        "tensor 'w' was submitted differently across ranks (shape: [4] on rank 0 vs [5] on "
        "rank 1)",
        "tensor 'x' was refused on rank 1: TypeError: tensor 'x' has dtype torch.complex64",
        "tensor 'w': arcreduce is not initialised; call arcreduce::init() first",
    ]
    for message in lost:
        assert elastic._job_lost(hvd.ArcreduceError(message)), message
    for message in going_on:
        assert not elastic._job_lost(hvd.ArcreduceError(message)), message
    assert not elastic._job_lost(RuntimeError(lost[0]))

    @elastic.run
    def fails(state, message):
        raise hvd.ArcreduceError(message)

    # Errors that leave the job running propagate as they are.
    with pytest.raises(hvd.ArcreduceError, match="submitted differently"):
        fails(elastic.ObjectState(epoch=0), going_on[0])
    # A lost job ends the process (os._exit, caught here).
    exits = []

    def exit_(status):
        exits.append(status)
        raise SystemExit(status)

    monkeypatch.setattr(elastic.os, "_exit", exit_)
    with pytest.raises(SystemExit):
        fails(elastic.ObjectState(epoch=0), lost[2])
    assert exits == [elastic.RESTART_EXIT_STATUS]


def job_environment(directory):
    """The environment of a job of its own started from this one: without the variables of the
    mpirun that started this process."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))
           or k.startswith(("OMPI_ALLOW_RUN_AS", "OMPI_MCA_btl", "OMPI_MCA_rmaps_base"))}
    env[elastic.DIR_VARIABLE] = directory
    env["PYTHONPATH"] = os.pathsep.join([HERE] + env.get("PYTHONPATH", "").split(os.pathsep))
    return env


def run_job(args, directory, ranks=1):
    command = [sys.executable, os.path.join(HERE, "elastic_job.py")] + args
    if ranks > 1:
        command = [shutil.which("mpirun"), "--oversubscribe", "-np", str(ranks)] + command
    return subprocess.run(command, env=job_environment(directory), capture_output=True,
                          text=True, timeout=120)


@pytest.mark.skipif(not shutil.which("mpirun"), reason="needs mpirun")
def test_a_failed_job_exits_for_a_restart_and_the_relaunch_resumes(runtime, monkeypatch):
    """Real processes: a job that commits at batch 2 and 4 and then loses its communication exits
    with status 75 and says why; the relaunch resumes at batch 4 and ends bit for bit where this
    process's job that never stopped ends; a relaunch with 2 ranks resumes from that 1-rank
    commit with a warning that the residuals start from zero. Run in the 1-rank session only
    (the jobs are 1- and 2-rank jobs of their own)."""
    if hvd.size() != 1:
        pytest.skip("the jobs it starts are jobs of their own: run in the 1-rank session")
    directory = tempfile.mkdtemp(prefix="arcreduce-elastic-jobs-")
    try:
        out = os.path.join(directory, "weights.pt")
        state_dir = os.path.join(directory, "state")
        failed = run_job(["8", "2", out, "--fail-at", "5"], state_dir)
        assert failed.returncode == elastic.RESTART_EXIT_STATUS, failed.stderr[-3000:]
        assert ("arcreduce.torch.elastic: rank 0: the job's communication failed, and an "
                "arcreduce job cannot continue without it: stall shutdown on rank 0"
                in failed.stderr), failed.stderr[-3000:]
        assert ("exiting with status 75 for the launcher to restart the job; a restarted job "
                f"resumes from commit 2 of {state_dir}") in failed.stderr
        assert not os.path.exists(out)

        resumed = run_job(["8", "2", out], state_dir)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        result = torch.load(out)
        assert (result["started"], result["batch"]) == (4, 8)

        monkeypatch.delenv(elastic.DIR_VARIABLE, raising=False)
        relaunch()
        reference = make_state(seed=50, prefix="elastic.job.")
        elastic.run(train)(reference, 8, 2)
        assert torch.equal(result["weight"], reference.model.weight.detach())

        wider = run_job(["10", "2", out], state_dir, ranks=2)
        assert wider.returncode == 0, wider.stderr[-3000:]
        assert ("made by a job of 1 ranks, with 2: the compressor's error-feedback residuals "
                "and momentum start from zero") in wider.stderr
        result = torch.load(out)
        assert (result["started"], result["batch"], result["size"]) == (8, 10, 2)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
