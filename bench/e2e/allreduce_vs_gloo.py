"""One dense All-Reduce at a time, arcreduce against gloo in the same job
(docs/design/runtime-waiting.md, "Open MPI's TCP eager limit"): for each size, two passes of
arcreduce.torch.allreduce_ (sum, compression none) and torch.distributed.all_reduce alternate; rank
0 prints the median of --repetitions calls after 2 untimed ones, and its ratio to the ring's bound
2(P-1)/P * bytes at --link-bps. Run on the simulated cluster with arcrun (MASTER_ADDR/MASTER_PORT
for gloo):

    bash scripts/sim-cluster.sh up 4 --rate 1gbit --name ar --dir D
    source D/cluster.env
    build/launcher/arcrun -np 4 --hostfile "$hostfile" --rsh-agent "$rsh_agent" \\
        --network-interface "$network" --mpi-args "$mpi_args" -x MASTER_ADDR=<host 1> \\
        -x MASTER_PORT=29555 -x GLOO_SOCKET_IFNAME=eth0 -x PYTHONPATH=build/python \\
        -- python3 bench/e2e/allreduce_vs_gloo.py
    bash scripts/sim-cluster.sh down --name ar --dir D
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import arcreduce.torch as arc


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bytes", default="2097152,8392704,16777216",
                   help="comma-separated buffer sizes (fp32)")
    p.add_argument("--repetitions", type=int, default=10)
    p.add_argument("--link-bps", type=float, default=1e9, help="link rate per host, bit/s")
    args = p.parse_args()
    arc.init()
    rank, size = arc.rank(), arc.size()
    dist.init_process_group("gloo", rank=rank, world_size=size)
    for nbytes in (int(b) for b in args.bytes.split(",")):
        tensor = torch.ones(nbytes // 4)
        bound = 2 * (size - 1) / size * nbytes * 8 / args.link_bps
        for which in ("arcreduce", "gloo", "arcreduce", "gloo"):
            times = []
            for _ in range(args.repetitions + 2):
                dist.barrier()
                start = time.perf_counter()
                if which == "arcreduce":
                    arc.allreduce_(tensor, "x%d" % nbytes, op=arc.Sum, compression="none")
                else:
                    dist.all_reduce(tensor)
                times.append(time.perf_counter() - start)
            median = statistics.median(times[2:])
            if rank == 0:
                print("%-9s %9d bytes  median %7.1f ms  bound %7.1f ms  bound/median %.2f"
                      % (which, nbytes, median * 1e3, bound * 1e3, bound / median), flush=True)
    arc.shutdown()


if __name__ == "__main__":
    main()
