"""Restart-based elastic training with Horovod's API (``horovod.torch.elastic``).

An arcreduce job cannot lose a rank and go on: when a rank or a host fails, the runtime ends the
job on every rank (within seconds, docs/errors.md). Elastic training is therefore built on
restarts: the launcher starts the job again on the hosts that are left, and training resumes from
the last ``state.commit()``. What Horovod does in one process (catch the failure, re-initialise,
roll back to the commit, broadcast from rank 0) happens here across two processes:

- ``state.commit()`` keeps the state in memory (``state.restore()`` goes back to it) and, where
  the variable ``ARCRUN_ELASTIC_DIR`` names a directory shared by the job's ranks, writes it
  there: the model, the optimizer, samplers and attributes (rank 0) and every rank's compressor
  state (error-feedback residuals, momentum, step counters: ``save_state``).
- ``@run`` loads the last commit of that directory when it starts, if there is one, broadcasts it
  from rank 0 (parameters, optimizer state, the rest as objects), so every rank starts identical,
  and loads each rank's compressor state where the world size is the commit's (the run then
  continues bit for bit); at another world size the residuals start from zero, with a warning.
- A failure of the job's communication inside the training function (a stall, a lost rank, a
  failed coordinator, MPI) ends the process with a message and exit status ``RESTART_EXIT_STATUS``
  so that the launcher restarts the job; other exceptions propagate unchanged.

See docs/elastic.md.
"""
import copy
import functools
import json
import logging
import math
import os
import random
import re
import shutil
import sys

import torch

from . import mpi_ops
from .collectives import allgather_object
from .functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from .mpi_ops import ArcreduceError, init, is_initialized, load_state, rank, save_state, size

__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run", "DIR_VARIABLE",
           "RESTART_EXIT_STATUS"]

# The directory, shared by every rank of the job and kept across its restarts, that commit()
# writes to and run() resumes from. Not an ARCREDUCE_* variable: init() refuses names of that
# prefix that are not the runtime's settings.
DIR_VARIABLE = "ARCRUN_ELASTIC_DIR"
# The exit status of a process whose job lost its communication (EX_TEMPFAIL: try again).
RESTART_EXIT_STATUS = 75

_FORMAT = 1
_LATEST = "LATEST"
_COMMIT = re.compile(r"^commit-(\d+)$")

_log = logging.getLogger(__name__)

# ArcreduceError messages of a job that cannot go on in this process: the runtime ends it (a
# stall, a rank stopped or unreachable, a failed coordinator, an MPI failure, a shutdown on some
# rank while ops were in flight). Mismatches and refused arguments leave the job running.
_JOB_LOST = re.compile(r"stall shutdown|coordinator failed|arcreduce was shut down \(shutdown\(\) "
                       r"called on some rank\)|did not answer a liveness check|\bMPI_\w+ failed"
                       r"|CUDA device work failed")


def _job_lost(error):
    return isinstance(error, ArcreduceError) and _JOB_LOST.search(str(error)) is not None


