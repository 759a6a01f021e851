"""Horovod's signatures through `import arcreduce.torch as hvd`: the `average=` argument,
Horovod's positional orders (and arcreduce's own, still recognised), DistributedOptimizer's
gradient_predivide_factor, op refusals at wrap time, `_parameter_names`, and `hvd.elastic`."""
import inspect
import warnings

import pytest
import torch

import arcreduce.torch as arc
from arcreduce.torch import mpi_ops

NONE = arc.Compression.none


def mine(shape=(5,), dtype=torch.float64, salt=0):
    """Distinct values on every rank."""
    n = 1
    for d in shape:
        n *= d
    return (torch.arange(n, dtype=dtype).reshape(shape) + 10 * arc.rank() + salt)


def total(shape=(5,), dtype=torch.float64, salt=0):
    return sum(torch.arange(int(torch.tensor(shape).prod()), dtype=dtype).reshape(shape)
               + 10 * q + salt for q in range(arc.size()))


ALLREDUCES = ["allreduce", "allreduce_", "allreduce_async", "allreduce_async_"]
GROUPED = ["grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
           "grouped_allreduce_async_"]


def run(kind, tensor, *args, **kwargs):
    """Calls arc.<kind> on `tensor` (a list for grouped kinds) and returns the result(s)."""
    out = getattr(arc, kind)(tensor, *args, **kwargs)
    return arc.synchronize(out) if "async" in kind else out


@pytest.mark.parametrize("kind", ALLREDUCES + GROUPED)
def test_average_argument_is_horovods(runtime, kind):
    grouped = kind.startswith("grouped")
    size = arc.size()
    for average, expected in ((True, total() / size), (False, total())):
        t = mine()
        arg = [t] if grouped else t
        with pytest.warns(DeprecationWarning, match="average"):
            out = run(kind, arg, average=average, name=f"sig.avg.{kind}.{average}",
                      compression=NONE)
        out = out[0] if grouped else out
        torch.testing.assert_close(out, expected)
    # op alone still works, and neither given is Average.
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        out = run(kind, [mine()] if grouped else mine(), name=f"sig.default.{kind}",
                  compression=NONE)
    torch.testing.assert_close(out[0] if grouped else out, total() / size)
    # Both given: refused, as Horovod does.
    with pytest.raises(ValueError, match="op parameter supersedes average"):
        run(kind, [mine()] if grouped else mine(), average=False, op=arc.Sum,
            name=f"sig.both.{kind}")
    run("allreduce_", torch.ones(2), name=f"sig.after.{kind}", compression=NONE)


@pytest.mark.parametrize("kind", ALLREDUCES)
def test_horovods_positional_order(runtime, kind):
    # Horovod: allreduce(tensor, average, name, compression, op, prescale, postscale, process_set);
    # the others (tensor, average, name, op, prescale, postscale, process_set).
    ps = arc.global_process_set
    name = f"sig.pos.{kind}"
    if kind == "allreduce":
        args = (None, name, NONE, arc.Sum, 3.0, 0.5, ps)
    else:
        args = (None, name, arc.Sum, 3.0, 0.5, ps, NONE)
    fn = getattr(arc, kind)
    handle_or_out = fn(mine(), *args)
    if "async" in kind:
        # The name landed in `name`, not in `op`.
        assert mpi_ops._name_of[handle_or_out] == (0, name)
        handle_or_out = arc.synchronize(handle_or_out)
    torch.testing.assert_close(handle_or_out, 1.5 * total())
    # Horovod's test_torch.py: allreduce_(tensor, None, name, op).
    out = arc.allreduce_(torch.ones(3, dtype=torch.int32), None, f"sig.pos3.{kind}", arc.Sum)
    assert torch.equal(out, torch.full((3,), arc.size(), dtype=torch.int32))
    # average positionally (second).
    with pytest.warns(DeprecationWarning, match="average"):
        out = run(kind, mine(), False, f"sig.pos.avg.{kind}", compression=NONE)
    torch.testing.assert_close(out, total())
    params = list(inspect.signature(fn).parameters)
    assert params[:4] == ["tensor", "average", "name",
                          "compression" if kind == "allreduce" else "op"]


