"""`error_chain`, the one walk of an exception's causes that the recipe errors share: where a
run's error is placed (`origins`) and whether it is a disk fault (`disk_faults`)."""

import errno

from graphfit.recipes.running import disk_faults, origins
from graphfit.recipes.running.error_chain import error_chain


def _raised(make):
    try:
        make()
    except BaseException as error:  # noqa: BLE001 - the test inspects it
        return error
    raise AssertionError("nothing raised")


def _wrapped_disk_fault():
    try:
        raise OSError(errno.ENOSPC, "No space left on device", "/runs/a/model.keras")
    except OSError:
        raise RuntimeError("saving failed")  # noqa: B904 - the context is the point


def test_cause_and_context_outermost_first_and_a_cycle_ends_it():
    def chained():
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise ValueError("outer") from inner

    outer = _raised(chained)
    assert [type(link) for link in error_chain(outer)] == [ValueError, KeyError]
    inner = outer.__cause__
    inner.__context__ = outer  # a cycle
    assert error_chain(outer) == [outer, inner]
    assert error_chain(None) == []
    assert len(error_chain(outer, limit=1)) == 1


def test_disk_faults_and_origins_walk_the_same_chain():
    error = _raised(_wrapped_disk_fault)
    assert disk_faults.is_disk_fault(error)  # found through __context__
    assert "/runs/a/model.keras" in disk_faults.describe(error)
    assert not hasattr(disk_faults, "_chain") and not hasattr(origins, "_chain")
