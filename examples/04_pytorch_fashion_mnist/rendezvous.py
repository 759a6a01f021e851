"""Where the DDP variants' gloo process group meets, for programs started by mpirun or arcrun.

torch waits 30 minutes by default for ranks that cannot reach the rendezvous address, which
looks like a hang: a job whose ranks run on several hosts would meet at 127.0.0.1, each host's
own. So the address comes from MASTER_ADDR, and only a job on one host (Open MPI's local size
equal to its world size) may go without it; the group's set-up and its collectives give up
after GLOO_TIMEOUT with torch's error instead.
"""
import datetime
import os

GLOO_TIMEOUT = datetime.timedelta(minutes=5)
DEFAULT_PORT = "29517"


def init_method(environ=None, address=None, port=None):
    """The ``tcp://address:port`` at which the gloo group meets: ``address`` (a program's flag),
    else MASTER_ADDR, else 127.0.0.1 where every rank runs on this host; ``port``, else
    MASTER_PORT, else 29517. Raises RuntimeError for a job on several hosts without an address."""
    env = os.environ if environ is None else environ
    address = address or env.get("MASTER_ADDR")
    if not address:
        size = env.get("OMPI_COMM_WORLD_SIZE")
        local = env.get("OMPI_COMM_WORLD_LOCAL_SIZE")
        if size and local and int(local) < int(size):
            raise RuntimeError(
                f"the DDP variants need MASTER_ADDR: this job's {size} ranks run on several "
                f"hosts ({local} on this one), so 127.0.0.1 would be each host's own; set it to "
                f"rank 0's host address (arcrun -x MASTER_ADDR=ADDRESS, and MASTER_PORT if "
                f"{DEFAULT_PORT} is taken)")
        address = "127.0.0.1"
    return f"tcp://{address}:{port or env.get('MASTER_PORT') or DEFAULT_PORT}"


def init_gloo(dist, rank, size, method=None, timeout=GLOO_TIMEOUT):
    """``dist.init_process_group("gloo", ...)`` at ``method`` (default: init_method()) with
    ``timeout`` instead of torch's 30 minutes."""
    dist.init_process_group("gloo", init_method=method or init_method(), rank=rank,
                            world_size=size, timeout=timeout)
