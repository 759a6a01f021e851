"""torch.distributed's process group from an arcrun or mpirun launch.

A script written for torchrun reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
(the env:// rendezvous). Under arcrun or mpirun the ranks are already connected through MPI, so
``torch_distributed_env()`` sets those variables from the runtime: rank 0's address and a free
port of its, agreed over arcreduce. ``init_process_group()`` also creates the group.
"""
import os
import socket

from .collectives import allgather_object
from .functions import broadcast_object
from .mpi_ops import init, local_rank, local_size, rank, size

_LOOPBACK = "127.0.0.1"


def _address_towards(host):
    """This host's address on the route to `host` (no packet is sent), or None."""
    try:
        target = socket.gethostbyname(host)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((target, 9))
            address = s.getsockname()[0]
        return None if address.startswith("127.") else address
    except OSError:
        return None


def _free_port(address):
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def torch_distributed_env():
    """Sets the variables torch's env:// rendezvous and torchrun scripts read: RANK, WORLD_SIZE,
    LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; returns them as a dict. Collective:
    every rank calls it (it calls init() where the runtime is not initialised yet).

    MASTER_ADDR and MASTER_PORT are rank 0's: its own variables where it has them, otherwise
    127.0.0.1 when every rank runs on one host, else rank 0's address on the route to the first
    rank on another host; the port is one rank 0 found free. The others are the runtime's rank,
    size, local rank and local size."""
    init()
    hosts = allgather_object(socket.gethostname(), name="torch_distributed_env.hosts")
    agreed = None
    if rank() == 0:
        address = os.environ.get("MASTER_ADDR")
        if not address:
            others = [h for h in hosts if h != hosts[0]]
            address = _LOOPBACK if not others else (
                _address_towards(others[0]) or socket.gethostbyname(socket.gethostname()))
        port = os.environ.get("MASTER_PORT") or str(
            _free_port(_LOOPBACK if address == _LOOPBACK else ""))
        agreed = (address, port)
    address, port = broadcast_object(agreed, root_rank=0, name="torch_distributed_env.address")
    env = {
        "RANK": str(rank()),
        "WORLD_SIZE": str(size()),
        "LOCAL_RANK": str(local_rank()),
        "LOCAL_WORLD_SIZE": str(local_size()),
        "MASTER_ADDR": address,
        "MASTER_PORT": str(port),
    }
    os.environ.update(env)
    return env


def init_process_group(backend="gloo", **kwargs):
    """torch.distributed.init_process_group over the ranks of this arcrun or mpirun job
    (torch_distributed_env(), then the env:// rendezvous), ranks numbered as arcreduce's.
    Keyword arguments (timeout, ...) go to torch.distributed.init_process_group."""
    import torch.distributed as dist
    env = torch_distributed_env()
    dist.init_process_group(backend, init_method="env://", rank=int(env["RANK"]),
                            world_size=int(env["WORLD_SIZE"]), **kwargs)
    return dist.group.WORLD


