"""Collectives on torch tensors through the arcreduce runtime.

Every ``*_async_`` call hands the tensor's memory to the runtime without a copy and returns a
handle; ``synchronize(handle)`` waits, raises ``ArcreduceError`` with the runtime's message if the
op failed, and returns the tensor. The runtime holds a reference to the tensor until then, so
deleting it early cannot free memory the runtime still uses; do not read or write it meanwhile.
Names must be identical on all ranks for the same tensor and unique among in-flight ops.
"""
import functools
import inspect
import sys
import warnings

import torch  # noqa: F401  (loads libtorch before the extension needs it)

from . import _C
from .process_sets import _after_init, _id_of, _size_of, global_process_set

ArcreduceError = _C.ArcreduceError

# Reduction ops (Horovod's names).
Average = "average"
Sum = "sum"
Min = "min"
Max = "max"
Product = "product"
# The runtime's ReduceOp values.
_REDUCE_OPS = {Sum: 0, Average: 1, Min: 2, Max: 3, Product: 4}
# Horovod's Adasum: named so that code using it gets a clear refusal, not an AttributeError.
Adasum = "adasum"
_OPS = (Average, Sum, Min, Max, Product, Adasum)


class Compression:
    """Per-tensor compression; unset fields fall back to the ARCREDUCE_* configuration, so
    ``Compression()`` is the job's compression. The collectives' ``compression=None`` is exact
    (``Compression.none``), as in Horovod; DistributedOptimizer's and the DDP hook's None is the
    job's compression.

    ``compressor``: none, fp16, topk, randk, arctopk, oktopk, powersgd (docs/compressors.md);
    ``ratio``: fraction of entries kept, in (0, 1]; ``error_feedback``: none, ef14, ef21, ef21m,
    efm (docs/pytorch.md, "Error feedback and the optimizer's momentum");
    ``granularity``: element or row (topk, randk).
    """

    __slots__ = ("compressor", "ratio", "error_feedback", "granularity")

    def __init__(self, compressor=None, ratio=None, error_feedback=None, granularity=None):
        self.compressor = compressor
        self.ratio = None if ratio is None else float(ratio)
        self.error_feedback = error_feedback
        self.granularity = granularity

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__
                           if getattr(self, k) is not None)
        return f"Compression({fields})"

    @staticmethod
    def of(value):
        """None, a compressor name or a Compression."""
        if value is None:
            return Compression()
        if isinstance(value, str):
            return Compression(value)
        if isinstance(value, Compression):
            return value
        raise TypeError(f"compression must be None, a compressor name or a Compression, "
                        f"not {type(value).__name__}")


    def compress(self, tensor):
        """Horovod's Compression interface, for code that compresses by itself: returns
        (tensor to send, context). fp16 casts floating-point tensors to float16; every other
        compression is applied by the runtime during the reduction, so this is the identity."""
        if self.compressor == "fp16" and tensor.is_floating_point():
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    def decompress(self, tensor, ctx):
        """The inverse of compress(): casts back to the dtype compress() saw."""
        return tensor if ctx is None else tensor.to(ctx)


Compression.none = Compression("none")
Compression.fp16 = Compression("fp16")


def init():
    """Initialises the runtime (and MPI, if needed) from the ARCREDUCE_* variables. Collective
    over all ranks; a second call is harmless. Raises ArcreduceError on bad configuration."""
    _C.init()
    _after_init()


def shutdown():
    """Stops the runtime on every rank; pending ops fail with a "shut down" error."""
    _C.shutdown()


def is_initialized():
    return _C.initialized()


def rank():
    return _C.rank()


def size():
    return _C.size()


def local_rank():
    return _C.local_rank()


def local_size():
    return _C.local_size()


# Names generated for ops submitted without one: a counter per kind and process set, so ranks
# that submit the same ops to a set in the same order (what a collective asks of them anyway)
# generate the same names.
_generated = {}


