"""Fixtures of the arcreduce.torch tests. Every rank of an mpirun job runs the same pytest
session; tests run in the same order everywhere and submit the same names on every rank."""
import datetime

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
    """torch.distributed with the gloo backend over the same ranks, made by
    arc.init_process_group(): rank 0's address and a free port of its, agreed through
    arcreduce (the ranks of one host meet on 127.0.0.1)."""
    import torch.distributed as dist

    arc.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    yield dist
    dist.destroy_process_group()


def same_on_all_ranks(tensor, name):
    """True when every rank holds bit-identical values (compared with rank 0's)."""
    root = arc.broadcast(tensor, 0, "test.same." + name)
    return torch.equal(root, tensor)
