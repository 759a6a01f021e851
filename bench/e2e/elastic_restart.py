"""A rank killed mid-training under `arcrun --restarts`, and the job's resume from its last commit
(docs/elastic.md). Horovod's elastic pattern, unchanged but for the data: `hvd.elastic.TorchState`
with the model, the optimizer and the batch counter, `@hvd.elastic.run`, `state.commit()` every
COMMIT batches. On the first launch (ARCRUN_RESTART 0) the last rank SIGKILLs itself after batch
KILL_AT; the other ranks' runtime ends the job, arcrun starts it again, and the relaunch resumes
from the last commit. Rank 0 prints one JSON line per launch (batches trained, the batch it
resumed from, seconds from the process start to its first trained batch) and writes the final
weights to OUT, so that a run without the kill can be compared bit for bit:

    arcrun -np 2 --restarts 2 -- python3 bench/e2e/elastic_restart.py OUT --kill-at 12
    arcrun -np 2 -- python3 bench/e2e/elastic_restart.py REFERENCE
    python3 bench/e2e/elastic_restart.py --compare OUT REFERENCE
"""
import argparse
import json
import os
import signal
import sys
import time

START = time.time()

import torch  # noqa: E402

import arcreduce.torch as hvd  # noqa: E402


def compare(a, b):
    same = all(torch.equal(x, y) for x, y in zip(torch.load(a), torch.load(b)))
    print("bit-identical" if same else "the weights differ")
    return 0 if same else 1


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--commit", type=int, default=5)
    parser.add_argument("--kill-at", type=int, default=None)
    args = parser.parse_args()

    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                         named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, batch=0)
    launch = int(os.environ.get("ARCRUN_RESTART", "0"))

    @hvd.elastic.run
    def train(state):
        resumed_from = state.batch
        first = None
        while state.batch < args.batches:
            g = torch.Generator().manual_seed(1000 * state.batch + hvd.rank())
            x, y = torch.randn(32, 64, generator=g), torch.randint(0, 10, (32,), generator=g)
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            if first is None:
                first = time.time() - START
            state.batch += 1
            if state.batch % args.commit == 0:
                state.commit()
            if (args.kill_at is not None and launch == 0 and state.batch == args.kill_at
                    and hvd.rank() == hvd.size() - 1):
                sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        return resumed_from, first

    resumed_from, first = train(state)
    if hvd.rank() == 0:
        print(json.dumps({"launch": launch, "ranks": hvd.size(), "resumed_from": resumed_from,
                          "trained": args.batches - resumed_from,
                          "seconds_to_first_batch": round(first, 2)}), flush=True)
        torch.save([p.detach().clone() for p in model.parameters()], args.out)
    hvd.shutdown()


if __name__ == "__main__":
    main()
