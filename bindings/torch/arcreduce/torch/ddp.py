"""arcreduce's runtime as the gradient exchange of torch.nn.parallel.DistributedDataParallel.

``register_ddp_hook(ddp_model, optimizer)`` registers a DDP communication hook: each bucket DDP
hands over is reduced as one allreduce per parameter, a view of the bucket's buffer with the
parameter's own shape and a name of its own (``prefix`` and the parameter's name), so matrix
compressors see matrices and per-tensor state follows the parameter whatever bucket it is in.
The Future DDP waits on is completed by the runtime's completion callback of the bucket's last op
(bindings/torch/csrc/ddp_hook.cc). docs/ddp-hook.md has the semantics.
"""
import os

import torch

from . import _C
from .mpi_ops import (_REDUCE_OPS, Adasum, Average, Compression, Sum, config, init,
                      is_initialized, rank)
from .optimizer import _FEEDBACK_COMPRESSORS, _DistributedOptimizer, _pair_with_optimizer
from .process_sets import _id_of, _size_of, global_process_set


class DDPHookState:
    """The state DDP passes to ``ddp_comm_hook`` with each bucket: the parameters' names, the
    compression and its pairing with the optimizer. Made by ``register_ddp_hook``; keep it to
    ask what the hook does (``gradient_names()``, ``gradient_compression()``,
    ``momentum_in_runtime()``)."""

    def __init__(self, ddp_model, optimizer=None, compression=None, op=Average,
                 process_set=global_process_set, prefix="grad."):
        from torch.nn.parallel import DistributedDataParallel
        if not isinstance(ddp_model, DistributedDataParallel):
            raise TypeError("register_ddp_hook takes a torch.nn.parallel.DistributedDataParallel "
                            f"model, not {type(ddp_model).__name__}; for a plain module use "
                            "arcreduce.torch.DistributedOptimizer")
        if not is_initialized():
            init()  # collective, as registering the hook is on every rank of DDP's group
        if op == Adasum:
            raise NotImplementedError("register_ddp_hook: op=Adasum is not supported by "
                                      "arcreduce; use op=Average (DDP's) or Sum")
        if op not in (Average, Sum):
            raise ValueError("register_ddp_hook: op must be arcreduce.torch.Average (DDP's "
                             f"average) or Sum, not {op!r}")
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a string, not {type(prefix).__name__}")
        set_id = _id_of(process_set)
        if not process_set.included():
            raise ValueError(f"rank {rank()} is not in the process set {process_set!r}")
        group_size = ddp_model.process_group.size()
        if group_size != _size_of(set_id):
            raise ValueError(f"DDP's process group has {group_size} ranks but the arcreduce "
                             f"process set {_size_of(set_id)}: give DDP the group of the same "
                             "ranks (arcreduce.torch.init_process_group() makes one of every "
                             "rank), and start the job with arcrun or mpirun (under torchrun "
                             "each process is an arcreduce job of its own)")
        for name, p in ddp_model.module.named_parameters():
            if p.device.type != "cpu":
                raise ValueError(f"parameter '{name}' is on device {p.device}; this build of "
                                 "arcreduce.torch reduces CPU tensors only")
        for module in ddp_model.module.modules():
            if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and module.sparse:
                raise TypeError(f"{type(module).__name__}(sparse=True): the arcreduce DDP hook "
                                "reduces dense gradients only; use sparse=False, or "
                                "DistributedOptimizer, which allgathers sparse gradients")
        if optimizer is not None:
            if not isinstance(optimizer, torch.optim.Optimizer):
                raise TypeError("optimizer must be the torch.optim.Optimizer that updates the "
                                f"DDP model, not {type(optimizer).__name__}")
            if isinstance(optimizer, _DistributedOptimizer):
                raise ValueError("optimizer is a DistributedOptimizer, which reduces the "
                                 "gradients itself: under DDP with this hook pass the plain "
                                 "optimizer")
        self._requested = Compression.of(compression)
        self._op = op
        self._set_id = set_id
        self._optimizer = optimizer
        self._names = {p: prefix + name for name, p in ddp_model.module.named_parameters()
                       if p.requires_grad}
        self._by_pointer = {p.data_ptr(): n for p, n in self._names.items()}
        self._shapes = {}  # name -> shape as last submitted
        self._layouts = {}  # bucket index -> (key, names, offsets, shapes); see _layout()
        # (Compression, carries momentum) of the step in flight; made again at each backward's
        # first bucket. Refusals are raised here, at registration, too.
        self._pairing = self._pair()
        if optimizer is not None:
            _hand_momentum_over(optimizer, self)

    def _pair(self):
        if self._optimizer is not None:
            return _pair_with_optimizer(self._optimizer, self._requested)
        return _pair_without_optimizer(self._requested), False

    def gradient_names(self):
        """{parameter: name}: the name each parameter's gradient is reduced under, the same on
        every rank and in every step, whatever bucket DDP puts it in; a copy."""
        return dict(self._names)

    def gradient_compression(self):
        """The Compression the gradients are reduced with, after the pairing with the optimizer
        (docs/ddp-hook.md, "The optimizer's momentum")."""
        return self._pairing[0]

    def momentum_in_runtime(self):
        """True when the runtime's efm applies the SGD momentum and the optimizer's step() runs
        without it (the groups keep their momentum)."""
        return self._pairing[1]

    def submitted_shapes(self):
        """{name: shape} of the gradients as last submitted: each parameter's own shape."""
        return dict(self._shapes)

    def _name_of(self, p):
        name = self._names.get(p)
        if name is None:
            name = self._by_pointer.get(p.data_ptr())
        if name is None:
            raise ValueError(f"a parameter of shape {tuple(p.shape)} in a DDP bucket is not a "
                             "parameter of the model the hook was registered for")
        return name

    def _run(self, bucket):
        buffer = bucket.buffer()
        if bucket.index() == 0:
            # The first bucket of a backward pass (DDP launches them in index order): the
            # pairing with the optimizer's hyperparameters of now, after any
            # load_state_dict() or broadcast of the optimizer's state.
            self._pairing = self._pair()
        names, offsets, shapes = self._layout(bucket, buffer)
        c = self._pairing[0]
        # The backward's last bucket: the runtime is told that DDP is about to wait
        # (bindings/torch/csrc/ddp_hook.cc, LastBucketWaiter).
        return _C.bucket_allreduce_async(buffer, names, offsets, shapes, _REDUCE_OPS[self._op],
                                         c.compressor, c.ratio, c.error_feedback, c.granularity,
                                         self._set_id, bucket.is_last())

    def _layout(self, bucket, buffer):
        """The bucket's (names, offsets in elements, shapes), from its gradients' views; kept per
        bucket index while the bucket holds the same parameters in the same buffer (DDP's
        rebuild makes new buffers)."""
        params = bucket.parameters()
        key = (buffer.data_ptr(), buffer.numel(), tuple(id(p) for p in params))
        cached = self._layouts.get(bucket.index())
        if cached is None or cached[0] != key:
            base = buffer.storage_offset()
            names, offsets, shapes = [], [], []
            for p, g in zip(params, bucket.gradients()):
                names.append(self._name_of(p))
                offsets.append(g.storage_offset() - base)
                shapes.append(list(g.shape))
            cached = (key, names, offsets, shapes)
            self._layouts[bucket.index()] = cached
        _, names, offsets, shapes = cached
        self._shapes.update(zip(names, map(tuple, shapes)))
        return names, offsets, shapes