def _name_or_generated(name, kind, set_id=0):
    if name is None:
        n = _generated.get((kind, set_id), 0)
        _generated[(kind, set_id)] = n + 1
        return f"{kind}.noname.{n}"
    _check_name(name)
    return name


def _check_name(name):
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string identical on all ranks, not {name!r}")


def _check_tensor(tensor, name):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor '{name}' must be a torch.Tensor, not {type(tensor).__name__}")


# This rank's ops submitted through this module and not yet synchronized ((process set, name) ->
# handle and back), and the post-scale factor of each handle: a second op under the name of one
# still in flight in the same set is refused at submission (ValueError), as Horovod does, and the
# first one stands.
_handle_of = {}
_name_of = {}
_postscale = {}


def _check_not_in_flight(name, set_id=0):
    handle = _handle_of.get((set_id, name))
    if handle is not None and not _C.poll(handle):
        raise ValueError(f"tensor '{name}' is already in flight on this rank: names must be "
                         "unique among in-flight ops (synchronize the first one, or pick another "
                         "name)")


def _submitted(handle, name, postscale=1.0, divide_by=1, set_id=0):
    """Records the op of `handle`; synchronize() applies `postscale` (and, for an integer
    Average reduced as Sum, the truncating division by `divide_by`) to its result."""
    _handle_of[(set_id, name)] = handle
    _name_of[handle] = (set_id, name)
    if postscale != 1.0 or divide_by != 1:
        _postscale[handle] = (postscale, divide_by)
    return handle


def _scale_(tensor, factor):
    """tensor *= factor in place, as Horovod scales: integers in float64, then truncated; float16
    and bfloat16 in float32."""
    with torch.no_grad():
        if tensor.is_floating_point() and tensor.element_size() >= 4:
            tensor.mul_(factor)
        elif tensor.is_floating_point():
            tensor.copy_(tensor.float() * factor)
        else:
            tensor.copy_(tensor.double() * factor)


def _finish(tensor, post):
    postscale, divide_by = post
    if divide_by != 1:
        with torch.no_grad():
            tensor.copy_(torch.div(tensor, divide_by, rounding_mode="trunc"))
    if postscale != 1.0:
        _scale_(tensor, postscale)


def _integer_average(tensor, op, set_id=0):
    """Horovod averages integer tensors as the sum divided by the number of ranks, truncated:
    (op to submit, divisor). The runtime itself reduces integers only exactly."""
    if op == Average and isinstance(tensor, torch.Tensor) and not tensor.is_floating_point() \
            and not tensor.is_complex() and tensor.dtype != torch.bool:
        return Sum, _size_of(set_id)
    return op, 1


# Handles of ops with an output of their own (allgather, alltoall, reducescatter): their kind.
_output_kind = {}


def _forget(handle):
    name = _name_of.pop(handle, None)
    if name is not None and _handle_of.get(name) == handle:
        del _handle_of[name]
    return _postscale.pop(handle, (1.0, 1))


class _RefusedOnEveryRank:
    """Context of a submission: a TypeError or ValueError raised inside (a tensor or an argument
    refused on this rank, before the runtime saw it) is also sent to the other ranks, whose op of
    the same name then fails with it instead of waiting for this rank until the stall timeout."""

    def __init__(self, name, set_id=0):
        self.name = name
        self.set_id = set_id

    def __enter__(self):
        return self

    def __exit__(self, kind, error, _traceback):
        if kind is not None and issubclass(kind, (TypeError, ValueError, NotImplementedError)):
            _C.refuse(self.name, f"{kind.__name__}: {error}", self.set_id)
        return False


def _refuse_adasum(op, name):
    if op == Adasum:
        raise NotImplementedError(f"tensor '{name}': op Adasum is not supported by arcreduce "
                                  "(docs/pytorch.md, \"Limits\"); use Average or Sum")


def _check_reduction(tensor, name, op, prescale_factor, postscale_factor):
    """The checks every reduction's arguments get (inside _RefusedOnEveryRank); returns the
    factors as floats."""
    _check_tensor(tensor, name)
    _refuse_adasum(op, name)
    if op not in _REDUCE_OPS:
        raise ValueError("op must be arcreduce.torch.Average, Sum, Min, Max or Product, "
                         f"not {op!r}")
    return (_check_factor(prescale_factor, "prescale_factor", name),
            _check_factor(postscale_factor, "postscale_factor", name))


