"""The app's small promises (issue 32), each as a person would notice it: a live result never reads as
another question's; an exploration opens at the top of its questions; the first live run of a browsed
store says that it loads the model and the keys stay live meanwhile; the charts say an MLP scan is still
to come while the audit runs; an apply's lines are aligned; the question text stops before the scroll bar."""

from __future__ import annotations

import threading

from conftest import settle

from reachtui.tui.app import ReachApp
from test_tui import FakeRunner, until
from tui_screen import cut_words, region_text, screen_text
from tui_store import build_store

import pytest


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "audit.sqlite"
    return path, build_store(path, n=60, k=6, seed=3)


def _text(app) -> str:
    return "\n".join(screen_text(app))


@pytest.mark.parametrize("size", [(80, 24), (150, 42)])
async def test_moving_to_another_question_clears_the_live_result(stored, size):
    path, _ = stored
    app = ReachApp(path)
    app.runner = FakeRunner()
    async with app.run_test(size=size) as pilot:
        await pilot.press("f", "enter")
        await settle(app, pilot)
        first = app.last_live["qid"]
        assert f"live run on {first}" in _text(app)
        await pilot.press("j")
        await settle(app, pilot)
        second = app.main.table.current_qid
        assert second != first and f"live run on {first}" not in _text(app)
        assert "→ edited" not in _text(app)                      # no answer line of the last question
        await pilot.press("enter")
        await settle(app, pilot)
        assert f"live run on {second}" in _text(app)


async def test_a_result_that_arrives_after_moving_on_says_whose_it_is(stored):
    """A live run started on one question and finished after the cursor moved: shown, marked as not the
    selected question's."""
    path, _ = stored
    gate = threading.Event()

    class Slow(FakeRunner):
        def generate(self, *a, **kw):
            gate.wait(10)
            return super().generate(*a, **kw)

    app = ReachApp(path)
    app.runner = Slow()
    async with app.run_test(size=(150, 42)) as pilot:
        await pilot.press("enter")
        first = app.main.table.current_qid
        await pilot.press("j")
        gate.set()
        await settle(app, pilot)
        assert f"live run on {first} · default (identity route, nothing silenced) (not the selected question)" \
            in region_text(app, "#live")


async def test_an_exploration_opens_at_the_top_of_its_questions(tmp_path):
    path = tmp_path / "long.sqlite"
    build_store(path, n=200, k=6, seed=3)
    app = ReachApp(path)
    app.runner = FakeRunner()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("right_square_bracket", "right_square_bracket", "m", "A")
        await settle(app, pilot)
        await pilot.press("r", "G")      # the last realized question: the apply changed none of them
        assert app.main.table.scroll_y > 50
        await pilot.press("o")
        await pilot.pause()
        await pilot.press("enter")
        await settle(app, pilot, 0.05)
        table = app.main.table
        assert app.filter.kind == "changed" and len(table.rows) > 8
        assert table.cursor == 0 and table.scroll_y == 0 and table.rows[0].qid in _text(app)


async def test_the_first_live_run_of_a_browsed_store_says_it_loads_the_model_and_keys_stay_live(stored):
    """`reachtui open --store`: no model until the first enter, which loads it (seconds): the header's bar and
    the live pane say so at once, a notification too, and the table still moves meanwhile."""
    path, _ = stored
    loading, release = threading.Event(), threading.Event()

    class Loading(ReachApp):
        def load_runner(self, spec):
            loading.set()
            release.wait(10)
            return FakeRunner()

    app = Loading(path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.press("enter")
        await until(pilot, loading.is_set)
        await pilot.pause(0.05)
        assert region_text(app, "#progress-label") == "model: loading synthetic …"
        assert "after loading the model (once, a few seconds; keys stay live)" in region_text(app, "#live")
        assert any("loading synthetic … for the live run" in n.message for n in app._notifications)
        assert cut_words(app) == []
        before = app.main.table.cursor
        await pilot.press("j", "j")                              # keys stay live while it loads
        assert app.main.table.cursor == before + 2
        release.set()
        await settle(app, pilot)
        assert app.last_live is not None and "model: loading" not in _text(app)
        assert "model fake ready" in _text(app)


async def test_the_charts_say_the_mlp_scan_is_still_to_come_while_the_audit_runs(tmp_path):
    from reachtui.engine.progress import Progress
    from reachtui.tui.messages import EngineProgress

    path = tmp_path / "running.sqlite"
    run_id = build_store(path, n=10, k=2, mlp_scan=False, progress=0.5)
    app = ReachApp(path)
    async with app.run_test(size=(80, 24)) as pilot:
        app.audit_running = True
        app.post_message(EngineProgress(Progress(run_id, "sample", 3, 10)))
        await settle(app, pilot)
        await pilot.press("v")
        text = " ".join(" ".join(screen_text(app)).split())
        assert "no MLP scan yet: the audit is still running (now sample 3/10)" in text
        assert "no MLP scan in this run" not in text
    app = ReachApp(path)
    async with app.run_test(size=(80, 24)) as pilot:    # not running: there is none
        await pilot.press("v")
        assert "no MLP scan in this run" in _text(app)


async def test_an_apply_s_lines_are_aligned(stored):
    path, _ = stored
    app = ReachApp(path)
    app.runner = FakeRunner()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("right_square_bracket", "right_square_bracket", "m", "A")
        await settle(app, pilot)
        lines = screen_text(app)
        repaired = next(line for line in lines if line.lstrip().startswith("repaired "))
        broken = next(line for line in lines if line.lstrip().startswith("broken "))
        a = app.last_apply
        assert repaired.split() == ["repaired", f"{a['repaired']}/{a['failure_n']}",
                                    f"({100 * a['repaired'] / a['failure_n']:.1f}%)", "of", a["target"]]
        # label, count and words each start in the same column on both lines
        assert repaired.index(f"{a['repaired']}/") == broken.index(f"{a['broken']}/")
        assert repaired.index("repaired") == broken.index("broken")


@pytest.mark.parametrize("size", [(80, 24), (150, 42)])
async def test_the_question_text_stops_before_the_scroll_bar_at_a_word(stored, size):
    path, _ = stored
    app = ReachApp(path)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        table = app.main.table
        assert len(table.rows) > table.scrollable_content_region.height   # so it has a scroll bar
        r = table.scrollable_content_region
        bar = range(r.right, table.region.right)
        assert len(bar) == 2
        for line in screen_text(app)[r.y:r.bottom]:
            row = line[r.x:r.right]
            text = row.rstrip()
            assert text.endswith("…") or text.endswith("?"), row      # a question's first line, or cut at a word
            assert row[len(text):] == " " * (len(row) - len(text))
        assert cut_words(app) == []


async def test_quitting_is_quick_and_the_audit_s_batch_is_stored_after_the_terminal_is_back(tmp_path):
    """`q` during an audit batch closes the app at once (the batch is not waited for on screen); then, as
    `reachtui open` does after the app, `wait_for_writers` says it finishes the batch and waits for it;
    the farewell says where the run is."""
    import time

    from reachtui.tui.app import Launch

    path = tmp_path / "audit.sqlite"
    run_id = build_store(path, n=10, k=2)
    in_batch, batch_may_end, stored = threading.Event(), threading.Event(), []

    def audit_job(get_runner, on_event, cancel):        # one long batch, then it sees the cancel
        in_batch.set()
        batch_may_end.wait(10)
        stored.append("batch")
        assert cancel.is_set()
        return run_id

    app = ReachApp(path, run_id, launch=Launch(model="fake", audit_job=audit_job))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, in_batch.is_set)
        t0 = time.monotonic()
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running)
        quit_s = time.monotonic() - t0
    assert quit_s < 2 and not stored          # closed while the batch was still computing
    assert app.farewell() == (f"run {run_id} is stored in {path} (its audit stops after the batch it is on); "
                              f"reopen it with reachtui open --store {path} --run {run_id}")
    said = []
    threading.Timer(0.2, batch_may_end.set).start()
    app.wait_for_writers(said.append)
    assert stored == ["batch"]
    assert said == ["finishing the audit's current batch so that it is stored (ctrl+c stops now; the run "
                    "resumes either way) …"]
    app.wait_for_writers(said.append)         # nothing left: says nothing
    assert len(said) == 1


