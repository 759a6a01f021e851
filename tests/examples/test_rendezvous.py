"""examples/04's gloo rendezvous (rendezvous.py): the address a job's ranks meet at, the error
for a job on several hosts without MASTER_ADDR, and a set-up that gives up instead of waiting
torch's 30 minutes."""
import datetime
import socket
import time

import pytest

import rendezvous


def test_master_addr_and_port_are_used_as_given():
    env = {"MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "4242",
           "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}
    assert rendezvous.init_method(env) == "tcp://10.0.0.7:4242"


def test_one_host_meets_at_loopback_on_the_default_port():
    env = {"OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "3"}
    assert rendezvous.init_method(env) == "tcp://127.0.0.1:29517"
    assert rendezvous.init_method({}) == "tcp://127.0.0.1:29517"  # not started by mpirun
    assert rendezvous.init_method({"MASTER_PORT": "1234"}) == "tcp://127.0.0.1:1234"


def test_a_programs_flags_come_before_the_environment():
    env = {"MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "4242",
           "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}
    assert rendezvous.init_method(env, "10.0.0.9", 5555) == "tcp://10.0.0.9:5555"
    assert rendezvous.init_method(env, port=5555) == "tcp://10.0.0.7:5555"
    no_address = {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}
    assert rendezvous.init_method(no_address, "10.0.0.9") == "tcp://10.0.0.9:29517"


@pytest.mark.parametrize("empty", [None, ""])
def test_several_hosts_without_master_addr_is_an_error_naming_it(empty):
    env = {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}
    if empty is not None:
        env["MASTER_ADDR"] = empty
    with pytest.raises(RuntimeError) as error:
        rendezvous.init_method(env)
    message = str(error.value)
    assert "MASTER_ADDR" in message and "4 ranks" in message and "1 on this one" in message


def test_an_unreachable_rendezvous_fails_within_the_timeout():
    import torch.distributed as dist
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    # rank 1 of 2 only connects, and never finds rank 0's store (torch 1.13: TimeoutError)
    with pytest.raises((TimeoutError, RuntimeError)):
        rendezvous.init_gloo(dist, 1, 2, f"tcp://127.0.0.1:{port}",
                             timeout=datetime.timedelta(seconds=2))
    assert time.monotonic() - start < 60
    assert not dist.is_initialized()


def test_the_default_timeout_is_minutes_not_torchs_half_hour():
    assert datetime.timedelta(minutes=1) <= rendezvous.GLOO_TIMEOUT < datetime.timedelta(minutes=30)