class State:
    """Horovod's ``horovod.common.elastic.State``: what the training function needs to resume.

    ``bcast_object`` (default ``broadcast_object``) and ``get_rank`` (default ``rank``) are
    Horovod's constructor arguments, accepted for code that passes them."""

    def __init__(self, bcast_object=None, get_rank=None):
        self._bcast_object = bcast_object or broadcast_object
        self._rank = get_rank or rank
        self._reset_callbacks = []
        # The directory's commit this object last wrote or loaded (None: not looked up yet),
        # and the last one whose compressor state fits this job (written or loaded by it).
        self._commit_number = None
        self._runtime_commit = None
        self._resumed = False

    def register_reset_callbacks(self, callbacks):
        """Functions called, without arguments, after a reset: here, when ``run`` resumes from a
        commit of a previous launch of the job (the world size may have changed), after the
        committed state is loaded and broadcast. Typically they scale the learning rate to
        ``size()``. Not called on a first start."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Keeps the current state as the one ``restore()`` and a restarted job go back to:
        in memory, and, where ``ARCRUN_ELASTIC_DIR`` is set, in that directory (collective then:
        every rank commits, between steps, with no op in flight). Writing takes time (rank 0
        writes the model and optimizer): commit every few batches rather than every one."""
        self.save()
        directory = _directory()
        if directory is not None:
            self._persist(directory)
        self.check_host_updates()

    def check_host_updates(self):
        """Horovod raises ``HostsUpdatedInterrupt`` here when hosts were added or removed. An
        arcreduce job keeps its hosts while it runs (a lost host ends it, and the launcher
        restarts it on the hosts that are left), so there is nothing to check: returns None."""
        return None

    def save(self):
        """Keeps the current state in memory (``restore()`` goes back to it); no file is written
        and nothing is sent."""
        raise NotImplementedError()

    def restore(self):
        """Goes back to the last ``save()`` or ``commit()``, undoing later changes."""
        raise NotImplementedError()

    def sync(self):
        """Makes every rank's state rank 0's (collective) and saves it."""
        raise NotImplementedError()

    def reset(self):
        """Called before the reset callbacks."""

    def _restore_runtime(self):
        """The compressor's state of the last commit this object wrote or loaded, where it is in
        the directory and fits this job; otherwise the runtime's state stays as it is."""
        directory = _directory()
        if directory is None or not self._runtime_commit or not is_initialized():
            return
        path = os.path.join(directory, f"commit-{self._runtime_commit:08d}",
                            f"runtime.rank{rank()}")
        if os.path.exists(path):
            try:
                load_state(path)
            except ArcreduceError as e:
                _log.warning("arcreduce.torch.elastic: restore(): the compressor state of %s "
                             "was not loaded: %s", path, e)

    # What a commit holds, for the directory: picklable, written by rank 0.
    def _payload(self):
        raise NotImplementedError()

    def _load_payload(self, payload):
        raise NotImplementedError()

    def _persist(self, directory):
        _require_runtime("state.commit() with " + DIR_VARIABLE)
        if self._commit_number is None:
            self._commit_number = _latest(directory, "commit")[0]
        number = self._commit_number + 1
        folder = os.path.join(directory, f"commit-{number:08d}")
        error = None
        try:
            os.makedirs(folder, exist_ok=True)
            if rank() == 0:
                _write_atomically(os.path.join(folder, "state.pt"),
                                  lambda f: torch.save(self._payload(), f))
            save_state(os.path.join(folder, f"runtime.rank{rank()}"))
        except Exception as e:  # noqa: BLE001  (every rank learns it, below)
            error = f"{type(e).__name__}: {e}"
        _agree(error, f"state.commit() could not write commit {number} to {folder}",
               "elastic.commit")
        # Every rank's part is written: the commit becomes the one a restart resumes from.
        if rank() == 0:
            try:
                _write_atomically(os.path.join(directory, _LATEST), lambda f: f.write(
                    json.dumps({"format": _FORMAT, "commit": number, "size": size()}).encode()))
            except Exception as e:  # noqa: BLE001
                error = f"{type(e).__name__}: {e}"
        _agree(error, f"state.commit() could not make commit {number} the latest in "
               f"{directory}", "elastic.commit.latest")
        if rank() == 0:
            for name in os.listdir(directory):
                m = _COMMIT.match(name)
                if m and int(m.group(1)) < number:
                    shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
        self._commit_number = self._runtime_commit = number

    def _resume(self):
        """At run()'s first start with this object: loads the directory's last commit (rank 0
        the state, every rank its compressor state). Returns whether there was one."""
        directory = _directory()
        if directory is None or self._resumed:
            return False
        self._resumed = True
        _require_runtime("run() with " + DIR_VARIABLE)
        number, committed_size = _latest(directory, "run()")
        self._commit_number = number
        if number == 0:
            return False
        folder = os.path.join(directory, f"commit-{number:08d}")
        error = None
        if rank() == 0:
            try:
                payload = torch.load(os.path.join(folder, "state.pt"), map_location="cpu")
                self._load_payload(payload)
            except Exception as e:  # noqa: BLE001
                error = f"{type(e).__name__}: {e}"
        _agree(error, f"run() could not resume from {folder}", "elastic.resume.state")
        if committed_size == size():
            try:
                load_state(os.path.join(folder, f"runtime.rank{rank()}"))
            except Exception as e:  # noqa: BLE001
                error = f"{type(e).__name__}: {e}"
            _agree(error, f"run() could not load the compressor state of {folder}",
                   "elastic.resume.runtime")
            self._runtime_commit = number
        elif rank() == 0:
            _log.warning("arcreduce.torch.elastic: resuming from commit %d of %s, made by a job "
                         "of %d ranks, with %d: the compressor's error-feedback residuals and "
                         "momentum start from zero", number, directory, committed_size, size())
        if rank() == 0:
            _log.info("arcreduce.torch.elastic: resuming from commit %d of %s", number,
                      directory)
        return True


