"""The three helpers Horovod's test_torch.py imports from Horovod's test/utils/common.py,
written here so that the file runs without Horovod's runner and its dependencies."""
import contextlib
import os
import tempfile


def mpi_env_rank_and_size():
    """(rank, size) from the launcher's environment; (0, 1) outside mpirun."""
    for rank_var, size_var in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                               ("PMI_RANK", "PMI_SIZE")):
        if rank_var in os.environ and size_var in os.environ:
            return int(os.environ[rank_var]), int(os.environ[size_var])
    return 0, 1


def skip_or_fail_gpu_test(test, message):
    """Skips a GPU test (fails it where HOROVOD_TEST_GPU=1 says a GPU is expected)."""
    if int(os.environ.get("HOROVOD_TEST_GPU", 0)):
        test.fail(message)
    else:
        test.skipTest(message)


@contextlib.contextmanager
def temppath():
    """A path inside a temporary folder that is removed afterwards."""
    with tempfile.TemporaryDirectory() as folder:
        yield os.path.join(folder, "temp_test_file")
