"""horovod.torch's names mapped onto arcreduce.torch, to run Horovod's own test file against
arcreduce (tests/horovod_parity/run.sh). Only renames and argument mapping: every behaviour comes
from arcreduce.torch; process_set=None (Horovod's tests pass it) means the global set.""" 
import arcreduce.torch as _arc
from arcreduce.torch import (  # noqa: F401  (re-exported under Horovod's names)
    Adasum, Average, Max, Min, Product, ProcessSet, Sum, add_process_set, allgather_object,
    barrier, broadcast, global_process_set, remove_process_set,
    broadcast_, broadcast_async, broadcast_async_, broadcast_object, broadcast_optimizer_state,
    broadcast_parameters, init, is_initialized, join, local_rank, local_size, poll, rank, shutdown,
    size, synchronize)

HorovodInternalError = _arc.ArcreduceError


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


def _ps(process_set):
    return global_process_set if process_set is None else process_set


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None):
    return _arc.allreduce(tensor, name, _op(average, op), _compression(compression),
                          prescale_factor, postscale_factor, process_set=_ps(process_set))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    return _arc.allreduce_(tensor, name, _op(average, op), _arc.Compression.none,
                           prescale_factor, postscale_factor, process_set=_ps(process_set))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    return _arc.allreduce_async(tensor, name, _op(average, op), _arc.Compression.none,
                                prescale_factor, postscale_factor, process_set=_ps(process_set))


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None):
    return _arc.allreduce_async_(tensor, name, _op(average, op), _arc.Compression.none,
                                 prescale_factor, postscale_factor, process_set=_ps(process_set))


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    return _arc.grouped_allreduce(tensors, name, _op(average, op), _compression(compression),
                                  prescale_factor, postscale_factor, process_set=_ps(process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=None):
    return _arc.grouped_allreduce_(tensors, name, _op(average, op), _arc.Compression.none,
                                   prescale_factor, postscale_factor, process_set=_ps(process_set))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None):
    return _arc.grouped_allreduce_async(tensors, name, _op(average, op), _arc.Compression.none,
                                        prescale_factor, postscale_factor, process_set=_ps(process_set))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None):
    return _arc.grouped_allreduce_async_(tensors, name, _op(average, op), _arc.Compression.none,
                                         prescale_factor, postscale_factor, process_set=_ps(process_set))


def allgather(tensor, name=None, process_set=None):
    return _arc.allgather(tensor, name, process_set=_ps(process_set))


def allgather_async(tensor, name=None, process_set=None):
    return _arc.allgather_async(tensor, name, process_set=_ps(process_set))


def grouped_allgather(tensors, name=None, process_set=None):
    return _arc.grouped_allgather(tensors, name, process_set=_ps(process_set))


def alltoall(tensor, splits=None, name=None, process_set=None):
    return _arc.alltoall(tensor, splits, name, process_set=_ps(process_set))


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    return _arc.alltoall_async(tensor, splits, name, process_set=_ps(process_set))


def reducescatter(tensor, name=None, compression=None, op=Average, prescale_factor=1.0,
                  postscale_factor=1.0, process_set=None):
    return _arc.reducescatter(tensor, name, op, prescale_factor, postscale_factor, process_set=_ps(process_set))


def reducescatter_async(tensor, name=None, op=Average, prescale_factor=1.0,
                        postscale_factor=1.0, process_set=None):
    return _arc.reducescatter_async(tensor, name, op, prescale_factor, postscale_factor, process_set=_ps(process_set))


def grouped_reducescatter(tensors, name=None, compression=None, op=Average, prescale_factor=1.0,
                          postscale_factor=1.0, process_set=None):
    return _arc.grouped_reducescatter(tensors, name, op, prescale_factor, postscale_factor, process_set=_ps(process_set))


def DistributedOptimizer(optimizer, named_parameters=None, compression=None,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=None):
    opt = _arc.DistributedOptimizer(optimizer, named_parameters, _compression(compression), op,
                                    backward_passes_per_step, process_set=_ps(process_set),
                                    sparse_as_dense=sparse_as_dense)
    opt._parameter_names = opt.gradient_names()  # Horovod's private name for the same mapping
    return opt


def sparse_allreduce_async(tensor, name, op, process_set=None):
    return _arc.sparse_allreduce_async(tensor, name, op, process_set=_ps(process_set))


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
