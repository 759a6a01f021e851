"""A tensor reduced on its own (a loss, a metric, a buffer) is reduced exactly by default, as
Horovod's collectives are (compression=None is Compression.none): before, it went through the
job's gradient compression, and efm error feedback added the previous calls' momentum to it (the
second average of a metric read 2.5 + 0.9 x 1.5 = 3.85). Compression() asks for the job's
compression explicitly."""
import pytest
import torch

import arcreduce.torch as arc


def exact_mean(step, shape):
    # Rank r contributes base + r: the mean over ranks is base + (size - 1) / 2.
    base = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32).reshape(shape)
    return base * (step + 1) + (arc.size() - 1) / 2


def contribution(step, shape):
    base = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32).reshape(shape)
    return base * (step + 1) + arc.rank()


@pytest.mark.parametrize("shape", [(1,), (4,), (100, 10)])
def test_a_metric_reduced_repeatedly_is_the_exact_mean_every_time(runtime, shape):
    name = f"plain.metric.{'x'.join(map(str, shape))}"
    for step in range(4):
        out = arc.allreduce(contribution(step, shape), name=name)
        torch.testing.assert_close(out, exact_mean(step, shape), rtol=0, atol=1e-5)
        t = contribution(step, shape)
        arc.allreduce_(t, name=name + ".inplace")
        torch.testing.assert_close(t, exact_mean(step, shape), rtol=0, atol=1e-5)
        handle = arc.allreduce_async_(contribution(step, shape), name=name + ".async")
        torch.testing.assert_close(arc.synchronize(handle), exact_mean(step, shape), rtol=0,
                                   atol=1e-5)


def test_grouped_allreduce_is_exact_by_default(runtime):
    for step in range(3):
        outs = arc.grouped_allreduce([contribution(step, (8, 4)), contribution(step, (3,))],
                                     name="plain.grouped")
        torch.testing.assert_close(outs[0], exact_mean(step, (8, 4)), rtol=0, atol=1e-5)
        torch.testing.assert_close(outs[1], exact_mean(step, (3,)), rtol=0, atol=1e-5)


def test_compression_with_no_fields_is_the_jobs_compression(runtime):
    if arc.config()["error_feedback"] != "efm" or arc.config()["compressor"] == "none":
        pytest.skip("the job's compression here is exact or has no momentum")
    # efm carries momentum from call to call: the second result is not the second mean.
    shape = (100, 10)
    results = [arc.allreduce(contribution(step, shape), name="plain.job",
                             compression=arc.Compression()) for step in range(2)]
    assert not torch.allclose(results[1], exact_mean(1, shape), atol=1e-3)
