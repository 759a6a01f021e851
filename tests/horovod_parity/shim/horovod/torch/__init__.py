"""horovod.torch's names mapped onto arcreduce.torch, to run Horovod's own test file against
arcreduce (tests/horovod_parity/run.sh). Only renames and argument mapping: every behaviour comes
from arcreduce.torch. Horovod's arguments that have no arcreduce counterpart (process sets other
than the global one, a sparse gradient flag) raise NotImplementedError."""
import arcreduce.torch as _arc
from arcreduce.torch import (  # noqa: F401  (re-exported under Horovod's names)
    Adasum, Average, Max, Min, Product, Sum, allgather_object, barrier, broadcast,
    broadcast_, broadcast_async, broadcast_async_, broadcast_object, broadcast_optimizer_state,
    broadcast_parameters, init, is_initialized, join, local_rank, local_size, poll, rank, shutdown,
    size, synchronize)

HorovodInternalError = _arc.ArcreduceError
global_process_set = None


class Compression:
    """Horovod's Compression.none and Compression.fp16 as arcreduce.torch's."""
    none = _arc.Compression.none
    fp16 = _arc.Compression.fp16


def _op(average, op):
    if op is not None:
        return op
    return _arc.Sum if average is False else _arc.Average


def _compression(compression):
    # Horovod's default is no compression; arcreduce's is the job's configuration.
    return _arc.Compression.none if compression is None else compression


def _global(process_set):
    if process_set is not None and process_set is not global_process_set:
        raise NotImplementedError("process sets are not built in arcreduce")


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.allreduce(tensor, name, _op(average, op), _compression(compression),
                          prescale_factor, postscale_factor)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.allreduce_(tensor, name, _op(average, op), _arc.Compression.none,
                           prescale_factor, postscale_factor)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.allreduce_async(tensor, name, _op(average, op), _arc.Compression.none,
                                prescale_factor, postscale_factor)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.allreduce_async_(tensor, name, _op(average, op), _arc.Compression.none,
                                 prescale_factor, postscale_factor)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.grouped_allreduce(tensors, name, _op(average, op), _compression(compression),
                                  prescale_factor, postscale_factor)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.grouped_allreduce_(tensors, name, _op(average, op), _arc.Compression.none,
                                   prescale_factor, postscale_factor)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.grouped_allreduce_async(tensors, name, _op(average, op), _arc.Compression.none,
                                        prescale_factor, postscale_factor)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.grouped_allreduce_async_(tensors, name, _op(average, op), _arc.Compression.none,
                                         prescale_factor, postscale_factor)


def allgather(tensor, name=None, process_set=None):
    _global(process_set)
    return _arc.allgather(tensor, name)


def allgather_async(tensor, name=None, process_set=None):
    _global(process_set)
    return _arc.allgather_async(tensor, name)


def grouped_allgather(tensors, name=None, process_set=None):
    _global(process_set)
    return _arc.grouped_allgather(tensors, name)


def alltoall(tensor, splits=None, name=None, process_set=None):
    _global(process_set)
    return _arc.alltoall(tensor, splits, name)


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    _global(process_set)
    return _arc.alltoall_async(tensor, splits, name)


def reducescatter(tensor, name=None, compression=None, op=Average, prescale_factor=1.0,
                  postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.reducescatter(tensor, name, op, prescale_factor, postscale_factor)


def reducescatter_async(tensor, name=None, op=Average, prescale_factor=1.0,
                        postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.reducescatter_async(tensor, name, op, prescale_factor, postscale_factor)


def grouped_reducescatter(tensors, name=None, compression=None, op=Average, prescale_factor=1.0,
                          postscale_factor=1.0, process_set=None):
    _global(process_set)
    return _arc.grouped_reducescatter(tensors, name, op, prescale_factor, postscale_factor)


def DistributedOptimizer(optimizer, named_parameters=None, compression=None,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=None):
    _global(process_set)
    return _arc.DistributedOptimizer(optimizer, named_parameters, _compression(compression), op,
                                     backward_passes_per_step)


def mpi_built():
    return True


def mpi_enabled():
    return True


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_built():
    return False


def ccl_built():
    return False


def ddl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


def mpi_threads_supported():
    return True
