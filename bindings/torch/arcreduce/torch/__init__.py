"""arcreduce.torch: PyTorch binding of the arcreduce runtime (Horovod-style API).

Typical use, one process per rank (``arcrun -np 4 python3 train.py``)::

    import arcreduce.torch as arc
    arc.init()
    arc.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = arc.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    arc.broadcast_optimizer_state(optimizer, root_rank=0)

or, for a DistributedDataParallel model, ``arc.init_process_group()`` and
``arc.register_ddp_hook(ddp_model, optimizer)`` (docs/ddp-hook.md).

See docs/pytorch.md for the semantics and limits.
"""
from .mpi_ops import (
    Adasum,
    ArcreduceError,
    Average,
    Compression,
    Max,
    Min,
    Product,
    Sum,
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    barrier,
    broadcast,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    config,
    init,
    is_initialized,
    join,
    load_state,
    local_rank,
    local_size,
    poll,
    rank,
    save_state,
    shutdown,
    size,
    stats,
    synchronize,
)
from .collectives import (
    allgather,
    allgather_async,
    allgather_object,
    alltoall,
    alltoall_async,
    grouped_allgather,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter,
    reducescatter,
    reducescatter_async,
    sparse_allreduce_async,
)
from .ddp import DDPHookState, ddp_comm_hook, register_ddp_hook
from .functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from .launch import init_process_group, torch_distributed_env
from .optimizer import DistributedOptimizer
from .process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set

__all__ = [
    "allgather", "allgather_async", "allgather_object", "alltoall", "alltoall_async",
    "grouped_allgather", "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_", "grouped_reducescatter", "reducescatter", "reducescatter_async",
    "Adasum", "barrier", "Max", "Min", "Product", "ArcreduceError", "Average", "Compression", "Sum", "allreduce", "allreduce_",
    "allreduce_async", "allreduce_async_", "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "config", "init",
    "is_initialized", "join", "load_state", "local_rank", "local_size", "poll", "rank", "save_state",
    "shutdown", "size", "stats", "synchronize", "broadcast_object", "broadcast_optimizer_state",
    "broadcast_parameters", "DistributedOptimizer", "ProcessSet", "add_process_set",
    "global_process_set", "remove_process_set", "sparse_allreduce_async",
    "DDPHookState", "ddp_comm_hook", "register_ddp_hook", "init_process_group",
    "torch_distributed_env",
]


def __getattr__(name):
    # hvd.elastic after `import arcreduce.torch as hvd`, as Horovod code writes it: the submodule
    # is imported on first use, so that what it says is what that code meets.
    if name == "elastic":
        import importlib
        return importlib.import_module(".elastic", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
