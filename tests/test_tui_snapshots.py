"""SVG snapshots of the app (pytest-textual-snapshot): the main screen on a stored audit, the help
screen, the MLP-scan chart. Deterministic: a seeded synthetic store, a fixed terminal size, and a pause
for the detail pane's debounce before the picture is taken. Update with `pytest --snapshot-update`."""

from __future__ import annotations

import pytest

from reachtui.tui.app import ReachApp
from tui_store import build_store

SIZE = (150, 42)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("snap") / "audit.sqlite"
    build_store(path, n=60, k=6, seed=3)
    return path


async def _settle(pilot) -> None:
    """Wait until the detail pane shows the selected question (its 50 ms debounce timer has fired)."""
    import time

    app = pilot.app
    end = time.monotonic() + 10
    while app.main.detail_timer is not None and time.monotonic() < end:
        await pilot.pause(0.02)
    await pilot.pause(0.05)


def test_main_screen(snap_compare, store_path):
    assert snap_compare(ReachApp(store_path), press=["j", "j"], terminal_size=SIZE, run_before=_settle)


def test_main_screen_failure_set_with_edited_layers(snap_compare, store_path):
    keys = ["f", "f", "right_square_bracket", "right_square_bracket", "m", "right_square_bracket", "x"]
    assert snap_compare(ReachApp(store_path), press=keys, terminal_size=SIZE, run_before=_settle)


def test_help_screen(snap_compare, store_path):
    assert snap_compare(ReachApp(store_path), press=["question_mark"], terminal_size=SIZE, run_before=_settle)


def test_mlp_chart(snap_compare, store_path):
    assert snap_compare(ReachApp(store_path), press=["v"], terminal_size=SIZE, run_before=_settle)


def test_main_screen_at_80x24(snap_compare, store_path):
    """A narrow terminal: the detail pane stacks under the table; the layer strip keeps its three rows."""
    keys = ["f", "j", "right_square_bracket", "m"]
    assert snap_compare(ReachApp(store_path), press=keys, terminal_size=(80, 24), run_before=_settle)
