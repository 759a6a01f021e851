"""Collectives on torch tensors through the arcreduce runtime.

Every ``*_async_`` call hands the tensor's memory to the runtime without a copy and returns a
handle; ``synchronize(handle)`` waits, raises ``ArcreduceError`` with the runtime's message if the
op failed, and returns the tensor. The runtime holds a reference to the tensor until then, so
deleting it early cannot free memory the runtime still uses; do not read or write it meanwhile.
Names must be identical on all ranks for the same tensor and unique among in-flight ops.
"""
import torch  # noqa: F401  (loads libtorch before the extension needs it)

from . import _C

ArcreduceError = _C.ArcreduceError

# Reduction ops (Horovod's names).
Average = "average"
Sum = "sum"


class Compression:
    """Per-tensor compression; unset fields fall back to the ARCREDUCE_* configuration.

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


Compression.none = Compression("none")
Compression.fp16 = Compression("fp16")


def init():
    """Initialises the runtime (and MPI, if needed) from the ARCREDUCE_* variables. Collective
    over all ranks; a second call is harmless. Raises ArcreduceError on bad configuration."""
    _C.init()


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


def _check_name(name):
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string identical on all ranks, not {name!r}")


def _check_tensor(tensor, name):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor '{name}' must be a torch.Tensor, not {type(tensor).__name__}")


def allreduce_async_(tensor, name, op=Average, compression=None):
    """Starts an in-place reduction (average or sum over ranks) of ``tensor`` (float32, float64,
    float16 or bfloat16, contiguous, on the CPU); returns a handle for synchronize()."""
    _check_name(name)
    _check_tensor(tensor, name)
    if op not in (Average, Sum):
        raise ValueError(f"op must be arcreduce.torch.Average or Sum, not {op!r}")
    c = Compression.of(compression)
    return _C.allreduce_async_(tensor, name, op == Average, c.compressor, c.ratio,
                               c.error_feedback, c.granularity)


def allreduce_(tensor, name, op=Average, compression=None):
    """In-place reduction; returns ``tensor`` once every rank has contributed."""
    return synchronize(allreduce_async_(tensor, name, op, compression))


def allreduce(tensor, name, op=Average, compression=None):
    """Out-of-place reduction: returns a new tensor, ``tensor`` is left unchanged."""
    return allreduce_(tensor.detach().clone(memory_format=torch.contiguous_format), name, op,
                      compression)


def broadcast_async_(tensor, root_rank, name):
    """Starts an in-place broadcast of ``tensor`` from ``root_rank`` (any dtype but complex)."""
    _check_name(name)
    _check_tensor(tensor, name)
    if not isinstance(root_rank, int) or isinstance(root_rank, bool):
        raise TypeError(f"root_rank must be an int, not {type(root_rank).__name__}")
    return _C.broadcast_async_(tensor, name, root_rank)


def broadcast_(tensor, root_rank, name):
    return synchronize(broadcast_async_(tensor, root_rank, name))


def broadcast(tensor, root_rank, name):
    """Out-of-place broadcast: returns a new tensor holding root_rank's values."""
    return broadcast_(tensor.detach().clone(memory_format=torch.contiguous_format), root_rank,
                      name)


def poll(handle):
    """True when the op of ``handle`` has completed (synchronize() will not block)."""
    return _C.poll(handle)


def synchronize(handle):
    """Waits for the op, returns its tensor; raises ArcreduceError if it failed."""
    return _C.synchronize(handle)


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


def stats():
    """This rank's counters (ops, buckets, bytes, seconds, per compressor) as a dict."""
    return _C.stats()
