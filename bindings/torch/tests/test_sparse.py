"""Sparse gradients: sparse_allreduce_async against the dense reduction of the same tensors, and
DistributedOptimizer over an nn.Embedding(sparse=True) with and without sparse_as_dense, against
a dense reference built here from every rank's input."""
import pytest
import torch

import arcreduce.torch as arc


def sparse_of(r, rows=7, cols=3):
    """Rank r's sparse tensor: rows r % rows and (r + 2) % rows set (rows may coincide across
    ranks, so duplicate indices are exercised)."""
    t = torch.zeros(rows, cols)
    t[r % rows] = r + 1.0
    t[(r + 2) % rows] = 0.5 * (r + 1)
    return t.to_sparse()


@pytest.mark.parametrize("op", [arc.Sum, arc.Average])
def test_sparse_allreduce_matches_the_dense_reduction(runtime, op):
    n = arc.size()
    wait = arc.sparse_allreduce_async(sparse_of(arc.rank()), f"sparse.{op}", op)
    out = wait()
    assert out.is_sparse
    expected = sum(sparse_of(r).to_dense() for r in range(n))
    if op == arc.Average:
        expected = expected / n
    assert torch.allclose(out.to_dense(), expected)


def test_sparse_allreduce_of_an_empty_tensor(runtime):
    out = arc.sparse_allreduce_async(torch.zeros(4, 2).to_sparse(), "sparse.empty", arc.Sum)()
    assert out.is_sparse and torch.equal(out.to_dense(), torch.zeros(4, 2))


def test_sparse_allreduce_refuses_dense_and_other_ops(runtime):
    with pytest.raises(TypeError, match="sparse COO tensor"):
        arc.sparse_allreduce_async(torch.ones(2), "sparse.dense", arc.Sum)
    with pytest.raises(ValueError, match="Average or Sum"):
        arc.sparse_allreduce_async(sparse_of(0), "sparse.max", arc.Max)


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_distributed_optimizer_over_a_sparse_embedding(runtime, sparse_as_dense):
    torch.manual_seed(0)  # the same weights on every rank
    emb = torch.nn.Embedding(10, 3, sparse=True)
    start = emb.weight.detach().clone()
    opt = arc.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=0.5),
                                   named_parameters=emb.named_parameters(),
                                   compression=arc.Compression.none,
                                   prefix=f"sparse.opt.{sparse_as_dense}.",
                                   sparse_as_dense=sparse_as_dense)

    def rows(r):
        return torch.tensor([r % 10, (r + 3) % 10, 9])

    emb(rows(arc.rank())).sum().backward()
    assert emb.weight.grad.is_sparse
    opt.step()
    # Reference: the average over ranks of each rank's gradient (ones on the rows it looked up).
    grad = torch.zeros(10, 3)
    for r in range(arc.size()):
        for i in rows(r).tolist():
            grad[i] += 1.0
    grad /= arc.size()
    assert torch.allclose(emb.weight.detach(), start - 0.5 * grad)
    assert emb.weight.grad.is_sparse  # what a sparse optimizer (SparseAdam) needs
