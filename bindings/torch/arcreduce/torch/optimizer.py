"""DistributedOptimizer: averages gradients across ranks while backward runs.

Each parameter's gradient is handed to the runtime from a hook on its gradient accumulator as
soon as backward has produced it, so the reduction of early layers overlaps the backward pass
of the others; ``step()`` waits for all of them and then runs the wrapped optimizer's update.
"""
import contextlib
import math
import os
import warnings

import torch

from .collectives import sparse_allreduce_async
from .mpi_ops import (_REDUCE_OPS, Adasum, Average, Compression, _positional, allreduce_async,
                      allreduce_async_, config, synchronize)
from .process_sets import _id_of, global_process_set

# Compressors that take ARCREDUCE_ERROR_FEEDBACK (the others ignore it or keep their own).
_FEEDBACK_COMPRESSORS = ("topk", "randk", "arctopk")

# Optimizers that divide each coordinate's step by a running average of its squared gradients.
_ADAPTIVE_OPTIMIZERS = tuple(
    getattr(torch.optim, name)
    for name in ("Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad", "Adadelta", "RMSprop",
                 "SparseAdam")
    if hasattr(torch.optim, name))

# The ratio adaptive optimizers get where none is set (Compression.ratio, ARCREDUCE_COMPRESS_RATIO):
# on examples/05's transformer (AdamW) ratio 0.01 did not reach dense's loss + 1% in three times
# dense's steps; docs/time-to-accuracy.md, "Adaptive optimizers".
ADAPTIVE_RATIO = 0.5


