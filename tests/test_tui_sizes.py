"""The app at any terminal size: at 80x24, 120x40 and 200x60 every action shows its result on screen (the
live run's answer and ✓/✗, the layer strip's MLP row, an apply's repaired/broken counts), read from the
screen itself (the text of a screenshot)."""

from __future__ import annotations

import pytest

from reachtui.tui.app import ReachApp
from test_tui import FakeRunner, settle, store_ids
from tui_screen import screen_text


def screen_lines(app) -> list[str]:
    return [line.strip() for line in screen_text(app)]
from tui_store import build_store


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("sizes") / "audit.sqlite"
    return path, build_store(path, n=60, k=6, seed=3)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_every_action_shows_its_result(stored, size):
    path, run_id = stored
    ids = store_ids(path, run_id)
    app = ReachApp(path)
    app.runner = FakeRunner()    # right iff MLP 2 is silenced
    async with app.run_test(size=size) as pilot:
        await pilot.press("f", "f")                     # failure set (routes)
        lines = screen_lines(app)
        assert any(line.startswith("mlp ") for line in lines), lines            # the strip's MLP row
        await pilot.press("right_square_bracket", "right_square_bracket", "m")
        lines = screen_lines(app)
        assert any("[2]" in line and line.startswith("layer") for line in lines)  # the cursor, without colour
        assert any("silence MLP 2" in line for line in lines)
        await pilot.press("enter")
        await settle(app, pilot, 0.1)
        lines = screen_lines(app)
        qid = ids["failure:routes"][0]
        assert any(f"live run on {qid}" in line for line in lines), lines
        live = {line.split("▕")[-1].strip() for line in lines}      # the right-hand pane, when side by side
        r = app.last_live
        assert any(line.startswith(f"answer  default ✗ {r['default_answer']} → edited ✓ {r['answer']}")
                   for line in live), lines
        await pilot.press("A")
        await settle(app, pilot, 0.1)
        n_f = len(ids["failure:routes"])
        assert any(f"repaired {n_f}/{n_f}" in line for line in screen_lines(app))