def ddp_comm_hook(state, bucket):
    """The communication hook: ``ddp_model.register_comm_hook(DDPHookState(ddp_model, ...),
    ddp_comm_hook)`` is what ``register_ddp_hook`` does."""
    return state._run(bucket)


def register_ddp_hook(ddp_model, optimizer=None, compression=None, op=Average,
                      process_set=global_process_set, prefix="grad."):
    """Makes arcreduce the gradient exchange of ``ddp_model`` (a DistributedDataParallel);
    returns the hook's DDPHookState.

    ``optimizer``: the optimizer that updates the model. With it the error feedback is paired
    with it as DistributedOptimizer does: an SGD with momentum hands its momentum to the runtime's
    efm (its step() then runs without it), an adaptive optimizer gets no error feedback and ratio
    0.5. Without it the default efm is replaced by ef14 (the momentum stays with the optimizer),
    and efm asked for explicitly is refused. ``compression``: None (the ARCREDUCE_*
    configuration), a compressor name or a Compression. ``op``: Average (DDP's) or Sum.
    ``process_set``: the arcreduce ranks of DDP's process group (every rank by default).
    ``prefix``: put before each parameter's name (DistributedOptimizer's by default); give each
    DDP model of a job its own. Collective: every rank of DDP's group calls it (it calls init()
    where the runtime is not initialised yet). Call it before creating an LR scheduler of
    ``optimizer``."""
    state = DDPHookState(ddp_model, optimizer, compression, op, process_set, prefix)
    ddp_model.register_comm_hook(state, ddp_comm_hook)
    return state


def _pair_without_optimizer(compression):
    """Without the optimizer the hook cannot hand its momentum to efm: the default efm becomes
    ef14 (feedback of the residual alone; the optimizer keeps its momentum), efm asked for by
    name is refused."""
    settings = config()
    compressor = compression.compressor or settings["compressor"]
    feedback = compression.error_feedback or settings["error_feedback"]
    if compressor not in _FEEDBACK_COMPRESSORS or feedback != "efm":
        return compression
    chosen = (compression.error_feedback == "efm"
              or os.environ.get("ARCREDUCE_ERROR_FEEDBACK", "").strip().lower() == "efm")
    if chosen:
        raise ValueError("error feedback 'efm' applies the optimizer's SGD momentum inside the "
                         "runtime, and the optimizer would apply it again: pass "
                         "optimizer= to register_ddp_hook so that its momentum is handed over, "
                         "or choose error feedback 'ef14'")
    return Compression(compression.compressor, compression.ratio, "ef14",
                       compression.granularity)


class _MomentumInRuntime:
    """Mixin put before the optimizer's class (the instance's class is replaced by a subclass):
    step() runs with momentum 0 while the hook's efm carries the SGD momentum."""

    def step(self, *args, **kwargs):
        state = self._arc_ddp_state
        if not (state._pairing and state._pairing[1]):
            return super().step(*args, **kwargs)
        saved = [g.get("momentum") for g in self.param_groups]
        for g in self.param_groups:
            g["momentum"] = 0.0
        try:
            return super().step(*args, **kwargs)
        finally:
            for g, m in zip(self.param_groups, saved):
                g["momentum"] = m


def _hand_momentum_over(optimizer, state):
    if isinstance(optimizer, _MomentumInRuntime):
        if optimizer._arc_ddp_state is not state:
            raise ValueError("optimizer is already paired with another arcreduce DDP hook")
        return
    if "step" in vars(optimizer) and isinstance(optimizer, torch.optim.SGD):
        # An LR scheduler (or anything else) has put its own step() on the instance; it calls
        # the class's original step(), so the momentum could not be taken out of it.
        raise ValueError("optimizer.step was replaced on the instance (an LR scheduler created "
                         "before register_ddp_hook?): call register_ddp_hook before creating "
                         "the scheduler")
    cls = optimizer.__class__
    optimizer.__class__ = type(cls.__name__, (_MomentumInRuntime, cls), {})
    optimizer._arc_ddp_state = state
