"""A training job under arcreduce.torch.elastic, as test_elastic.py runs it: in the test's own
processes, and as a job of its own started by the test (a process that commits and fails, then a
relaunch that resumes). The model is one weight matrix of 160 x 128 = 20480 entries, compressed
with the job's compressor (ARC-Top-K with efm, which carries the SGD momentum in the runtime):
one tensor, so every step's reduction is one bucket and the sums are the same whatever the
timing.

    python3 elastic_job.py STEPS COMMIT_EVERY OUT [--fail-at N]

trains to STEPS (resuming from ARCRUN_ELASTIC_DIR's last commit), commits every COMMIT_EVERY
batches and writes the final weights to OUT (rank 0); --fail-at raises a communication failure
of the job after batch N's commit."""
import sys

import torch

import arcreduce.torch as arc


def make_linear(seed):
    torch.manual_seed(seed)
    return torch.nn.Linear(160, 128, bias=False)


def batch(rank, step, n=8):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(n, 160, generator=g), torch.randint(0, 128, (n,), generator=g)


def make_state(seed, prefix="elastic.job."):
    model = make_linear(seed)
    optimizer = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05,
                                                         momentum=0.9),
                                         named_parameters=model.named_parameters(), prefix=prefix)
    return arc.elastic.TorchState(model, optimizer, batch=0)


def train(state, steps, commit_every, stop_at=None, fail_at=None):
    """Steps of the job from state.batch to `steps`; state.started (not committed) records
    where this call started: after a resume, the committed batch."""
    state.started = state.batch
    while state.batch < steps:
        x, y = batch(arc.rank(), state.batch)
        state.optimizer.zero_grad()
        torch.nn.functional.cross_entropy(state.model(x), y).backward()
        state.optimizer.step()
        state.batch += 1
        if state.batch % commit_every == 0:
            state.commit()
        if fail_at is not None and state.batch == fail_at:
            raise arc.ArcreduceError(f"stall shutdown on rank {arc.rank()} in negotiation: no "
                                     "progress for 3 s (ARCREDUCE_STALL_SHUTDOWN_SECONDS); rank 1 "
                                     "did not answer a liveness check within 1 s")
        if stop_at is not None and state.batch == stop_at:
            return state
    return state


def main(argv):
    steps, commit_every, out = int(argv[0]), int(argv[1]), argv[2]
    fail_at = int(argv[argv.index("--fail-at") + 1]) if "--fail-at" in argv else None
    arc.init()
    # Each rank starts from other weights: what it trains from is the commit (or rank 0's).
    state = make_state(seed=50 + arc.rank())
    arc.elastic.run(train)(state, steps, commit_every, fail_at=fail_at)
    if arc.rank() == 0:
        torch.save({"weight": state.model.weight.detach().clone(), "started": state.started,
                    "batch": state.batch, "size": arc.size()}, out)


if __name__ == "__main__":
    main(sys.argv[1:])
