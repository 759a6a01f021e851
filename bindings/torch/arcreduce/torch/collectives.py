"""allgather, alltoall and reducescatter, their grouped forms, and allgather_object: ops whose
output is a new tensor shaped by every rank's input (Horovod's names and semantics). They go
through the coordinator like allreduce (negotiated, in Stats and the timeline), are never
compressed, and take CPU tensors of any dtype but complex (reducescatter: allreduce's rules)."""
import io

import torch

from . import _C
from .mpi_ops import (_ALLREDUCE_ASYNC_ORDER, _ALLREDUCE_ORDER, Average, Compression, Sum,
                      _check_not_in_flight, _check_reduction, _integer_average, _is_op,
                      _name_or_generated, _op_of, _output_kind, _positional, _RefusedOnEveryRank,
                      _REDUCE_OPS, _scale_, _submitted, allreduce_async_, _allreduce_signature,
                      synchronize)
from .process_sets import _id_of, _size_of, global_process_set

PS = global_process_set  # the default of every process_set argument below

_KINDS = {"allgather": 0, "alltoall": 1, "reducescatter": 2}


def _submit(kind, tensor, name, op=Sum, splits=None, prescale_factor=1.0, postscale_factor=1.0,
            process_set=PS):
    set_id = _id_of(process_set)
    name = _name_or_generated(name, kind, set_id)
    _check_not_in_flight(name, set_id)
    with _RefusedOnEveryRank(name, set_id):
        prescale, postscale = _check_reduction(tensor, name, op, prescale_factor,
                                               postscale_factor)
        op, divide_by = (_integer_average(tensor, op, set_id) if kind == "reducescatter"
                         else (op, 1))
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
            _check_alltoall(tensor, splits, name, _size_of(set_id))
        if prescale != 1.0:
            tensor = tensor.clone()
            _scale_(tensor, prescale)
        handle = _C.shaped_async(tensor, name, _KINDS[kind], _REDUCE_OPS[op], splits, set_id)
    _output_kind[handle] = kind
    return _submitted(handle, name, postscale, divide_by, set_id)


def _check_alltoall(tensor, splits, name, size):
    """What this rank can tell alone, as ValueError (as Horovod); the runtime checks again."""
    if tensor.dim() == 0:
        raise ValueError(f"tensor '{name}': alltoall works along the first dimension; a scalar "
                         "has none")
    if not splits:
        if tensor.shape[0] % size != 0:
            raise ValueError(f"tensor '{name}': alltoall without splits needs a first dimension "
                             f"divisible by the {size} ranks, not {tensor.shape[0]}")
        return
    if len(splits) != size or any(s < 0 for s in splits) or sum(splits) != tensor.shape[0]:
        raise ValueError(f"tensor '{name}': alltoall takes one non-negative split per rank "
                         f"({size}) summing to the first dimension {tensor.shape[0]}, not "
                         f"{splits}")


def allgather_async(tensor, name=None, process_set=PS):
    """Starts an allgather: every rank's ``tensor`` concatenated along the first dimension in
    rank order (the first dimension may differ across ranks, the others must agree)."""
    return _submit("allgather", tensor, name, process_set=process_set)


def allgather(tensor, name=None, process_set=PS):
    """Blocking allgather; differentiable (each rank's gradient is the sum over ranks of the
    output gradient's rows that came from it)."""
    from .autograd import allgather_with_grad
    return allgather_with_grad(tensor, _name_or_generated(name, "allgather", _id_of(process_set)),
                               process_set)


def grouped_allgather(tensors, name=None, process_set=PS):
    """Allgathers of a list of tensors, submitted together; returns the list of outputs
    (differentiable like allgather)."""
    base = _name_or_generated(name, "grouped_allgather", _id_of(process_set))
    if any(t.requires_grad for t in tensors) and torch.is_grad_enabled():
        return [allgather(t, f"{base}.{i}", process_set) for i, t in enumerate(tensors)]
    handles = [allgather_async(t, f"{base}.{i}", process_set) for i, t in enumerate(tensors)]
    return _wait_all(handles)


def allgather_object(obj, name=None, process_set=PS):
    """Returns every rank's picklable ``obj`` as a list in rank order (torch.save bytes)."""
    base = _name_or_generated(name, "allgather_object", _id_of(process_set))
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
    sizes = allgather(torch.tensor([data.numel()], dtype=torch.int64), base + ".sizes",
                      process_set)
    gathered = allgather(data, base + ".data", process_set)
    out, offset = [], 0
    for n in sizes.tolist():
        chunk = gathered[offset:offset + n].numpy().tobytes()
        out.append(torch.load(io.BytesIO(chunk), map_location="cpu"))
        offset += n
    return out