class _DistributedOptimizer:
    """Mixin placed before the wrapped optimizer's class in the MRO (see DistributedOptimizer)."""

    def _arc_setup(self, named_parameters, compression, op, backward_passes_per_step, prefix,
                   process_set, sparse_as_dense, gradient_predivide_factor):
        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            names = {}
            for g, group in enumerate(self.param_groups):
                for i, p in enumerate(group["params"]):
                    names[p] = f"{g}.{i}"
        else:
            names = _names_of(named_parameters, params)
        if not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be an int >= 1, "
                             f"not {backward_passes_per_step!r}")
        # What the user asked for; the pairing with the optimizer's hyperparameters is made at
        # each step's first submission (_arc_pair), after broadcast_optimizer_state() or
        # load_state_dict() may have changed them, never at wrap time.
        self._arc_requested = Compression.of(compression)
        self._arc_pairing = None  # (Compression, carries momentum) of the step in flight
        self._arc_skip_sync = False
        self._arc_op = op
        # Horovod's split of the average: 1/F before the sum, F/size after it.
        self._arc_factors = {} if gradient_predivide_factor == 1.0 else dict(
            prescale_factor=1.0 / gradient_predivide_factor,
            postscale_factor=gradient_predivide_factor)
        _id_of(process_set)  # raises for a set that is not registered
        self._arc_process_set = process_set
        self._arc_sparse_as_dense = bool(sparse_as_dense)
        # Ranks outside the process set train on their own: no hooks, no reduction (Horovod's).
        self._arc_included = process_set.included()
        self._arc_passes = backward_passes_per_step
        self._arc_names = {p: prefix + names[p] for p in params}
        # Horovod's (private) {parameter: name}: the names of named_parameters, without prefix.
        self._parameter_names = {p: names[p] for p in params}
        self._arc_params = [p for p in params if p.requires_grad]
        self._arc_handles = {}
        self._arc_delay = {p: backward_passes_per_step for p in self._arc_params}
        self._arc_synchronized = False
        self._arc_grad_accs = []
        with torch.enable_grad():
            for p in (self._arc_params if self._arc_included else []):
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(self._arc_hook(p))
                self._arc_grad_accs.append(accumulator)

    def _arc_hook(self, p):
        def hook(*_):
            if p in self._arc_handles:
                raise RuntimeError(
                    f"the gradient of '{self._arc_names[p]}' was produced again before step(); "
                    "DistributedOptimizer reduces once per step: call step() (or synchronize()) "
                    "after each backward, or pass backward_passes_per_step")
            self._arc_delay[p] -= 1
            if self._arc_delay[p] == 0:
                self._arc_submit(p)
        return hook

    def _arc_pair(self):
        """The step's (Compression, carries momentum): fixed at its first submission."""
        if self._arc_pairing is None:
            self._arc_pairing = _pair_with_optimizer(self, self._arc_requested)
        return self._arc_pairing

    def _arc_submit(self, p):
        compression = self._arc_pair()[0]
        self._arc_synchronized = False
        name, ps = self._arc_names[p], self._arc_process_set
        if p.grad.is_sparse:
            # A sparse gradient (nn.Embedding(sparse=True)) is reduced by allgathering its rows,
            # or densely with sparse_as_dense; either way the reduced gradient replaces p.grad
            # in sparse form (sparse optimizers such as SparseAdam need one). A callable handle.
            if self._arc_sparse_as_dense:
                dense = allreduce_async(p.grad.to_dense(), name=name, op=self._arc_op,
                                        compression=compression, process_set=ps,
                                        **self._arc_factors)
                self._arc_handles[p] = lambda: synchronize(dense).to_sparse()
            else:
                # The allgather's average is exact: no pre/post-scaling to split.
                self._arc_handles[p] = sparse_allreduce_async(p.grad, name, self._arc_op, ps)
            return
        self._arc_handles[p] = allreduce_async_(p.grad, name=name, op=self._arc_op,
                                                compression=compression, process_set=ps,
                                                **self._arc_factors)

    def gradient_names(self):
        """{parameter: name}: the name each parameter's gradient is reduced under (``prefix``
        and its name), the same on every rank; a copy."""
        return dict(self._arc_names)

    def gradient_compression(self):
        """The Compression the gradients are reduced with: the one passed in, paired with this
        optimizer's current hyperparameters (its error feedback, and an adaptive optimizer's
        ratio; docs/pytorch.md, "Error feedback and the optimizer's momentum")."""
        if self._arc_pairing is not None:
            return self._arc_pairing[0]
        return _pair_with_optimizer(self, self._arc_requested)[0]

    def momentum_in_runtime(self):
        """True when the SGD momentum of the param groups is applied by the runtime (efm) and
        step() runs the wrapped update with momentum 0; the groups keep their momentum."""
        if self._arc_pairing is not None:
            return self._arc_pairing[1]
        return _pair_with_optimizer(self, self._arc_requested)[1]

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this block does not synchronize: for code that called synchronize()
        itself (e.g. to clip the averaged gradients), as in Horovod."""
        self._arc_skip_sync = True
        try:
            yield
        finally:
            self._arc_skip_sync = False

    def synchronize(self):
        """Waits until every gradient is averaged. Parameters whose hook did not fire on this
        rank (unused in this step's forward) are submitted now, a zero gradient where they have
        none, so every rank submits every name. Raises the first error after all ops ended.
        Nothing to wait for on a rank outside the optimizer's process set."""
        if not self._arc_included:
            self._arc_synchronized = True
            return
        for p in self._arc_params:
            if p not in self._arc_handles:
                if p.grad is None:
                    p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
                self._arc_submit(p)
        error = None
        for p, handle in self._arc_handles.items():
            try:
                if callable(handle):  # a sparse gradient: the result replaces it
                    p.grad = handle()
                else:
                    synchronize(handle)
            except Exception as e:  # noqa: BLE001  (wait for every op before raising)
                error = error or e
        self._arc_handles.clear()
        self._arc_delay = {p: self._arc_passes for p in self._arc_params}
        self._arc_synchronized = True
        if error is not None:
            raise error

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._arc_skip_sync:
            if self._arc_handles:
                raise RuntimeError("step() inside skip_synchronize() while gradients are being "
                                   "reduced: call synchronize() before the block")
        elif self._arc_synchronized:
            warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                          "context after optimizer.synchronize(); the gradients are not reduced "
                          "twice, but use `with optimizer.skip_synchronize(): optimizer.step()` "
                          "to say so", stacklevel=2)
        else:
            self.synchronize()
        carries = self._arc_pairing is not None and self._arc_pairing[1]
        saved = [g.get("momentum") for g in self.param_groups] if carries else None
        try:
            if carries:
                # The runtime applied the momentum (efm) before compression: the wrapped
                # update runs without it. The groups keep their value, so state_dict(),
                # load_state_dict() and broadcast_optimizer_state() see the user's momentum.
                for g in self.param_groups:
                    g["momentum"] = 0.0
            super().step()
        finally:
            if carries:
                for g, m in zip(self.param_groups, saved):
                    g["momentum"] = m
        self._arc_synchronized = False
        self._arc_pairing = None
        return loss

    def zero_grad(self, set_to_none=False):
        if self._arc_handles:
            raise RuntimeError("zero_grad() was called while gradients are being reduced; "
                               "call step() or synchronize() first")
        return super().zero_grad(set_to_none)


