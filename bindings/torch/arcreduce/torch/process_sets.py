"""Process sets, as Horovod's: collectives among a subset of the ranks.

``add_process_set(ranks)`` is collective over every rank of the job (each passes the same ranks,
in the same order of calls) and returns a ``ProcessSet``; ops take it as ``process_set=``. Ranks
outside a set that submit an op to it get ArcreduceError at once. Each set has a runtime of its
own (coordinator, negotiation, compressor state), so sets never wait for one another. Ranks are
numbered by the job: ``broadcast``'s ``root_rank`` is a rank of the job; ``ProcessSet.rank()`` is
this rank's index in the set (the order of allgather's output).
"""
from . import _C


class ProcessSet:
    """A set of ranks. ``process_set_id`` is None until ``add_process_set`` registers it."""

    process_set_id = None
    ranks = None

    def __init__(self, ranks):
        ranks = list(ranks)
        if any(isinstance(r, bool) or not isinstance(r, int) for r in ranks):
            raise ValueError(f"a ProcessSet takes a list of ranks (ints), not {ranks!r}")
        self.ranks = sorted(ranks)

    def size(self):
        """Number of ranks in the set (None before it is added)."""
        return None if self.process_set_id is None else len(self.ranks)

    def rank(self):
        """This rank's index in the set, -1 if it is not a member (None before it is added)."""
        if self.process_set_id is None:
            return None
        return _C.process_set_rank(self.process_set_id)

    def included(self):
        """Whether this rank belongs to the set."""
        if self.process_set_id == 0:
            return True
        return _C.rank() in self.ranks

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


# Every rank of the job (id 0); its ranks are filled in by init().
global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _after_init():
    global_process_set.ranks = list(range(_C.size()))


def add_process_set(process_set):
    """Registers ``process_set`` (a ProcessSet or a list of ranks) on every rank and returns the
    ProcessSet with its id. Raises ValueError for an empty list, a rank outside the job, a rank
    twice, every rank of the job (that is ``global_process_set``), the ranks of an existing set,
    or ranks that differ across ranks (on every rank)."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError(f"{process_set} is added already")
    try:
        process_set.process_set_id = _C.add_process_set(process_set.ranks)
    except _C.ArcreduceError as e:
        raise ValueError(str(e)) from None
    return process_set


def remove_process_set(process_set):
    """Removes a set (call it on every rank, as Horovod); its pending ops fail. Returns False for
    the global set or a set that is not registered, True otherwise."""
    if not isinstance(process_set, ProcessSet) or not process_set.process_set_id:
        return False
    try:
        _C.remove_process_set(process_set.process_set_id)
    except _C.ArcreduceError:
        return False
    process_set.process_set_id = None
    return True


def _id_of(process_set):
    """The runtime's id of ``process_set`` (None: the global set)."""
    if process_set is None:
        return 0
    if isinstance(process_set, ProcessSet):
        if process_set.process_set_id is None:
            raise ValueError(f"{process_set} is not registered: pass it to add_process_set() "
                             "first")
        return process_set.process_set_id
    raise TypeError(f"process_set must be a ProcessSet, not {type(process_set).__name__}")


def _size_of(set_id):
    return _C.size() if set_id == 0 else len(_C.process_set_ranks(set_id))