def _check_factor(factor, which, name):
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise TypeError(f"tensor '{name}': {which} must be a number, not "
                        f"{type(factor).__name__}")
    return float(factor)


def _is_op(value):
    return isinstance(value, str) and value in _OPS


def _op_of(op, average, name):
    """The reduction op from ``op`` and Horovod's ``average`` (deprecated there, still common in
    code written for it): average=True is Average, False is Sum, neither given is Average; both
    given is refused, as Horovod does."""
    if average is None:
        return Average if op is None else op
    if op is not None:
        raise ValueError(f"tensor '{name}': the op parameter supersedes average; pass only one "
                         f"of them (op={op!r}, average={average!r})")
    if not isinstance(average, (bool, int)):
        raise TypeError(f"tensor '{name}': average must be True or False, not "
                        f"{type(average).__name__}")
    warnings.warn("Parameter `average` has been replaced with `op` (average=True is op=Average, "
                  "False is op=Sum)", DeprecationWarning, stacklevel=_outside_package())
    return Average if average else Sum


def _outside_package():
    """warnings.warn()'s stacklevel, from the function that calls this one, of the first caller
    outside arcreduce.torch."""
    level, frame = 2, sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(__package__):
        level, frame = level + 1, frame.f_back
    return level


def _positional(horovod, arcreduce, arcreduce_order):
    """Decorator of a collective whose parameters after the first are keyword-only in its
    definition: the positional arguments after the first are bound in Horovod's order
    (``horovod``), or in arcreduce's own (``arcreduce``: the name second) where
    ``arcreduce_order(args)`` recognises a call written for that one. help() and inspect show
    Horovod's order."""
    def wrap(function):
        @functools.wraps(function)
        def call(first, *args, **kwargs):
            order = arcreduce if arcreduce_order(args) else horovod
            if len(args) > len(order):
                raise TypeError(f"{function.__name__}() takes at most {len(order) + 1} "
                                f"positional arguments ({len(args) + 1} given)")
            for key, value in zip(order, args):
                if key in kwargs:
                    raise TypeError(f"{function.__name__}() got multiple values for argument "
                                    f"'{key}'")
                kwargs[key] = value
            return function(first, **kwargs)

        signature = inspect.signature(function)
        params = list(signature.parameters.values())
        by_name = {p.name: p for p in params[1:]}
        listed = [by_name[k].replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for k in horovod]
        rest = [p for p in params[1:] if p.name not in horovod]
        call.__signature__ = signature.replace(parameters=[params[0]] + listed + rest)
        return call
    return wrap


def _name_second(args):
    """True for a call in arcreduce's order (tensor, name, op, compression, ...): a string second
    (Horovod's second argument, ``average``, is a bool or None), or None followed by a
    reduction op (Horovod's third is the name)."""
    return bool(args) and (isinstance(args[0], str)
                           or (args[0] is None and len(args) > 1 and _is_op(args[1])))


# Positional orders of the allreduces after their first argument: Horovod's (allreduce and
# grouped_allreduce; the others, which take no compression in Horovod, take it last), and
# arcreduce's own, kept for code written for it.
_ALLREDUCE_ORDER = ("average", "name", "compression", "op", "prescale_factor",
                    "postscale_factor", "process_set")
_ALLREDUCE_ASYNC_ORDER = ("average", "name", "op", "prescale_factor", "postscale_factor",
                          "process_set", "compression")
_ARCREDUCE_ORDER = ("name", "op", "compression", "prescale_factor", "postscale_factor",
                    "process_set")
_allreduce_signature = functools.partial(_positional, arcreduce=_ARCREDUCE_ORDER,
                                        arcreduce_order=_name_second)