@pytest.mark.parametrize("kind", ALLREDUCES)
def test_arcreduce_positional_order_still_works(runtime, kind):
    # arcreduce's order: (tensor, name, op, compression, prescale, postscale, process_set).
    name = f"sig.arc.{kind}"
    out = run(kind, mine(), name, arc.Sum, NONE, 3.0, 0.5, arc.global_process_set)
    torch.testing.assert_close(out, 1.5 * total())
    # None as the name, then an op: arcreduce's order too.
    out = run(kind, mine(), None, arc.Sum, "none")
    torch.testing.assert_close(out, total())
    out = run(kind, mine(), f"{name}.kw", op=arc.Sum, compression="none")
    torch.testing.assert_close(out, total())


def test_positional_mistakes_are_type_errors(runtime):
    with pytest.raises(TypeError, match="at most 8 positional arguments"):
        arc.allreduce(torch.ones(2), None, "sig.many", NONE, arc.Sum, 1.0, 1.0,
                      arc.global_process_set, "extra")
    with pytest.raises(TypeError, match="multiple values for argument 'name'"):
        arc.allreduce_(torch.ones(2), None, "sig.twice", name="sig.twice")
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        arc.allreduce_(torch.ones(2), name="sig.unknown", bogus=1)
    with pytest.raises(TypeError, match="average must be True or False"):
        arc.allreduce_(torch.ones(2), average="yes", name="sig.average.type")
    arc.allreduce_(torch.ones(2), name="sig.after.mistakes", compression=NONE)


@pytest.mark.parametrize("kind", GROUPED)
def test_grouped_positional_orders(runtime, kind):
    fn = getattr(arc, kind)
    tensors = [mine((3,)), mine((2, 2), salt=1)]
    expected = [total((3,)), total((2, 2), salt=1)]
    if kind == "grouped_allreduce":
        horovod = (None, f"sig.g.{kind}", NONE, arc.Sum)
    else:
        horovod = (None, f"sig.g.{kind}", arc.Sum, 1.0, 1.0, arc.global_process_set, NONE)
    for args in (horovod, (f"sig.ga.{kind}", arc.Sum, NONE)):
        out = fn([t.clone() for t in tensors], *args)
        out = arc.synchronize(out) if "async" in kind else out
        for o, e in zip(out, expected):
            torch.testing.assert_close(o, e)


