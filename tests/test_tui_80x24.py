"""The app at 80×24 (and larger): every key of the help screen shows its result while the question table
keeps at least 8 rows on screen, and no visible line is cut mid-word or inside an interval (`tui_screen`:
each word on screen checked against the texts its widget was given)."""

from __future__ import annotations

import time

import pytest
from conftest import settle

from reachtui.tui.actions import ACTIONS, help_rows
from reachtui.tui.app import ReachApp
from reachtui.tui.screens.main import MainScreen
from test_tui import FakeRunner
from tui_screen import cut_words, screen_text
from tui_store import build_store


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "audit.sqlite"
    return path, build_store(path, n=60, k=6, seed=3)


def _on_screen(app, text: str) -> bool:
    return text in "\n".join(screen_text(app))


#: (binding id, key pressed, what its result shows on screen); the keys in an order that gives each one
#: something to do (an apply before the explorations, the search box before escape). Keys that open
#: another screen are checked there, then that screen is closed.
KEYS = [
    ("app.help", "question_mark", "reachtui — keys"),
    ("filter.failure", "f", "filter: failure set (sample)"),
    ("table.down", "j", None),
    ("table.up", "k", None),
    ("table.page_down", "pagedown", None),
    ("table.page_up", "pageup", None),
    ("table.last", "G", None),
    ("table.first", "g", None),
    ("layer.right", "right_square_bracket", "[1]"),
    ("layer.left", "left_square_bracket", "[0]"),
    ("layer.repeat", "plus", "×2"),
    ("layer.less", "minus", "default (identity route"),
    ("layer.skip", "x", "skip"),
    ("layer.reset", "0", "default (identity route, nothing silenced)"),
    ("layer.silence", "m", "off"),
    ("live.run", "enter", "live run on"),
    ("view.intervals", "i", "95% intervals"),
    ("live.apply", "A", "repaired"),
    ("live.explorations", "o", "explorations of this run"),
    ("live.cancel", "c", None),
    ("filter.realized", "r", "filter: realized"),
    ("filter.unreachable", "u", "filter: unreachable"),
    ("filter.all", "a", "filter: all questions"),
    ("layer.edit", "e", "route over layers"),
    ("view.charts", "v", "MLP scan"),
    ("export.csv", "E", "rows →"),
    ("view.trace", "t", None),                # the trace pane in place of the detail (the fake runner has no
    ("trace.left", "less_than_sign", None),   # trace: the pane says so in one line)
    ("trace.right", "greater_than_sign", None),
    ("view.trace", "t", None),                # and back
    ("view.lens_sort", "L", None),
    ("app.search", "slash", "search questions and outputs"),
    ("app.clear_search", "escape", "filter: all questions"),
    ("app.focus_next", "tab", None),
    ("app.palette", "ctrl+p", "Search for commands"),
    ("app.quit", "q", None),
]


def test_the_keys_cover_every_key_of_the_help_screen():
    main_ids = {bid for _keys, _what, bid in help_rows() if not bid.startswith("compare.")}
    assert {bid for bid, _key, _shown in KEYS} == main_ids
    assert {a.id for a in ACTIONS if a.scope != "compare"} | {"app.palette"} == main_ids


async def _pressed(app, pilot, key: str) -> None:
    await pilot.press(key)
    await settle(app, pilot)


def _nothing_cut(app, bid: str) -> None:
    problems = cut_words(app)
    assert not problems, (bid, problems, "\n".join(screen_text(app)))


def _table_rows_shown(app) -> int:
    """How many question rows the screen shows (read from the screen's text inside the table)."""
    table = app.main.table
    region = table.region
    ids = {r.qid for r in table.rows}
    lines = screen_text(app)[region.y:region.bottom]
    return sum(1 for line in lines if line[region.x:region.right].split(" ", 1)[0] in ids)


@pytest.mark.parametrize("size", [(80, 24), pytest.param((120, 40), marks=pytest.mark.slow),
                                  pytest.param((200, 50), marks=pytest.mark.slow)])