@_allreduce_signature(_ALLREDUCE_ASYNC_ORDER)
def allreduce_async_(tensor, *, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set, compression=None):
    """Starts an in-place reduction over ranks of ``tensor`` (contiguous, on the CPU); returns a
    handle for synchronize(). ``op``: Average (the default) or Sum (floating-point tensors;
    compressed as ``compression`` says), or Min, Max, Product; integer tensors take Sum, Min,
    Max and Product (exact, wrapping like torch's integers), bool tensors Min, Max and Product.
    Every op other than a floating-point Sum or Average is reduced densely and exactly.
    ``compression``: None (exact, Horovod's default), a compressor name, or a Compression
    (``Compression()``: the job's ARCREDUCE_* compression).
    ``average``: Horovod's older form of ``op`` (True: Average, False: Sum), not with ``op``.

    ``name``: identical on every rank; None generates one (the same on every rank that submits
    its unnamed ops in the same order). ``prescale_factor`` multiplies the tensor before the
    reduction, ``postscale_factor`` the result (as Horovod's). ``process_set``: the ranks that
    take part (add_process_set). Positional arguments follow Horovod's order; arcreduce's
    ``(tensor, name, op, compression, ...)`` is recognised by the string name second."""
    set_id = _id_of(process_set)
    name = _name_or_generated(name, "allreduce", set_id)
    _check_not_in_flight(name, set_id)
    with _RefusedOnEveryRank(name, set_id):
        op = _op_of(op, average, name)
        prescale, postscale = _check_reduction(tensor, name, op, prescale_factor,
                                               postscale_factor)
        # None: exact, as Horovod's default. A tensor reduced on its own (a loss, a metric, a
        # buffer) must not go through the gradients' compressor or its error feedback (efm would
        # add the previous calls' momentum to it).
        c = Compression.none if compression is None else Compression.of(compression)
        op, divide_by = _integer_average(tensor, op, set_id)
        if prescale != 1.0:
            _scale_(tensor, prescale)
        handle = _C.allreduce_async_(tensor, name, _REDUCE_OPS[op], c.compressor, c.ratio,
                                     c.error_feedback, c.granularity, set_id)
    return _submitted(handle, name, postscale, divide_by, set_id)


@_allreduce_signature(_ALLREDUCE_ASYNC_ORDER)
def allreduce_async(tensor, *, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set, compression=None):
    """Out-of-place allreduce_async_: reduces a copy, ``tensor`` is left unchanged;
    synchronize() returns the new tensor."""
    copy = tensor.detach().clone(memory_format=torch.contiguous_format) if isinstance(
        tensor, torch.Tensor) else tensor
    return allreduce_async_(copy, average=average, name=name, op=op, compression=compression,
                            prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                            process_set=process_set)


@_allreduce_signature(_ALLREDUCE_ASYNC_ORDER)
def allreduce_(tensor, *, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set, compression=None):
    """In-place reduction; returns ``tensor`` once every rank has contributed."""
    return synchronize(allreduce_async_(
        tensor, average=average, name=name, op=op, compression=compression,
        prescale_factor=prescale_factor, postscale_factor=postscale_factor,
        process_set=process_set))


