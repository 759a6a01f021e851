"""Autograd through the out-of-place collectives, as in Horovod: the gradient of an allreduce is
the same reduction of the output's gradient; of a broadcast, the sum of every rank's gradient on
the root and zero elsewhere. The backward ops run under the forward's name + ".grad", in the
order autograd runs them, which is the same on every rank for the same graph."""
import torch

from .mpi_ops import Average, Compression, Sum, allreduce_, broadcast_, rank


def _copy(tensor):
    return tensor.detach().clone(memory_format=torch.contiguous_format)


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, compression, prescale_factor, postscale_factor):
        ctx.args = (name + ".grad", op, prescale_factor, postscale_factor)
        return allreduce_(_copy(tensor), name, op, compression, prescale_factor, postscale_factor)

    @staticmethod
    def backward(ctx, grad):
        name, op, prescale_factor, postscale_factor = ctx.args
        reduced = allreduce_(_copy(grad), name, op, Compression.none, prescale_factor,
                             postscale_factor)
        return reduced, None, None, None, None, None


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.args = (root_rank, name + ".grad")
        return broadcast_(_copy(tensor), root_rank, name)

    @staticmethod
    def backward(ctx, grad):
        root_rank, name = ctx.args
        summed = allreduce_(_copy(grad), name, Sum, Compression.none)
        if rank() != root_rank:
            summed.zero_()
        return summed, None, None


def _tracked(tensor):
    return isinstance(tensor, torch.Tensor) and tensor.requires_grad and torch.is_grad_enabled()


def allreduce_with_grad(tensor, name, op, compression, prescale_factor, postscale_factor):
    if _tracked(tensor) and op not in (Average, Sum):
        raise ValueError(f"tensor '{name}': autograd through allreduce is defined for Average and "
                         f"Sum, not {op!r}; reduce a detached tensor")
    if _tracked(tensor):
        return _Allreduce.apply(tensor, name, op, compression, prescale_factor, postscale_factor)
    if not isinstance(tensor, torch.Tensor):  # allreduce_ names the problem (on every rank)
        return allreduce_(tensor, name, op, compression, prescale_factor, postscale_factor)
    return allreduce_(_copy(tensor), name, op, compression, prescale_factor, postscale_factor)


def broadcast_with_grad(tensor, root_rank, name):
    if _tracked(tensor):
        return _Broadcast.apply(tensor, root_rank, name)
    if not isinstance(tensor, torch.Tensor):
        return broadcast_(tensor, root_rank, name)
    return broadcast_(_copy(tensor), root_rank, name)