def alltoall_async(tensor, splits=None, name=None, process_set=PS):
    """Starts an alltoall: rows ``[sum(splits[:j]), +splits[j])`` of ``tensor`` go to rank j
    (splits: one per rank, a list or a tensor; None: equal shares). synchronize() returns the
    rows received, in rank order, and how many came from each rank."""
    return _submit("alltoall", tensor, name, splits=splits, process_set=process_set)


def alltoall(tensor, splits=None, name=None, process_set=PS):
    """Blocking alltoall: returns the output, and with ``splits`` given (output,
    received_splits), as Horovod; differentiable."""
    from .autograd import alltoall_with_grad
    return alltoall_with_grad(tensor, splits,
                              _name_or_generated(name, "alltoall", _id_of(process_set)),
                              process_set)


# Positional orders of the reducescatters after their first argument: Horovod's, and
# arcreduce's own (name, op, prescale_factor, postscale_factor, process_set), recognised by an op
# third (Horovod's third is the compression) or, for reducescatter_async, a number fourth
# (Horovod's fourth is the process set).
_RS_ARCREDUCE_ORDER = ("name", "op", "prescale_factor", "postscale_factor", "process_set")
_RS_ORDER = ("name", "compression", "op", "process_set", "prescale_factor", "postscale_factor")
_RS_ASYNC_ORDER = ("name", "op", "process_set", "prescale_factor", "postscale_factor")


def _op_third(args):
    return len(args) > 1 and _is_op(args[1])


def _number_fourth(args):
    return len(args) > 2 and isinstance(args[2], (int, float)) and not isinstance(args[2], bool)


def _shaped_compression(compression, name, set_id):
    """Horovod's compression of a reducescatter: none, or fp16 (the tensor is cast to float16 for
    the exchange and the result back); arcreduce's compressors do not apply to it."""
    with _RefusedOnEveryRank(name, set_id):
        c = Compression.of(compression)
        if c.compressor not in (None, "none", "fp16"):
            raise ValueError(f"tensor '{name}': reducescatter takes compression none or fp16, "
                             f"not {c!r}")
    return c


