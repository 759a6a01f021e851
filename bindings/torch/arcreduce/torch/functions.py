"""Start-of-training helpers: make every rank's model and optimizer identical to one rank's."""
import io

import torch

from .mpi_ops import broadcast_, broadcast_async_, rank, synchronize
from .process_sets import global_process_set


def _named_tensors(params):
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = list(params)
    for entry in items:
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)):
            raise TypeError("params must be a state_dict or an iterable of (name, tensor) pairs "
                            f"such as model.named_parameters(), got an item {entry!r:.80}")
    return [(name, t) for name, t in items if t is not None]


def broadcast_parameters(params, root_rank=0):
    """Overwrites every tensor of ``params`` (``model.state_dict()`` or
    ``model.named_parameters()``) in place with root_rank's values. Collective: every rank must
    pass the same names, shapes and dtypes. Tensors go to the runtime without copies."""
    handles = []
    error = None
    with torch.no_grad():
        try:
            for name, tensor in _named_tensors(params):
                if not isinstance(tensor, torch.Tensor):
                    raise TypeError(f"parameter '{name}' is a {type(tensor).__name__}, "
                                    "not a torch.Tensor")
                handles.append(broadcast_async_(tensor.data, root_rank,
                                                "broadcast_parameters." + name))
        except Exception as e:  # noqa: BLE001  (finish what was submitted, then raise)
            error = e
        for handle in handles:
            try:
                synchronize(handle)
            except Exception as e:  # noqa: BLE001
                error = error or e
    if error is not None:
        raise error


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's ``obj`` on every rank (of ``process_set``; root_rank is a rank of the
    job), pickled with torch.save; tensors are loaded on the CPU. ``name`` must be unique among
    in-flight ops."""
    if name is None:
        name = "broadcast_object"
    length = torch.zeros(1, dtype=torch.int64)
    data = None
    if rank() == root_rank:
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        data = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
        length[0] = data.numel()
    broadcast_(length, root_rank, name + ".length", process_set)
    if data is None:
        data = torch.empty(int(length[0]), dtype=torch.uint8)
    broadcast_(data, root_rank, name + ".data", process_set)
    if rank() == root_rank:
        return obj
    return torch.load(io.BytesIO(data.numpy().tobytes()), map_location="cpu")


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Makes every rank's optimizer state and hyperparameters (``state_dict()``) root_rank's.
    Works whether or not the other ranks have state yet (e.g. before the first step)."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, not {type(optimizer).__name__}")
    # As Horovod: every parameter has a gradient afterwards (zeros where backward has not run
    # yet), so code that reads p.grad right after the broadcast finds a tensor.
    with torch.no_grad():
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
    is_root = rank() == root_rank
    state = broadcast_object(optimizer.state_dict() if is_root else None, root_rank,
                             "broadcast_optimizer_state")
    if not is_root:
        optimizer.load_state_dict(state)