def _pair_with_optimizer(optimizer, compression):
    """Pairs the compression in effect with the optimizer's current hyperparameters
    (docs/pytorch.md, "Error feedback and the optimizer's momentum"); returns the Compression
    the parameters are reduced with and whether the runtime carries the SGD momentum. Pure: the
    optimizer is not changed (step() runs the update without momentum when it is carried).

    efm keeps heavy-ball momentum inside the runtime, where it sees the whole gradient before
    compression (momentum correction): an SGD with momentum mu hands its momentum over (mu must
    equal 1 - ARCREDUCE_EF_ETA). An adaptive optimizer (Adam
    and the like) keeps its moments and gets no error feedback instead, and ADAPTIVE_RATIO where
    no ratio is set; any other optimizer keeps its moments and gets ef14, so momentum is never
    applied twice. ef21m on top of SGD momentum is refused: the two momenta stack and training
    diverges."""
    settings = config()
    compressor = compression.compressor or settings["compressor"]
    feedback = compression.error_feedback or settings["error_feedback"]
    if compressor not in _FEEDBACK_COMPRESSORS:
        return compression, False
    groups = optimizer.param_groups
    sgd = isinstance(optimizer, torch.optim.SGD)
    momenta = sorted({float(g.get("momentum", 0.0)) for g in groups}) if sgd else []
    if feedback == "ef21m" and sgd and any(m > 0 for m in momenta):
        raise ValueError(
            f"error feedback 'ef21m' carries its own momentum and diverges stacked on SGD "
            f"momentum {momenta[-1]}: use SGD momentum=0 with the learning rate divided by "
            f"ARCREDUCE_EF_ETA ({settings['ef_momentum']}) and ARCREDUCE_EF_INIT=zero, or "
            "error feedback 'efm', which takes the optimizer's momentum over by itself")
    if isinstance(optimizer, _ADAPTIVE_OPTIMIZERS):
        ratio = compression.ratio
        preset = os.environ.get("ARCREDUCE_PRESET", "default").strip().lower()
        if (ratio is None and "ARCREDUCE_COMPRESS_RATIO" not in os.environ
                and preset in ("", "default")):  # a preset sets a ratio of its own
            ratio = ADAPTIVE_RATIO
        # Under a per-coordinate step size a residual delivered late arrives as one outsized
        # step; without feedback, measured on the transformer, the loss falls faster.
        kind = "none" if feedback == "efm" else compression.error_feedback
        return Compression(compression.compressor, ratio, kind, compression.granularity), False
    if feedback != "efm":
        return compression, False
    carries = (sgd and momenta and momenta[0] > 0
               and all(not g.get("nesterov", False) and float(g.get("dampening", 0.0)) == 0.0
                       for g in groups))
    if not carries:
        # SGD without momentum, Nesterov or dampened SGD, any other optimizer: its own update
        # stays as it is and the residual of compression is fed back alone.
        return _with_feedback(compression, "ef14"), False
    eta = float(settings["ef_momentum"])
    if len(momenta) > 1 or abs((1.0 - momenta[0]) - eta) > 1e-6:
        raise ValueError(
            f"error feedback 'efm' carries the optimizer's momentum with ARCREDUCE_EF_ETA="
            f"{eta} (momentum {1.0 - eta:g}), but the SGD groups have momentum "
            f"{', '.join(f'{m:g}' for m in momenta)}: set ARCREDUCE_EF_ETA to 1 - momentum "
            "(one value for all groups)")
    return _with_feedback(compression, "efm"), True


def _with_feedback(compression, kind):
    return Compression(compression.compressor, compression.ratio, kind, compression.granularity)


def _names_of(named_parameters, params):
    named = list(named_parameters)
    names = {}
    seen = set()
    for entry in named:
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], torch.Tensor)):
            raise TypeError("named_parameters must be (name, tensor) pairs such as "
                            f"model.named_parameters(), got an item {entry!r:.80}")
        name, p = entry
        if name in seen:
            raise ValueError(f"named_parameters holds the name '{name}' twice")
        seen.add(name)
        names[p] = name
    unnamed = [p for p in params if p not in names]
    if unnamed:
        raise ValueError(f"{len(unnamed)} of the optimizer's {len(params)} parameters are not "
                         "in named_parameters (first shape "
                         f"{tuple(unnamed[0].shape)}); pass model.named_parameters() of the "
                         "model whose parameters the optimizer updates")
    return names


