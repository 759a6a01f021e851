"""allgather, alltoall and reducescatter, their grouped forms, and allgather_object: ops whose
output is a new tensor shaped by every rank's input (Horovod's names and semantics). They go
through the coordinator like allreduce (negotiated, in Stats and the timeline), are never
compressed, and take CPU tensors of any dtype but complex (reducescatter: allreduce's rules)."""
import io

import torch

from . import _C
from .mpi_ops import (Average, Sum, _check_not_in_flight, _check_reduction, _integer_average,
                      _name_or_generated, _output_kind, _RefusedOnEveryRank, _REDUCE_OPS,
                      _scale_, _submitted, allreduce_async_, size, synchronize)

_KINDS = {"allgather": 0, "alltoall": 1, "reducescatter": 2}


def _submit(kind, tensor, name, op=Sum, splits=None, prescale_factor=1.0, postscale_factor=1.0):
    name = _name_or_generated(name, kind)
    _check_not_in_flight(name)
    with _RefusedOnEveryRank(name):
        prescale, postscale = _check_reduction(tensor, name, op, prescale_factor,
                                               postscale_factor)
        op, divide_by = _integer_average(tensor, op) if kind == "reducescatter" else (op, 1)
        if splits is None:
            splits = []
        elif isinstance(splits, torch.Tensor):
            if splits.is_floating_point() or splits.is_complex() or splits.dim() != 1:
                raise ValueError(f"tensor '{name}': splits must be a 1-D integer tensor, not "
                                 f"{splits.dtype} of shape {tuple(splits.shape)}")
            splits = splits.tolist()
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in splits):
            raise ValueError(f"tensor '{name}': splits must be integers, one per rank")
        if kind == "alltoall":
            _check_alltoall(tensor, splits, name)
        if prescale != 1.0:
            tensor = tensor.clone()
            _scale_(tensor, prescale)
        handle = _C.shaped_async(tensor, name, _KINDS[kind], _REDUCE_OPS[op], splits)
    _output_kind[handle] = kind
    return _submitted(handle, name, postscale, divide_by)


def _check_alltoall(tensor, splits, name):
    """What this rank can tell alone, as ValueError (as Horovod); the runtime checks again."""
    if tensor.dim() == 0:
        raise ValueError(f"tensor '{name}': alltoall works along the first dimension; a scalar "
                         "has none")
    if not splits:
        if tensor.shape[0] % size() != 0:
            raise ValueError(f"tensor '{name}': alltoall without splits needs a first dimension "
                             f"divisible by the {size()} ranks, not {tensor.shape[0]}")
        return
    if len(splits) != size() or any(s < 0 for s in splits) or sum(splits) != tensor.shape[0]:
        raise ValueError(f"tensor '{name}': alltoall takes one non-negative split per rank "
                         f"({size()}) summing to the first dimension {tensor.shape[0]}, not "
                         f"{splits}")


def allgather_async(tensor, name=None):
    """Starts an allgather: every rank's ``tensor`` concatenated along the first dimension in
    rank order (the first dimension may differ across ranks, the others must agree)."""
    return _submit("allgather", tensor, name)


def allgather(tensor, name=None):
    """Blocking allgather; differentiable (each rank's gradient is the sum over ranks of the
    output gradient's rows that came from it)."""
    from .autograd import allgather_with_grad
    return allgather_with_grad(tensor, _name_or_generated(name, "allgather"))


def grouped_allgather(tensors, name=None):
    """Allgathers of a list of tensors, submitted together; returns the list of outputs
    (differentiable like allgather)."""
    base = _name_or_generated(name, "grouped_allgather")
    if any(t.requires_grad for t in tensors) and torch.is_grad_enabled():
        return [allgather(t, f"{base}.{i}") for i, t in enumerate(tensors)]
    handles = [allgather_async(t, f"{base}.{i}") for i, t in enumerate(tensors)]
    return _wait_all(handles)


def allgather_object(obj, name=None):
    """Returns every rank's picklable ``obj`` as a list in rank order (torch.save bytes)."""
    base = _name_or_generated(name, "allgather_object")
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
    sizes = allgather(torch.tensor([data.numel()], dtype=torch.int64), base + ".sizes")
    gathered = allgather(data, base + ".data")
    out, offset = [], 0
    for n in sizes.tolist():
        chunk = gathered[offset:offset + n].numpy().tobytes()
        out.append(torch.load(io.BytesIO(chunk), map_location="cpu"))
        offset += n
    return out