async def test_every_key_shows_its_result_and_the_table_keeps_8_rows(stored, tmp_path, size):
    path, _ = stored
    app = ReachApp(path, export_dir=tmp_path)
    app.runner = FakeRunner()
    async with app.run_test(size=size, notifications=True) as pilot:    # the notifications on screen too
        await settle(app, pilot, 0.1)
        _nothing_cut(app, "start")
        for bid, key, shown in KEYS:
            await _pressed(app, pilot, key)
            if bid == "app.quit":
                break
            if shown is not None:
                assert _on_screen(app, shown), (bid, "\n".join(screen_text(app)))
            _nothing_cut(app, bid)
            if not isinstance(app.screen, MainScreen):
                await _pressed(app, pilot, "escape")
                assert isinstance(app.screen, MainScreen), bid
                _nothing_cut(app, bid)
            if bid == "app.focus_next":
                app.main.table.focus()
            assert app.main.table.scrollable_content_region.height >= 8, bid
            assert _table_rows_shown(app) >= min(8, len(app.main.table.rows)), (bid, "\n".join(screen_text(app)))
    assert not app.is_running


COMPARE_KEYS = [
    ("compare.gained", "r", "realized gained (B only)"),
    ("compare.lost", "R", "realized lost (A only)"),
    ("compare.both_wrong", "w", "wrong in both"),
    ("compare.expanded", "e", None),
    ("compare.shrunk", "s", None),
    ("compare.preserved", "p", None),
    ("compare.out_of_reach", "o", None),
    ("compare.all", "a", "all compared questions"),
    ("compare.charts", "v", "where the curves cross"),
]


def test_the_comparison_keys_cover_its_part_of_the_help_screen():
    assert {bid for bid, _k, _s in COMPARE_KEYS} == {bid for _k, _w, bid in help_rows() if bid.startswith("compare.")}


async def test_every_key_of_the_comparison_view_at_80x24(tmp_path):
    """The comparison view (`open --compare A B`) at 80×24: each of its keys shows its filter, nothing on
    screen is cut, and its table keeps its rows beside both runs' outputs (6 rows: its header holds the
    comparison's numbers)."""
    from reachtui.store import Store
    from tables_fixtures import add_run, make_task
    from test_compare import _run_data

    path = tmp_path / "compare.sqlite"
    task = make_task("arith", 22)
    with Store(path) as store:
        add_run(store, "base", task, "proto1", _run_data(task, "a", list(range(21))))
        add_run(store, "trained", task, "proto1", _run_data(task, "b", list(range(20)) + [21], "mcts"))
    app = ReachApp(path, compare=(1, 2))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        compare = app.screen
        for bid, key, shown in COMPARE_KEYS:
            await _pressed(app, pilot, key)
            if shown is not None:
                assert _on_screen(app, shown), (bid, "\n".join(screen_text(app)))
            _nothing_cut(app, bid)
            if app.screen is not compare:
                await _pressed(app, pilot, "escape")
                _nothing_cut(app, bid)
            table = compare.table
            lines = screen_text(app)[table.region.y:table.region.bottom]
            assert sum(1 for line in lines if line.split(" ", 1)[0] in {r.qid for r in table.rows}) >= min(
                6, len(table.rows)), bid


async def test_while_the_audit_runs_the_table_keeps_8_rows_at_80x24(tmp_path):
    """A running audit makes the header taller (a bar, figures "so far"): the table keeps its 8 rows."""
    from reachtui.engine.progress import Progress
    from reachtui.tui.messages import EngineProgress, ModelState

    path = tmp_path / "running.sqlite"
    run_id = build_store(path, n=320, k=8, progress=0.8, model="demo")
    app = ReachApp(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.audit_running = True
        app.post_message(ModelState("demo ready · cpu float32 · 8 layers · loaded in 2.1 s", 8))
        app.post_message(EngineProgress(Progress(run_id, "routes", 97, 256)))
        await settle(app, pilot, 0.6)      # the reload the progress asks for
        assert _on_screen(app, "audit: routes 97/256") and _on_screen(app, "so far")
        _nothing_cut(app, "running")
        assert _table_rows_shown(app) >= 8