@_allreduce_signature(_ALLREDUCE_ORDER)
def allreduce(tensor, *, average=None, name=None, compression=None, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Out-of-place reduction: returns a new tensor, ``tensor`` is left unchanged.
    Differentiable: the gradient is reduced the same way (average or sum) under ``name``.grad."""
    from .autograd import allreduce_with_grad
    set_id = _id_of(process_set)
    name = _name_or_generated(name, "allreduce", set_id)
    with _RefusedOnEveryRank(name, set_id):
        op = _op_of(op, average, name)
    return allreduce_with_grad(tensor, name, op, compression, prescale_factor, postscale_factor,
                               process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast of ``tensor`` from ``root_rank`` (any dtype but complex; in a
    process set, root_rank is still a rank of the job, as in Horovod)."""
    set_id = _id_of(process_set)
    name = _name_or_generated(name, "broadcast", set_id)
    _check_not_in_flight(name, set_id)
    with _RefusedOnEveryRank(name, set_id):
        _check_tensor(tensor, name)
        if not isinstance(root_rank, int) or isinstance(root_rank, bool):
            raise TypeError(f"root_rank must be an int, not {type(root_rank).__name__}")
        handle = _C.broadcast_async_(tensor, name, root_rank, set_id)
    return _submitted(handle, name, set_id=set_id)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Out-of-place broadcast_async_: synchronize() returns a new tensor."""
    copy = tensor.detach().clone(memory_format=torch.contiguous_format) if isinstance(
        tensor, torch.Tensor) else tensor
    return broadcast_async_(copy, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Out-of-place broadcast: returns a new tensor holding root_rank's values. Differentiable:
    root_rank's gradient is the sum of every rank's, the others' zero."""
    from .autograd import broadcast_with_grad
    name = _name_or_generated(name, "broadcast", _id_of(process_set))
    return broadcast_with_grad(tensor, root_rank, name, process_set)


def join(device=-1):
    """For a rank that has run out of data: blocks until every rank has called join() and
    returns the rank that called it last (the same on every rank). Meanwhile this rank takes
    part in the other ranks' allreduces with zeros (an average still divides by size()); their
    other collectives fail with ArcreduceError naming it. As Horovod's join; ``device`` is
    accepted for Horovod's signature (CPU tensors only)."""
    return _C.join()


def barrier(process_set=global_process_set):
    """Returns once every rank (of ``process_set``) has called barrier() (an op through the
    coordinator, like the others: ranks must call it in the same order relative to their unnamed
    ops)."""
    allreduce_(torch.zeros(1), name=_name_or_generated(None, "barrier", _id_of(process_set)),
               op=Sum, compression=Compression.none, process_set=process_set)


def poll(handle):
    """True when the op of ``handle`` has completed (synchronize() will not block)."""
    if isinstance(handle, tuple):  # collectives.GroupHandle
        return all(_C.poll(h) for h in handle)
    return _C.poll(handle)


def _synchronize_group(group):
    """Synchronizes every handle of a group, then raises the first error (nothing is left in
    flight); returns the list of results."""
    out, error = [], None
    for h in group:
        try:
            out.append(synchronize(h))
        except Exception as e:  # noqa: BLE001
            error = error or e
    if error is not None:
        raise error
    return out


def _synchronize_rows(handle):
    """synchronize() of an allgather, alltoall or reducescatter handle: (output, rows per rank)."""
    post = _forget(handle)
    _output_kind.pop(handle, None)
    tensor, rows = _C.synchronize_output(handle)
    _finish(tensor, post)
    return tensor, rows


def synchronize(handle):
    """Waits for the op, returns its tensor (an alltoall's: the output and the rows received
    from each rank); raises ArcreduceError if it failed."""
    if isinstance(handle, tuple):  # collectives.GroupHandle
        return _synchronize_group(handle)
    kind = _output_kind.get(handle)
    if kind is not None:
        tensor, rows = _synchronize_rows(handle)
        return (tensor, torch.tensor(rows, dtype=torch.int64)) if kind == "alltoall" else tensor
    post = _forget(handle)
    tensor = _C.synchronize(handle)
    _finish(tensor, post)
    return tensor


def save_state(path):
    """Writes this rank's compressor state (error feedback, step counters) to ``path``; call
    between steps with nothing in flight, with a per-rank path."""
    _C.save_state(str(path))


def load_state(path):
    _C.load_state(str(path))


def config():
    """The configuration init() reads: the ARCREDUCE_* variables with their defaults (compressor,
    compress_ratio, error_feedback, ef_momentum, ef_init, ef_masking, warmup_steps) as a dict. Raises
    ArcreduceError on a bad variable, as init() would."""
    return _C.config()


def stats(process_set=global_process_set):
    """This rank's counters (ops, buckets, bytes, seconds, per compressor) as a dict; those of
    ``process_set``'s runtime when given (zeros where this rank is not a member)."""
    return _C.stats(_id_of(process_set))