@_positional(_RS_ASYNC_ORDER, _RS_ARCREDUCE_ORDER, _number_fourth)
def reducescatter_async(tensor, *, name=None, op=Average, process_set=PS, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts a reducescatter: the reduction of every rank's ``tensor`` (same shape everywhere),
    of which rank r receives its block of the first dimension (n // size rows, one more on the
    first n % size ranks)."""
    return _submit("reducescatter", tensor, name, Average if op is None else op, None,
                   prescale_factor, postscale_factor, process_set)


@_positional(_RS_ORDER, _RS_ARCREDUCE_ORDER, _op_third)
def reducescatter(tensor, *, name=None, compression=None, op=Average, process_set=PS,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Blocking reducescatter; differentiable for Average and Sum. ``compression``: none or
    fp16, as Horovod's."""
    from .autograd import reducescatter_with_grad
    set_id = _id_of(process_set)
    name = _name_or_generated(name, "reducescatter", set_id)
    c = _shaped_compression(compression, name, set_id)
    sent, ctx = c.compress(tensor) if isinstance(tensor, torch.Tensor) else (tensor, None)
    out = reducescatter_with_grad(sent, name, Average if op is None else op, prescale_factor,
                                  postscale_factor, process_set)
    return c.decompress(out, ctx)


@_positional(_RS_ORDER, _RS_ARCREDUCE_ORDER, _op_third)
def grouped_reducescatter(tensors, *, name=None, compression=None, op=Average, process_set=PS,
                          prescale_factor=1.0, postscale_factor=1.0):
    set_id = _id_of(process_set)
    base = _name_or_generated(name, "grouped_reducescatter", set_id)
    c = _shaped_compression(compression, base, set_id)
    args = dict(op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                process_set=process_set)
    if any(t.requires_grad for t in tensors) and torch.is_grad_enabled():
        return [reducescatter(t, name=f"{base}.{i}", compression=c, **args)
                for i, t in enumerate(tensors)]
    sent = [c.compress(t) for t in tensors]
    handles = [reducescatter_async(t, name=f"{base}.{i}", **args)
               for i, (t, _) in enumerate(sent)]
    return [c.decompress(out, ctx) for out, (_, ctx) in zip(_wait_all(handles), sent)]


def _wait_all(handles):
    return synchronize(GroupHandle(handles))


class GroupHandle(tuple):
    """The handles of a grouped op; synchronize() and poll() take it like one handle."""


@_allreduce_signature(_ALLREDUCE_ASYNC_ORDER)
def grouped_allreduce_async_(tensors, *, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=PS, compression=None):
    """In-place allreduces of a list of tensors, submitted together (they fuse where their
    signatures allow); returns one handle for synchronize(), which returns the list. Arguments
    as allreduce_async_'s."""
    set_id = _id_of(process_set)
    base = _name_or_generated(name, "grouped_allreduce", set_id)
    with _RefusedOnEveryRank(base, set_id):
        op = _op_of(op, average, base)
    return GroupHandle(allreduce_async_(t, name=f"{base}.{i}", op=op, compression=compression,
                                        prescale_factor=prescale_factor,
                                        postscale_factor=postscale_factor,
                                        process_set=process_set)
                       for i, t in enumerate(tensors))


@_allreduce_signature(_ALLREDUCE_ASYNC_ORDER)
def grouped_allreduce_(tensors, *, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=PS, compression=None):
    return synchronize(grouped_allreduce_async_(
        tensors, average=average, name=name, op=op, compression=compression,
        prescale_factor=prescale_factor, postscale_factor=postscale_factor,
        process_set=process_set))


@_allreduce_signature(_ALLREDUCE_ASYNC_ORDER)
def grouped_allreduce_async(tensors, *, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=PS, compression=None):
    """Out-of-place: the inputs are left unchanged."""
    copies = [t.detach().clone(memory_format=torch.contiguous_format) for t in tensors]
    return grouped_allreduce_async_(
        copies, average=average, name=name, op=op, compression=compression,
        prescale_factor=prescale_factor, postscale_factor=postscale_factor,
        process_set=process_set)


@_allreduce_signature(_ALLREDUCE_ORDER)
def grouped_allreduce(tensors, *, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=PS):
    """Out-of-place allreduces of a list of tensors; differentiable like allreduce."""
    from .mpi_ops import allreduce
    set_id = _id_of(process_set)
    base = _name_or_generated(name, "grouped_allreduce", set_id)
    with _RefusedOnEveryRank(base, set_id):
        op = _op_of(op, average, base)
    args = dict(op=op, compression=compression, prescale_factor=prescale_factor,
                postscale_factor=postscale_factor, process_set=process_set)
    if any(t.requires_grad for t in tensors) and torch.is_grad_enabled():
        return [allreduce(t, name=f"{base}.{i}", **args) for i, t in enumerate(tensors)]
    return grouped_allreduce_(
        [t.detach().clone(memory_format=torch.contiguous_format) for t in tensors], name=base,
        **args)


def sparse_allreduce_async(tensor, name=None, op=Average, process_set=PS):
    """Reduces a sparse COO ``tensor`` by allgathering every rank's indices and values (as
    Horovod): returns a callable that waits and returns the reduced sparse tensor, whose
    duplicate indices add up (coalesce() merges them). ``op``: Average or Sum."""
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise TypeError(f"sparse_allreduce_async takes a sparse COO tensor, not "
                        f"{type(tensor).__name__ if not isinstance(tensor, torch.Tensor) else tensor.layout}")
    if op not in (Average, Sum):
        raise ValueError(f"sparse_allreduce_async reduces with Average or Sum, not {op!r}")
    set_id = _id_of(process_set)
    base = _name_or_generated(name, "sparse_allreduce", set_id)
    t = tensor.coalesce()
    # Allgather concatenates along the first dimension: indices go as (nnz, sparse dims).
    indices = allgather_async(t.indices().transpose(0, 1).contiguous(), f"{base}.indices",
                              process_set)
    values = allgather_async(t.values().contiguous(), f"{base}.values", process_set)

    def wait():
        gathered_values = synchronize(values)
        gathered_indices = synchronize(indices)
        if op == Average:
            gathered_values = gathered_values / _size_of(set_id)
        return torch.sparse_coo_tensor(gathered_indices.transpose(0, 1), gathered_values,
                                       t.size())

    return wait