def alltoall_async(tensor, splits=None, name=None):
    """Starts an alltoall: rows ``[sum(splits[:j]), +splits[j])`` of ``tensor`` go to rank j
    (splits: one per rank, a list or a tensor; None: equal shares). synchronize() returns the
    rows received, in rank order, and how many came from each rank."""
    return _submit("alltoall", tensor, name, splits=splits)


def alltoall(tensor, splits=None, name=None):
    """Blocking alltoall: returns the output, and with ``splits`` given (output,
    received_splits), as Horovod; differentiable."""
    from .autograd import alltoall_with_grad
    return alltoall_with_grad(tensor, splits, _name_or_generated(name, "alltoall"))


def reducescatter_async(tensor, name=None, op=Average, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts a reducescatter: the reduction of every rank's ``tensor`` (same shape everywhere),
    of which rank r receives its block of the first dimension (n // size rows, one more on the
    first n % size ranks)."""
    return _submit("reducescatter", tensor, name, op, None, prescale_factor, postscale_factor)


def reducescatter(tensor, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0):
    """Blocking reducescatter; differentiable for Average and Sum."""
    from .autograd import reducescatter_with_grad
    return reducescatter_with_grad(tensor, _name_or_generated(name, "reducescatter"), op,
                                   prescale_factor, postscale_factor)


def grouped_reducescatter(tensors, name=None, op=Average, prescale_factor=1.0,
                          postscale_factor=1.0):
    base = _name_or_generated(name, "grouped_reducescatter")
    if any(t.requires_grad for t in tensors) and torch.is_grad_enabled():
        return [reducescatter(t, f"{base}.{i}", op, prescale_factor, postscale_factor)
                for i, t in enumerate(tensors)]
    handles = [reducescatter_async(t, f"{base}.{i}", op, prescale_factor, postscale_factor)
               for i, t in enumerate(tensors)]
    return _wait_all(handles)


def _wait_all(handles):
    return synchronize(GroupHandle(handles))


class GroupHandle(tuple):
    """The handles of a grouped op; synchronize() and poll() take it like one handle."""


def grouped_allreduce_async_(tensors, name=None, op=Average, compression=None,
                             prescale_factor=1.0, postscale_factor=1.0):
    """In-place allreduces of a list of tensors, submitted together (they fuse where their
    signatures allow); returns one handle for synchronize(), which returns the list."""
    base = _name_or_generated(name, "grouped_allreduce")
    return GroupHandle(allreduce_async_(t, f"{base}.{i}", op, compression, prescale_factor,
                                        postscale_factor) for i, t in enumerate(tensors))


def grouped_allreduce_(tensors, name=None, op=Average, compression=None, prescale_factor=1.0,
                       postscale_factor=1.0):
    return synchronize(grouped_allreduce_async_(tensors, name, op, compression, prescale_factor,
                                                postscale_factor))


def grouped_allreduce_async(tensors, name=None, op=Average, compression=None,
                            prescale_factor=1.0, postscale_factor=1.0):
    """Out-of-place: the inputs are left unchanged."""
    copies = [t.detach().clone(memory_format=torch.contiguous_format) for t in tensors]
    return grouped_allreduce_async_(copies, name, op, compression, prescale_factor,
                                    postscale_factor)


def grouped_allreduce(tensors, name=None, op=Average, compression=None, prescale_factor=1.0,
                      postscale_factor=1.0):
    """Out-of-place allreduces of a list of tensors; differentiable like allreduce."""
    from .mpi_ops import allreduce
    base = _name_or_generated(name, "grouped_allreduce")
    if any(t.requires_grad for t in tensors) and torch.is_grad_enabled():
        return [allreduce(t, f"{base}.{i}", op, compression, prescale_factor, postscale_factor)
                for i, t in enumerate(tensors)]
    return grouped_allreduce_(
        [t.detach().clone(memory_format=torch.contiguous_format) for t in tensors], base, op,
        compression, prescale_factor, postscale_factor)