def test_reducescatter_positional_orders(runtime):
    size, r = arc.size(), arc.rank()
    n = 2 * size
    x = torch.arange(n * 3, dtype=torch.float64).reshape(n, 3) + r
    summed = sum(torch.arange(n * 3, dtype=torch.float64).reshape(n, 3) + q for q in range(size))
    block = summed[2 * r:2 * r + 2]
    ps = arc.global_process_set
    # Horovod: reducescatter(tensor, name, compression, op, process_set, prescale, postscale),
    # reducescatter_async(tensor, name, op, process_set, prescale, postscale).
    torch.testing.assert_close(arc.reducescatter(x, "sig.rs.h", NONE, arc.Sum, ps, 3.0, 0.5),
                               1.5 * block)
    torch.testing.assert_close(
        arc.synchronize(arc.reducescatter_async(x, "sig.rsa.h", arc.Sum, ps, 3.0, 0.5)),
        1.5 * block)
    torch.testing.assert_close(
        arc.grouped_reducescatter([x], "sig.grs.h", NONE, arc.Sum, ps, 2.0)[0], 2.0 * block)
    # arcreduce's: (tensor, name, op, prescale, postscale, process_set).
    torch.testing.assert_close(arc.reducescatter(x, "sig.rs.a", arc.Sum, 3.0, 0.5, ps),
                               1.5 * block)
    torch.testing.assert_close(
        arc.synchronize(arc.reducescatter_async(x, "sig.rsa.a", arc.Sum, 3.0, 0.5, ps)),
        1.5 * block)
    torch.testing.assert_close(arc.grouped_reducescatter([x], "sig.grs.a", arc.Sum, 2.0)[0],
                               2.0 * block)
    # Horovod's fp16 compression: exchanged as float16, returned in the input's dtype.
    small = torch.full((n, 2), float(r + 1), dtype=torch.float32)
    out = arc.reducescatter(small, "sig.rs.fp16", arc.Compression.fp16, arc.Sum)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.full((2, 2), float(size * (size + 1) // 2)))
    with pytest.raises(ValueError, match="reducescatter takes compression none or fp16"):
        arc.reducescatter(small, "sig.rs.topk", "topk")


def net():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def local_gradients(model, seed):
    """This rank's gradients of a batch of its own, by plain autograd."""
    g = torch.Generator().manual_seed(seed + 101 * arc.rank())
    x = torch.randn(8, 6, generator=g, dtype=next(model.parameters()).dtype)
    model.zero_grad()
    (model(x) ** 2).sum().backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad()
    return x, grads


def averaged_by_hand(grads, name):
    """The naive reference: every rank's gradients gathered, summed in rank order, divided."""
    out = []
    for i, g in enumerate(grads):
        gathered = arc.allgather(g.unsqueeze(0), f"{name}.{i}")
        out.append(gathered.sum(0) / arc.size())
    return out


@pytest.mark.parametrize("factor", [1.0, 3.0, 0.25])
def test_gradient_predivide_factor_divides_before_the_sum(runtime, factor, monkeypatch):
    model = net().double()
    x, grads = local_gradients(model, seed=3)
    reference = averaged_by_hand(grads, f"sig.pre.ref.{factor}")
    handed = []
    submit = arc._C.allreduce_async_

    def spy(tensor, name, *rest):
        handed.append((name, tensor.detach().clone()))
        return submit(tensor, name, *rest)

    monkeypatch.setattr(arc._C, "allreduce_async_", spy)
    optimizer = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         compression=NONE, gradient_predivide_factor=factor,
                                         prefix=f"sig.pre.{factor}.")
    (model(x) ** 2).sum().backward()
    optimizer.synchronize()
    monkeypatch.undo()
    # What the runtime sums is each gradient divided by the factor (Horovod's prescale 1/F)...
    by_name = dict(handed)
    for (name, p), g in zip(model.named_parameters(), grads):
        torch.testing.assert_close(by_name[f"sig.pre.{factor}.{name}"], g / factor)
    # ...and the result is the average all the same (F/size after the sum).
    for p, ref in zip(model.parameters(), reference):
        torch.testing.assert_close(p.grad, ref, rtol=1e-12, atol=1e-12)
    with optimizer.skip_synchronize():
        optimizer.step()


def test_gradient_predivide_factor_matches_factor_one_in_float32(runtime):
    results = {}
    for factor in (1.0, 8.0):
        model = net()
        x, _ = local_gradients(model, seed=5)
        optimizer = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                             named_parameters=model.named_parameters(),
                                             compression=NONE, gradient_predivide_factor=factor,
                                             prefix=f"sig.f32.{factor}.")
        (model(x) ** 2).sum().backward()
        optimizer.step()
        results[factor] = [p.detach().clone() for p in model.parameters()]
    for a, b in zip(results[1.0], results[8.0]):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_gradient_predivide_factor_with_sparse_as_dense(runtime):
    emb = torch.nn.Embedding(6, 2, sparse=True)
    torch.nn.init.constant_(emb.weight, 1.0)
    optimizer = arc.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=1.0),
                                         named_parameters=emb.named_parameters(),
                                         compression=NONE, sparse_as_dense=True,
                                         gradient_predivide_factor=2.0, prefix="sig.sparse.")
    emb(torch.tensor([arc.rank() % 6])).sum().backward()
    optimizer.synchronize()
    expected = torch.zeros(6, 2)
    for q in range(arc.size()):
        expected[q % 6] += 1.0 / arc.size()
    torch.testing.assert_close(optimizer.param_groups[0]["params"][0].grad.to_dense(), expected)
    with optimizer.skip_synchronize():
        optimizer.step()


