"""Autograd through the out-of-place collectives, with Horovod's gradients (so code ported from
Horovod trains the same): an allreduce's is the same reduction of the output's gradient; a
broadcast's, the average over ranks on the root and zero elsewhere; an allgather's, this rank's
rows of the average over ranks; an alltoall's, the rows sent back where they came from; a
reducescatter's, the allgather of the gradients (times the number of ranks for Sum). The
backward ops run under the forward's name + ".grad", in the order autograd runs them, which is
the same on every rank for the same graph."""
import torch

from .mpi_ops import Average, Compression, Sum, _synchronize_rows, allreduce_, broadcast_, rank
from .process_sets import _id_of, _size_of


def _copy(tensor):
    return tensor.detach().clone(memory_format=torch.contiguous_format)


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, compression, prescale_factor, postscale_factor, ps):
        ctx.args = (name + ".grad", op, prescale_factor, postscale_factor, ps)
        return allreduce_(_copy(tensor), name=name, op=op, compression=compression,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                          process_set=ps)

    @staticmethod
    def backward(ctx, grad):
        name, op, prescale_factor, postscale_factor, ps = ctx.args
        reduced = allreduce_(_copy(grad), name=name, op=op, compression=Compression.none,
                             prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                             process_set=ps)
        return reduced, None, None, None, None, None, None


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, ps):
        ctx.args = (root_rank, name + ".grad", ps)
        return broadcast_(_copy(tensor), root_rank, name, ps)

    @staticmethod
    def backward(ctx, grad):
        root_rank, name, ps = ctx.args
        averaged = allreduce_(_copy(grad), name=name, op=Average, compression=Compression.none,
                              process_set=ps)
        if rank() != root_rank:
            averaged.zero_()
        return averaged, None, None, None


def _tracked(tensor):
    return isinstance(tensor, torch.Tensor) and tensor.requires_grad and torch.is_grad_enabled()


def allreduce_with_grad(tensor, name, op, compression, prescale_factor, postscale_factor, ps):
    if _tracked(tensor) and op not in (Average, Sum):
        raise ValueError(f"tensor '{name}': autograd through allreduce is defined for Average and "
                         f"Sum, not {op!r}; reduce a detached tensor")
    if _tracked(tensor):
        return _Allreduce.apply(tensor, name, op, compression, prescale_factor, postscale_factor,
                                ps)
    if isinstance(tensor, torch.Tensor):  # otherwise allreduce_ names the problem (every rank)
        tensor = _copy(tensor)
    return allreduce_(tensor, name=name, op=op, compression=compression,
                      prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                      process_set=ps)


def broadcast_with_grad(tensor, root_rank, name, ps):
    if _tracked(tensor):
        return _Broadcast.apply(tensor, root_rank, name, ps)
    if not isinstance(tensor, torch.Tensor):
        return broadcast_(tensor, root_rank, name, ps)
    return broadcast_(_copy(tensor), root_rank, name, ps)


def _gathered(tensor, name, ps):
    from .collectives import allgather_async
    return _synchronize_rows(allgather_async(tensor, name, ps))


def _set_rank(ps):
    """This rank's index in the process set (the order of an allgather's output)."""
    set_id = _id_of(ps)
    return rank() if set_id == 0 else ps.rank()


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, ps):
        out, rows = _gathered(tensor.detach(), name, ps)
        ctx.args = (name + ".grad", rows, ps)
        return out

    @staticmethod
    def backward(ctx, grad):
        name, rows, ps = ctx.args
        # Every rank's output holds this rank's rows: Horovod averages their gradients.
        averaged = allreduce_(_copy(grad), name=name, op=Average, compression=Compression.none,
                              process_set=ps)
        me = _set_rank(ps)
        first = sum(rows[:me])
        return averaged.narrow(0, first, rows[me]), None, None


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, ps):
        from .collectives import alltoall_async
        out, received = _synchronize_rows(alltoall_async(tensor.detach(), splits, name, ps))
        ctx.args = (name + ".grad", received, ps)
        splits_out = torch.tensor(received, dtype=torch.int64)
        ctx.mark_non_differentiable(splits_out)
        return out, splits_out

    @staticmethod
    def backward(ctx, grad, _splits_grad):
        from .collectives import alltoall_async
        name, received, ps = ctx.args
        # The rows go back where they came from.
        back, _ = _synchronize_rows(alltoall_async(_copy(grad), received, name, ps))
        return back, None, None, None


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, ps):
        from .collectives import reducescatter_async
        ctx.args = (name + ".grad", op, prescale_factor * postscale_factor, ps)
        out, _ = _synchronize_rows(reducescatter_async(
            tensor.detach(), name=name, op=op, prescale_factor=prescale_factor,
            postscale_factor=postscale_factor, process_set=ps))
        return out

    @staticmethod
    def backward(ctx, grad):
        name, op, factor, ps = ctx.args
        # Rank r's block of the output depends on every rank's rows of that block.
        gathered, _ = _gathered(_copy(grad), name, ps)
        scale = factor * _size_of(_id_of(ps)) if op == Sum else factor
        if scale != 1.0:
            gathered = gathered * scale
        return gathered, None, None, None, None, None


def allgather_with_grad(tensor, name, ps):
    if _tracked(tensor):
        return _Allgather.apply(tensor, name, ps)
    if not isinstance(tensor, torch.Tensor):
        from .collectives import allgather_async
        return allgather_async(tensor, name, ps)  # raises, naming the problem on every rank
    return _gathered(tensor, name, ps)[0]


def alltoall_with_grad(tensor, splits, name, ps):
    if _tracked(tensor):
        out, received = _Alltoall.apply(tensor, splits, name, ps)
    else:
        from .collectives import alltoall_async
        from .mpi_ops import synchronize
        out, received = synchronize(alltoall_async(tensor, splits, name, ps))
    return out if splits is None else (out, received)


def reducescatter_with_grad(tensor, name, op, prescale_factor, postscale_factor, ps):
    from .collectives import reducescatter_async
    from .mpi_ops import synchronize
    if _tracked(tensor):
        if op not in (Average, Sum):
            raise ValueError(f"tensor '{name}': autograd through reducescatter is defined for "
                             f"Average and Sum, not {op!r}; reduce a detached tensor")
        return _Reducescatter.apply(tensor, name, op, prescale_factor, postscale_factor, ps)
    return synchronize(reducescatter_async(tensor, name=name, op=op,
                                           prescale_factor=prescale_factor,
                                           postscale_factor=postscale_factor, process_set=ps))