def _check_op(op, gradient_predivide_factor):
    """Refusals at wrap time of what the gradients' reduction could not do (Horovod's rules for
    gradient_predivide_factor)."""
    if op == Adasum:
        raise NotImplementedError("DistributedOptimizer: op=Adasum is not supported by arcreduce "
                                  "(docs/pytorch.md, \"Limits\"); use op=Average or Sum")
    if not isinstance(op, str) or op not in _REDUCE_OPS:
        raise ValueError("DistributedOptimizer: op must be arcreduce.torch.Average, Sum, Min, Max "
                         f"or Product, not {op!r}")
    factor = gradient_predivide_factor
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise TypeError("DistributedOptimizer: gradient_predivide_factor must be a number, not "
                        f"{type(factor).__name__}")
    if not math.isfinite(factor) or factor <= 0:
        raise ValueError("DistributedOptimizer: gradient_predivide_factor must be a positive "
                         f"finite number, not {factor!r}")
    if factor != 1.0 and op != Average:
        raise ValueError("DistributedOptimizer: gradient_predivide_factor is only supported with "
                         f"op=Average (it splits the average), not op={op!r}")
    return float(factor)


def _check_groups(num_groups, groups):
    """Horovod's explicit grouping of the gradients' allreduces, accepted for its signature: the
    runtime fuses the gradients by itself, so the grouping changes neither the result nor the
    ops' names."""
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 0:
        raise ValueError(f"num_groups must be an int >= 0, not {num_groups!r}")
    if groups is None or (isinstance(groups, int) and not isinstance(groups, bool)
                          and groups > 0):
        return
    if not isinstance(groups, list) or not all(
            isinstance(g, (list, tuple)) and all(isinstance(p, torch.Tensor) for p in g)
            for g in groups):
        raise ValueError("groups must be a positive int or a list of lists of torch.Tensor, "
                         f"not {groups!r:.80}")


# Positional orders after the optimizer: Horovod's, and arcreduce's own (op fourth, a string,
# where Horovod has backward_passes_per_step).
_OPTIMIZER_ORDER = ("named_parameters", "compression", "backward_passes_per_step", "op",
                    "gradient_predivide_factor", "num_groups", "groups", "sparse_as_dense",
                    "process_set")
_OPTIMIZER_ARCREDUCE_ORDER = ("named_parameters", "compression", "op",
                              "backward_passes_per_step", "prefix", "process_set",
                              "sparse_as_dense")


@_positional(_OPTIMIZER_ORDER, _OPTIMIZER_ARCREDUCE_ORDER,
             lambda args: len(args) > 2 and isinstance(args[2], str))
def DistributedOptimizer(optimizer, *, named_parameters=None, compression=None,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set, prefix="grad."):
    """Returns a distributed version of ``optimizer``: an instance of a subclass of its class
    sharing its parameter groups, hyperparameters and state (keep using the returned object).

    ``named_parameters``: ``model.named_parameters()``, names that are stable across ranks
    (otherwise positions in the parameter groups are used). ``compression``: None (the
    ARCREDUCE_* configuration), a compressor name or a ``Compression``. ``op``: Average or Sum
    (or Min, Max, Product; Adasum is refused here). ``gradient_predivide_factor`` (Average only):
    the gradients are divided by it before the sum and the sum multiplied by it divided by the
    number of ranks after, as Horovod's; 1.0 does nothing. ``backward_passes_per_step``: backward
    passes whose gradients accumulate before one reduction. ``num_groups``, ``groups``: accepted
    for Horovod's signature; the runtime fuses the gradients by itself. ``process_set``: the
    ranks whose gradients are averaged together; the ranks outside it update from their own
    gradients (as Horovod). ``sparse_as_dense``: reduce sparse gradients densely (one allreduce
    of the whole tensor) instead of allgathering their rows. ``prefix``: put before each
    parameter's name to name its gradient's reduction. Positional arguments follow Horovod's
    order; arcreduce's ``(optimizer, named_parameters, compression, op, ...)`` is recognised by
    the op fourth.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, not {type(optimizer).__name__}")
    if isinstance(optimizer, _DistributedOptimizer):
        raise ValueError("optimizer is already a DistributedOptimizer")
    factor = _check_op(op, gradient_predivide_factor)
    _check_groups(num_groups, groups)
    cls = type(optimizer.__class__.__name__, (_DistributedOptimizer, optimizer.__class__), {})
    distributed = cls.__new__(cls)
    distributed.__dict__.update(optimizer.__dict__)
    distributed._arc_setup(named_parameters, compression, op, backward_passes_per_step, prefix,
                           process_set, sparse_as_dense, factor)
    return distributed