def test_gradient_predivide_factor_refusals_name_it(runtime):
    model = net()

    def wrap(**kwargs):
        return arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                        named_parameters=model.named_parameters(), **kwargs)

    with pytest.raises(ValueError, match="gradient_predivide_factor .*op=Average"):
        wrap(op=arc.Sum, gradient_predivide_factor=2.0)
    for bad in (0.0, -2.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="gradient_predivide_factor must be a positive"):
            wrap(gradient_predivide_factor=bad)
    with pytest.raises(TypeError, match="gradient_predivide_factor must be a number"):
        wrap(gradient_predivide_factor="2")
    wrap(op=arc.Sum, gradient_predivide_factor=1.0)  # 1.0 is a no-op with any op


def test_ops_the_runtime_cannot_do_are_refused_when_wrapping(runtime):
    model = net()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(NotImplementedError, match="op=Adasum is not supported"):
        arc.DistributedOptimizer(sgd, named_parameters=model.named_parameters(), op=arc.Adasum)
    with pytest.raises(ValueError, match="op must be arcreduce.torch.Average"):
        arc.DistributedOptimizer(sgd, named_parameters=model.named_parameters(), op="maximum")
    # Nothing was hooked: a backward and a plain step go through.
    (model(torch.ones(1, 6)) ** 2).sum().backward()
    sgd.step()


def test_parameter_names_as_horovods(runtime):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    named = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=model.named_parameters(),
                                     prefix="sig.names.")
    assert named._parameter_names == {p: n for n, p in model.named_parameters()}
    unnamed = arc.DistributedOptimizer(torch.optim.SGD(
        [{"params": model[0].parameters()}, {"params": model[1].parameters()}], lr=0.1),
        prefix="sig.unnamed.")
    names = unnamed._parameter_names
    assert set(names) == set(model.parameters())
    assert len(set(names.values())) == len(names)
    gathered = arc.allgather_object(sorted(names.values()), name="sig.names.all")
    assert all(g == gathered[0] for g in gathered)


@pytest.mark.parametrize("order", ["horovod", "arcreduce"])
def test_distributed_optimizer_positional_orders(runtime, order):
    model = net().double()
    x, grads = local_gradients(model, seed=9)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    if order == "horovod":
        # (optimizer, named_parameters, compression, backward_passes_per_step, op, ...)
        optimizer = arc.DistributedOptimizer(sgd, list(model.named_parameters()), NONE, 2,
                                             arc.Sum, 1.0, 0, None, False,
                                             arc.global_process_set, prefix=f"sig.o.{order}.")
    else:
        # (optimizer, named_parameters, compression, op, backward_passes_per_step, prefix, ...)
        optimizer = arc.DistributedOptimizer(sgd, list(model.named_parameters()), NONE,
                                             arc.Sum, 2, f"sig.o.{order}.")
    reference = [2 * g * arc.size() for g in averaged_by_hand(grads, f"sig.o.ref.{order}")]
    (model(x) ** 2).sum().backward()  # two passes accumulate before one reduction
    (model(x) ** 2).sum().backward()
    optimizer.synchronize()
    for p, ref in zip(model.parameters(), reference):
        torch.testing.assert_close(p.grad, ref)
    with optimizer.skip_synchronize():
        optimizer.step()


def test_horovods_grouping_arguments_are_accepted(runtime):
    for i, grouping in enumerate(({"num_groups": 2}, {"groups": 3}, "lists")):
        model = net()
        if grouping == "lists":
            grouping = {"groups": [[p] for p in list(model.parameters())[:2]]}
        optimizer = arc.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                             named_parameters=model.named_parameters(),
                                             compression=NONE, prefix=f"sig.groups.{i}.",
                                             **grouping)
        (model(torch.ones(2, 6)) ** 2).sum().backward()
        optimizer.step()
    with pytest.raises(ValueError, match="groups must be"):
        arc.DistributedOptimizer(torch.optim.SGD(net().parameters(), lr=0.1), groups=[1, 2])


def test_elastic_is_reachable_as_an_attribute(runtime):
    import arcreduce.torch as hvd
    from arcreduce.torch import elastic
    assert hvd.elastic is elastic
    assert hvd.elastic.TorchState is elastic.TorchState and callable(hvd.elastic.run)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        hvd.not_a_name  # noqa: B018
