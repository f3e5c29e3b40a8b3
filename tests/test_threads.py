"""The torch thread count chosen when the user gives none: free cores (cores less the load average), at
least 1, at most half the cores for the app; --threads and $OMP_NUM_THREADS win."""

from __future__ import annotations

import os

import pytest

from reachtui.commands.options import default_threads, set_threads


@pytest.mark.parametrize("cores, load, app, audit", [
    (2, 0.0, 1, 2), (2, 0.6, 1, 1), (2, 2.5, 1, 1), (16, 0.2, 8, 16), (16, 11.6, 4, 4), (16, 3.4, 8, 13),
    (1, 0.0, 1, 1),
])
def test_default_threads_are_the_free_cores(cores, load, app, audit):
    assert default_threads(interactive=True, cores=cores, load=load) == app
    assert default_threads(interactive=False, cores=cores, load=load) == audit


@pytest.fixture
def torch_threads_kept():
    """set_threads also tells a loaded torch: put its count back for the tests that follow."""
    import sys

    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch else None
    yield
    if torch is not None:
        torch.set_num_threads(before)


def test_set_threads_writes_the_choice_for_torch_and_respects_the_user(monkeypatch, torch_threads_kept):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    set_threads(None, interactive=True)
    assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == "2"
    set_threads(None)                           # $OMP_NUM_THREADS is set now: it stands
    assert os.environ["OMP_NUM_THREADS"] == "2"
    set_threads(3)
    assert os.environ["OMP_NUM_THREADS"] == "3"