class ObjectState(State):
    """Horovod's ``ObjectState``: every keyword argument becomes an attribute whose value is
    committed, restored and synchronized (picklable Python objects)."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        object.__setattr__(self, "_saved_state", dict(kwargs))
        for name, value in kwargs.items():
            object.__setattr__(self, name, value)
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)
        self.save()

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name))
                             for name in self._saved_state}

    def restore(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))
        self._restore_runtime()

    def sync(self):
        if self._saved_state:
            current = {name: getattr(self, name) for name in self._saved_state}
            for name, value in self._bcast_object(current).items():
                setattr(self, name, value)
        ObjectState.save(self)

    def _payload(self):
        return {"format": _FORMAT, "objects": self._saved_state, "handlers": {}}

    def _load_payload(self, payload):
        if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
            raise ValueError("not a commit of arcreduce.torch.elastic (format "
                             f"{payload.get('format') if isinstance(payload, dict) else None!r},"
                             f" expected {_FORMAT})")
        objects = payload["objects"]
        unknown = sorted(set(objects) - set(self._saved_state))
        if unknown:
            _log.warning("arcreduce.torch.elastic: the commit holds attributes this state does "
                         "not have, ignored: %s", ", ".join(unknown))
        for name in self._saved_state:
            if name in objects:
                setattr(self, name, objects[name])
        ObjectState.save(self)


class TorchState(ObjectState):
    """Horovod's ``TorchState``: ``model`` and ``optimizer`` (optional) and keyword arguments;
    modules, optimizers and ``ElasticSampler``s among them are committed through their
    ``state_dict()``, every other value as an object. All are attributes (``state.model``,
    ``state.epoch``); assigning a new module or optimizer to one commits it in memory."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers = {name: _handler(value) for name, value in kwargs.items()}
        handlers = {name: h for name, h in handlers.items() if h is not None}
        object.__setattr__(self, "_handlers", handlers)
        for name, h in handlers.items():
            object.__setattr__(self, name, h.value)
        super().__init__(**{k: v for k, v in kwargs.items() if k not in handlers})

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name].value = value
            handlers[name].save()
        object.__setattr__(self, name, value)

    def save(self):
        for h in self._handlers.values():
            h.save()
        super().save()

    def restore(self):
        for h in self._handlers.values():
            h.restore()
        super().restore()

    def sync(self):
        for name in sorted(self._handlers):
            self._handlers[name].sync()
        super().sync()

    def _payload(self):
        payload = super()._payload()
        payload["handlers"] = {name: h.saved for name, h in self._handlers.items()}
        return payload

    def _load_payload(self, payload):
        handlers = payload.get("handlers", {}) if isinstance(payload, dict) else {}
        if set(handlers) != set(self._handlers):
            raise ValueError(f"the commit holds modules, optimizers and samplers named "
                             f"{sorted(handlers)}, this TorchState {sorted(self._handlers)}")
        for name, saved in handlers.items():
            try:
                self._handlers[name].load(saved)
            except Exception as e:  # noqa: BLE001
                raise RuntimeError(f"state.{name}: the committed state does not fit: "
                                   f"{type(e).__name__}: {e}") from e
        super()._load_payload(payload)


class _Handler:
    """A value committed through its state_dict()."""

    def __init__(self, value):
        self.value = value
        self.saved = None  # TorchState saves every handler when it is made

    def save(self):
        self.saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(copy.deepcopy(self.saved))

    def load(self, saved):
        self.value.load_state_dict(saved)
        self.save()


class _ModelHandler(_Handler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)
        self.save()


class _OptimizerHandler(_Handler):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)
        self.save()