def test_text_fits_its_width_whole_words_only():
    """The header's title drops its least important parts first (a part may shorten before it goes); the
    counters wrap between figure groups, never inside one; a table's text is cut after a whole word."""
    from rich.text import Text

    from reachtui.tui.fit import cut_at_word, fit_line, pack_lines

    parts = [(Text("demo"), 9), (Text("task demo"), 5), (Text("protocol 1a2b3c4d"), 6), (Text("run 1 complete"), 8),
             (Text("model demo ready"), 7), (Text("cpu float32"), 4), (Text("loaded in 2.1 s"), 3)]
    full = "demo · task demo · protocol 1a2b3c4d · run 1 complete · model demo ready · cpu float32 · loaded in 2.1 s"
    assert fit_line(parts, 200, " · ").plain == full
    assert fit_line(parts, 80, " · ").plain == ("demo · task demo · protocol 1a2b3c4d · run 1 complete · model demo "
                                               "ready")
    assert fit_line(parts, 60, " · ").plain == "demo · protocol 1a2b3c4d · run 1 complete · model demo ready"
    assert fit_line(parts, 10, " · ").plain == "demo"                  # what must stay, stays
    path = [Text("exported → store/exports/run1-questions-all-questions.csv"),
            Text("exported → run1-questions-all-questions.csv")]
    line = fit_line([(Text("filter: all questions — 60 of 60 questions"), 9), (path, 5)], 100, "  │ ")
    assert line.plain.endswith("│ exported → run1-questions-all-questions.csv")
    groups = [Text("realized 41.7%"), Text("sample 80.0% gap +38.3 F=24"), Text("routes 45.0% gap +3.3 F=14"),
              Text("n=60")]
    assert pack_lines(groups, 78, " │ ").plain.split("\n") == [
        "realized 41.7% │ sample 80.0% gap +38.3 F=24 │ routes 45.0% gap +3.3 F=14", "n=60"]
    assert pack_lines(groups, 50, " │ ").plain.split("\n") == [
        "realized 41.7% │ sample 80.0% gap +38.3 F=24", "routes 45.0% gap +3.3 F=14 │ n=60"]
    text = "Sam has 17 apples and finds 39 more. He gives away 9."
    assert cut_at_word(text, 100) == text
    assert cut_at_word(text, 44) == "Sam has 17 apples and finds 39 more. He …"
    assert cut_at_word(text, 43) == "Sam has 17 apples and finds 39 more. He …"
    assert cut_at_word(text, 40) == "Sam has 17 apples and finds 39 more. …"
    assert cut_at_word("Supercalifragilistic", 8) == "Superca…"     # one word wider than the room


async def test_a_footer_whose_screen_closed_before_it_was_fitted_does_nothing(stored):
    """The footer fits its keys after a refresh; a screen closed quickly (v, escape) takes its footer with
    it before then: fitting it must not fail."""
    from reachtui.tui.widgets.footer import FittingFooter

    path, _ = stored
    app = ReachApp(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("v")
        footer = app.screen.query_one(FittingFooter)
        await pilot.press("escape")
        await pilot.pause()
        footer.fit()
        assert app.is_running
