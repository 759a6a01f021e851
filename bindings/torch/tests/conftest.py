"""Fixtures of the arcreduce.torch tests. Every rank of an mpirun job runs the same pytest
session; tests run in the same order everywhere and submit the same names on every rank."""
import datetime
import socket

import pytest
import torch

import arcreduce.torch as arc


@pytest.fixture(scope="session")
def runtime():
    arc.init()
    yield arc
    arc.shutdown()


@pytest.fixture(scope="session")
def gloo(runtime):
    """torch.distributed with the gloo backend over the same ranks; rank 0 picks a free port
    and broadcasts it through arcreduce."""
    import torch.distributed as dist

    port = torch.zeros(1, dtype=torch.int64)
    if arc.rank() == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port[0] = s.getsockname()[1]
    arc.broadcast_(port, 0, "test.gloo_port")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{int(port[0])}",
                            rank=arc.rank(), world_size=arc.size(),
                            timeout=datetime.timedelta(seconds=60))
    yield dist
    dist.destroy_process_group()


def same_on_all_ranks(tensor, name):
    """True when every rank holds bit-identical values (compared with rank 0's)."""
    root = arc.broadcast(tensor, 0, "test.same." + name)
    return torch.equal(root, tensor)