class _SamplerHandler(_Handler):
    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict(), 0,
                                                    "elastic.sampler"))
        self.save()


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's ``ElasticSampler``: a DistributedSampler that counts the samples processed in
    the epoch (``record_batch``) so that a job resumed from a commit, at any world size, goes on
    with the samples not yet processed, shared among its ranks. Call ``record_batch(batch_idx,
    batch_size)`` after each batch and ``set_epoch(epoch)`` at the end of each epoch."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        self.num_replicas = size()
        self.rank = rank()
        indices = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(indices)
        self.remaining_indices = indices[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        indices += indices[:self.total_size - len(indices)]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples


_HANDLERS = [(torch.nn.Module, _ModelHandler), (torch.optim.Optimizer, _OptimizerHandler),
             (ElasticSampler, _SamplerHandler)]


def _handler(value):
    for kind, handler in _HANDLERS:
        if isinstance(value, kind):
            return handler(value)
    return None


def run(func):
    """Decorator of the training function ``func(state, *args, **kwargs)``, as Horovod's
    ``hvd.elastic.run``. Before calling it: initialises the runtime if needed, resumes from the
    last commit of ``ARCRUN_ELASTIC_DIR`` if there is one (then calls the reset callbacks), and
    synchronizes ``state`` from rank 0. Collectives must not run in the decorated call itself
    before ``func`` starts on every rank.

    If the job's communication fails inside ``func`` (stall, lost rank, failed coordinator, MPI
    error), this process cannot go on: it writes the error to stderr and exits with status
    ``RESTART_EXIT_STATUS`` (75) for the launcher to restart the job from the last commit. Other
    exceptions propagate unchanged."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not isinstance(state, State):
            raise TypeError(f"{getattr(func, '__name__', 'the function')}(state, ...) decorated "
                            "with arcreduce.torch.elastic.run takes an elastic State "
                            "(hvd.elastic.TorchState or ObjectState) as its first argument, "
                            f"not {type(state).__name__}")
        if not is_initialized():
            init()
        try:
            if state._resume():
                state.sync()
                state.on_reset()
                state.save()
            else:
                state.sync()
            return func(state, *args, **kwargs)
        except ArcreduceError as e:
            if not _job_lost(e):
                raise
            _exit_for_restart(e, state)
    return wrapper


def _exit_for_restart(error, state):
    directory = _directory()
    if directory is None:
        resume = (f"{DIR_VARIABLE} is not set, so no commit was written: a restarted job starts "
                  "from the beginning")
    elif state._commit_number:
        resume = f"a restarted job resumes from commit {state._commit_number} of {directory}"
    else:
        resume = f"nothing was committed to {directory} yet: a restarted job starts afresh"
    try:
        where = f"rank {mpi_ops.rank()}"
    except Exception:  # noqa: BLE001
        where = "this rank"
    sys.stderr.write(f"arcreduce.torch.elastic: {where}: the job's communication failed, and an "
                     f"arcreduce job cannot continue without it: {error}\n"
                     f"arcreduce.torch.elastic: exiting with status {RESTART_EXIT_STATUS} for "
                     f"the launcher to restart the job; {resume}\n")
    sys.stderr.flush()
    sys.stdout.flush()
    # No interpreter shutdown: the runtime's exit handler would wait for peers that are gone.
    os._exit(RESTART_EXIT_STATUS)


def _directory():
    value = os.environ.get(DIR_VARIABLE)
    return value if value else None


def _require_runtime(what):
    if not is_initialized():
        raise RuntimeError(f"{what} needs the runtime: call init() first (run() calls it)")


def _agree(error, what, name):
    """Collective: raises on every rank when ``error`` (None or a message) is set on any."""
    errors = allgather_object(error, name=name)
    failed = [f"rank {r}: {e}" for r, e in enumerate(errors) if e is not None]
    if failed:
        raise RuntimeError(f"{what}: " + "; ".join(failed))


def _latest(directory, what):
    """Collective: (number, world size) of the directory's last complete commit, (0, 0) for
    none; creates the directory where it is missing."""
    found, error = (0, 0), None
    if rank() == 0:
        try:
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, _LATEST)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    latest = json.loads(f.read().decode())
                if latest.get("format") != _FORMAT:
                    raise ValueError(f"{path}: format {latest.get('format')!r}, expected "
                                     f"{_FORMAT}")
                found = (int(latest["commit"]), int(latest["size"]))
        except Exception as e:  # noqa: BLE001
            error = f"{type(e).__name__}: {e}"
    found, error = broadcast_object((found, error), 0, "elastic.latest")
    if error is not None:
        raise RuntimeError(f"{what}: {DIR_VARIABLE}={directory} cannot hold commits: {error}")
    return found


def _write_atomically(path, write):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
