"""Error cases: clear Python exceptions, never a crash or a hang."""
import gc

import pytest
import torch

import arcreduce.torch as arc


def test_non_contiguous_tensor_is_a_value_error(runtime):
    t = torch.zeros(4, 6).t()
    with pytest.raises(ValueError, match=r"tensor 'transposed' is not contiguous"):
        arc.allreduce_async_(t, "transposed")
    with pytest.raises(ValueError, match=r"tensor 'transposed_b' is not contiguous"):
        arc.broadcast_async_(t, 0, "transposed_b")


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_integer_average_truncates_and_bool_sums_are_refused(runtime, dtype):
    # As Horovod: the sum over ranks divided by their number, truncated toward zero (the runtime
    # reduces integers exactly; the binding divides).
    values = torch.tensor([7, 100, 1], dtype=dtype) * (arc.rank() + 1)
    total = torch.tensor([7, 100, 1], dtype=torch.int64) * sum(range(1, arc.size() + 1))
    expected = torch.div(total.to(dtype), arc.size(), rounding_mode="trunc")
    assert torch.equal(arc.allreduce(values, "ints", compression="none"), expected)
    with pytest.raises(arc.ArcreduceError, match=r"allreduce of bool takes min \(and\)"):
        arc.allreduce_(torch.zeros(3, dtype=torch.bool), "bools", op=arc.Sum)
    with pytest.raises(arc.ArcreduceError, match=r"compressor 'topk' applies to sums and averages "
                                                 r"of floating-point tensors; max of"):
        arc.allreduce_(torch.zeros(3, dtype=dtype), "ints.topk", op=arc.Max, compression="topk")


def test_complex_is_a_type_error(runtime):
    with pytest.raises(TypeError, match=r"tensor 'c' has dtype torch.complex64"):
        arc.broadcast_async_(torch.zeros(3, dtype=torch.complex64), 0, "c")
    with pytest.raises(TypeError, match=r"tensor 'c' has dtype torch.complex64"):
        arc.allreduce_async_(torch.zeros(3, dtype=torch.complex64), "c")


def test_sparse_and_bad_arguments(runtime):
    with pytest.raises(TypeError, match=r"tensor 'sparse' has layout"):
        arc.allreduce_async_(torch.zeros(3, 3).to_sparse(), "sparse")
    with pytest.raises(TypeError, match=r"must be a torch.Tensor"):
        arc.allreduce_async_([1.0, 2.0], "list")
    with pytest.raises(ValueError, match=r"name must be a non-empty string"):
        arc.allreduce_async_(torch.zeros(3), "")
    with pytest.raises(ValueError, match=r"op must be"):
        arc.allreduce_async_(torch.zeros(3), "op", op="maximum")
    with pytest.raises(TypeError, match=r"root_rank must be an int"):
        arc.broadcast_async_(torch.zeros(3), "0", "root")


def test_tensor_deleted_before_synchronize(runtime):
    handles = [arc.allreduce_async_(torch.full((10000,), float(arc.rank())), f"freed.{i}",
                                    compression="none") for i in range(4)]
    gc.collect()
    for h in handles:
        out = arc.synchronize(h)  # the runtime held the tensor: its memory was never freed
        assert torch.equal(out, torch.full((10000,), (arc.size() - 1) / 2))


def test_runtime_errors_raise_with_the_runtime_message(runtime):
    # Shape differs on the last rank: every rank gets the mismatch, the job goes on.
    shape = (5,) if arc.rank() == arc.size() - 1 and arc.size() > 1 else (4,)
    h = arc.allreduce_async_(torch.zeros(shape), "mismatched", compression="none")
    if arc.size() > 1:
        with pytest.raises(arc.ArcreduceError, match=r"tensor 'mismatched' was submitted "
                                                     r"differently across ranks \(shape"):
            arc.synchronize(h)
    else:
        arc.synchronize(h)
    with pytest.raises(arc.ArcreduceError, match=r"unknown compressor 'bogus'"):
        arc.allreduce_(torch.zeros(2), "bogus", compression="bogus")
    with pytest.raises(arc.ArcreduceError, match=r"'bad_root': broadcast root rank 99"):
        arc.broadcast_(torch.zeros(2), 99, "bad_root")
    with pytest.raises(arc.ArcreduceError, match=r"handle 123456789 is unknown"):
        arc.synchronize(123456789)
    arc.allreduce_(torch.ones(2), "after.errors", compression="none")  # still working


def test_duplicate_name_in_flight(runtime):
    if arc.size() < 2:
        pytest.skip("needs a second rank to keep the first op in flight")
    # The other ranks submit "dup" only after rank 0's second submission (ordered through a
    # broadcast), so rank 0's first "dup" is certainly still in flight then.
    go = torch.zeros(1)
    if arc.rank() == 0:
        first = arc.allreduce_async_(torch.ones(2), "dup", compression="none")
        with pytest.raises(ValueError, match=r"'dup' is already in flight on this rank"):
            arc.allreduce_async_(torch.ones(2), "dup", compression="none")  # refused at once
        with pytest.raises(ValueError, match=r"'dup' is already in flight on this rank"):
            arc.broadcast_async_(torch.ones(2), 0, "dup")
        arc.broadcast_(go, 0, "dup.go")
    else:
        arc.broadcast_(go, 0, "dup.go")
        first = arc.allreduce_async_(torch.ones(2), "dup", compression="none")
    assert torch.equal(arc.synchronize(first), torch.ones(2))


def test_a_tensor_refused_on_one_rank_fails_on_every_rank(runtime):
    """A refusal on one rank (here by the binding's own checks, and by the runtime's) reaches
    the others at once: their op of the same name fails with its reason, nobody waits for the
    stall timeout."""
    if arc.size() < 2:
        pytest.skip("needs a second rank to be refused for")
    last = arc.size() - 1
    if arc.rank() == last:
        with pytest.raises(TypeError, match=r"torch.complex64"):
            arc.allreduce_async_(torch.zeros(3, dtype=torch.complex64), "refused.dtype")
        with pytest.raises(ValueError, match=r"not contiguous"):
            arc.broadcast_async_(torch.zeros(4, 6).t(), 0, "refused.layout")
        h = arc.allreduce_async_(torch.zeros(3), "refused.runtime", compression="bogus")
    else:
        with pytest.raises(arc.ArcreduceError,
                           match=rf"'refused.dtype' was refused on rank {last}: TypeError: "
                                 r".*torch.complex64"):
            arc.allreduce_(torch.zeros(3), "refused.dtype")
        with pytest.raises(arc.ArcreduceError,
                           match=rf"'refused.layout' was refused on rank {last}: ValueError: "
                                 r".*not contiguous"):
            arc.broadcast_(torch.zeros(6, 4), 0, "refused.layout")
        h = arc.allreduce_async_(torch.zeros(3), "refused.runtime")
    with pytest.raises(arc.ArcreduceError, match=r"unknown compressor 'bogus'"):
        arc.synchronize(h)
    arc.allreduce_(torch.ones(2), "after.refusals", compression="none")  # still working
