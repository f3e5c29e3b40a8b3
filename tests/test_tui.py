"""The app (`reachtui open`) on synthetic stores built with the store API: counts and rows on open,
filter keys against the store's own sets, search, the layer strip, typed routes, live runs and apply
with a fake runner (no torch), explorations, export, the palette, errors as notifications."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import settle

from reachtui.store import Store
from reachtui.generation import Generation, RunnerDefaults
from reachtui.tui.app import ReachApp
from reachtui.intervention import Intervention
from reachtui.routes import Route
from reachtui.tui.intervention import LayerEditor
from tui_store import build_store
import reference  # noqa: E402

SIZE = (150, 42)


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("tui") / "audit.sqlite"
    run_id = build_store(path, n=60, k=6, seed=3)
    return path, run_id


def store_ids(path: Path, run_id: int) -> dict[str, list[str]]:
    """What the store says, by plain SQL through the store API: qids of each set, in task order."""
    with Store(path, readonly=True) as s:
        qid = {q["question_id"]: q["qid"] for q in s.run_questions(run_id)}
        out = {"all": list(qid.values()), "realized": [qid[k] for k in s.realized_ids(run_id)]}
        for fs in s.failure_sets(run_id):
            out[fs["name"]] = [qid[k] for k in s.failure_set_members(fs["id"])]
        rows = s.conn.execute(
            "SELECT q.qid FROM run_questions rq JOIN questions q ON q.id = rq.question_id WHERE rq.run_id = ? "
            "AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = rq.run_id AND "
            "a.question_id = q.id AND a.correct = 1 AND a.probe IN ('realized', 'sample', 'routes')) "
            "ORDER BY q.idx", (run_id,)).fetchall()
        out["unreachable"] = [r[0] for r in rows]
    return out


async def until(pilot, condition, timeout: float = 10.0) -> None:
    """Let the app run until `condition()` holds (timers and workers are slow on a busy machine)."""
    import time

    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out waiting for the app"
        await pilot.pause(0.02)


def screen_lines(app: ReachApp) -> list[str]:
    """The screen as text lines (from an SVG screenshot: each <text> at its x, grouped by y)."""
    import html

    svg = app.export_screenshot()
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), html.unescape(m.group(3))))
    return ["".join(t for _x, t in sorted(v)).replace("\xa0", " ").rstrip() for _y, v in sorted(rows.items())]


def live_text(app: ReachApp) -> str:
    """What the live pane says (a live result, an apply's counts, a failure), its whole text."""
    from tui_screen import plain

    return plain(app.query_one("#live-text").content)


def shown(app: ReachApp) -> list[str]:
    return app.table.row_ids


async def test_open_shows_counts_and_rows(stored):
    path, run_id = stored
    ids = store_ids(path, run_id)
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert shown(app) == ids["all"]
        c = app.counters
        assert c.n == 60 and c.realized == len(ids["realized"])
        assert c.failure == {"sample": len(ids["failure:sample"]), "routes": len(ids["failure:routes"])}
        with Store(path, readonly=True) as s:
            summary = {r["probe"]: r for r in reference.probe_summary(s, run_id)}
        assert c.reached == {p: summary[p]["reachable"] for p in ("sample", "routes")}
        header = str(app.query_one("#run-counters").render())
        assert f"realized {100 * c.realized / 60:.1f}%" in header
        assert f"F={len(ids['failure:routes'])}" in header
        assert app.sub_title == "all questions — 60 of 60"


async def test_filter_keys_show_exactly_the_store_sets(stored):
    path, run_id = stored
    ids = store_ids(path, run_id)
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f")
        assert shown(app) == ids["failure:sample"]
        assert app.sub_title == f"failure set (sample) — {len(ids['failure:sample'])} of 60"
        await pilot.press("f")
        assert shown(app) == ids["failure:routes"]
        await pilot.press("f")  # cycles back to the first probe
        assert shown(app) == ids["failure:sample"]
        await pilot.press("r")
        assert shown(app) == ids["realized"]
        await pilot.press("u")
        assert shown(app) == ids["unreachable"]
        await pilot.press("a")
        assert shown(app) == ids["all"]


async def test_search_filters_by_fts(stored):
    path, run_id = stored
    with Store(path, readonly=True) as s:
        qid = {q["question_id"]: q["qid"] for q in s.run_questions(run_id)}
        expected = [qid[k] for k in s.search(run_id, "marbles")]
    assert expected
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash")
        await pilot.press(*"marbles", "enter")
        assert shown(app) == expected
        assert "search “marbles”" in app.sub_title
        await pilot.press("r")  # a filter key combines with the search
        realized = set(store_ids(path, run_id)["realized"])
        assert shown(app) == [q for q in expected if q in realized]
        await pilot.press("escape")
        assert shown(app) == [q for q in store_ids(path, run_id)["all"] if q in realized]


async def test_vim_keys_and_detail_pane(stored):
    path, run_id = stored
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("j", "j", "k")
        assert app.table.cursor == 1
        await pilot.press("G")
        assert app.table.cursor == 59
        await pilot.press("g")
        assert app.table.cursor == 0
        await pilot.press("j")
        await until(pilot, lambda: "syn-00001" in str(app.query_one("#detail-title").render()))
        detail = str(app.query_one("#detail-title").render())
        assert "syn-00001" in detail
        with Store(path, readonly=True) as s:
            q = s.run_questions(run_id)[1]
        assert q["gold"] in detail


async def test_layer_strip_keys_and_typed_route(stored):
    path, _ = stored
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        assert app.intervention == LayerEditor.identity(8)
        await pilot.press("right_square_bracket", "right_square_bracket", "x")  # skip layer 2
        assert app.intervention.layers == (0, 1, 3, 4, 5, 6, 7)
        await pilot.press("right_square_bracket", "plus")  # repeat layer 3
        assert app.intervention.route_text == "0-1,3,3-7"
        await pilot.press("m")  # silence MLP 3
        assert app.intervention.silenced == {3}
        assert app.query_one("#layers").border_title == "route 0-1,3,3-7 · silence MLP 3"   # on the strip's border
        await pilot.press("0")
        assert app.intervention.is_default
        await pilot.press("e")
        route = app.screen.query_one("#route-input")
        route.value = "3-1,99"
        await pilot.pause()
        assert "route" in str(app.screen.query_one("#route-error").render())
        route.value = "0-3,3,5-7"
        app.screen.query_one("#silence-input").value = "5"
        await pilot.pause()
        await pilot.press("enter")
        assert app.intervention.layers == (0, 1, 2, 3, 3, 5, 6, 7)
        assert app.intervention.silenced == {5}


class FakeRunner(RunnerDefaults):
    """Answers each synthetic question right iff MLP 2 is silenced (a stand-in for a model that implements
    `reachtui.generation.Runner`; it cannot trace, as `RunnerDefaults` says)."""

    num_layers = 8
    loaded = SimpleNamespace(name="fake", path="/fake", device="cpu", dtype="float32")
    info = dict(name="fake", path="/fake", model_class="FakeModel", device="cpu", dtype="float32", load_report=None)

    def __init__(self):
        self.lock = threading.RLock()
        self.calls = 0

    def suggest_batch_size(self, prompts, max_new_tokens, route_len):
        return 64, "fake"

    def resolve(self, intervention):
        from reachtui.routes import identity

        return Intervention(intervention.route or identity(self.num_layers), intervention.silenced)

    def generate(self, prompts, intervention=None, *, decoding=None, seeds=None, batch_size=64):
        route, silenced = intervention.route, intervention.silenced
        out = []
        with self.lock:
            self.calls += 1
            for p in prompts:
                a, b, c = map(int, re.findall(r"has (\d+) \w+ and finds (\d+) more\. He gives away (\d+)", p)[0])
                gold = a + b - c
                answer = gold if 2 in silenced else gold + 1
                text = f" {a}+{b}={a + b}. {a + b}-{c}={answer}. #### {answer}"
                out.append(Generation(text, [1] * 9, -0.1, 9, len(route) if route else 8, 100))
        return out

    def generate_many(self, prompts, interventions, *, decoding=None, seeds=None, batch_size=64, on_done=None,
                      rows=None):
        out = []
        for i, iv in enumerate(interventions):
            gens = self.generate(prompts if rows is None else [prompts[j] for j in rows[i]], iv)
            out.append(gens)
            if on_done is not None:
                on_done(i, gens)
        return out


async def test_a_runner_that_cannot_trace_says_so_in_the_trace_pane(stored):
    """The trace pane with a runner that cannot read a generation token by token (`RunnerDefaults`): the
    runner's one line, in the pane's title, and nothing else there."""
    from tui_screen import plain

    path, _ = stored
    app = ReachApp(path)
    app.runner = FakeRunner()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        await settle(app, pilot, 0.1)
        assert plain(app.query_one("#trace-title").content) == \
            "trace failed: this runner cannot read a generation token by token"
        assert plain(app.query_one("#trace-body").content) == ""


async def test_live_run_and_apply_with_a_runner(stored, tmp_path):
    path, run_id = stored
    ids = store_ids(path, run_id)
    app = ReachApp(path)
    app.runner = FakeRunner()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f", "f")  # failure set (routes)
        await pilot.press("right_square_bracket", "right_square_bracket", "m", "enter")
        await settle(app, pilot)
        r = app.last_live
        assert r["qid"] == ids["failure:routes"][0]
        assert r["correct"] is True and r["silenced"] == "2" and r["route"] == "0-7"
        assert r["default_correct"] is False
        live = live_text(app)
        assert "silence MLP 2" in live and "✓" in live
        await pilot.press("A")
        await settle(app, pilot)
        a = app.last_apply
        assert a["status"] == "complete"
        assert (a["repaired"], a["failure_n"]) == (len(ids["failure:routes"]), len(ids["failure:routes"]))
        assert (a["broken"], a["realized_n"]) == (0, len(ids["realized"]))
        eid = a["exploration_id"]
        calls = app.runner.calls
        await pilot.press("A")        # the same intervention again: the stored exploration re-opens, nothing runs
        await settle(app, pilot)
        assert app.runner.calls == calls and app.last_apply["exploration_id"] == eid
        assert any(f"already applied: exploration #{eid} re-opened" in n.message for n in app._notifications)
        assert app.filter.kind == "changed" and shown(app) == ids["failure:routes"]
    with Store(path, readonly=True) as s:
        assert [e["id"] for e in s.explorations(run_id) if e["silenced"] == "2"] == [eid]
        e = s.get_exploration(eid)
        assert (e["status"], e["silenced"], e["route"], e["repaired"], e["broken"]) == (
            "complete", "2", None, len(ids["failure:routes"]), 0)
        assert e["target"] == "failure:routes+realized"
        assert len(s.attempts(run_id, probe=f"explore:{eid}")) == len(ids["failure:routes"]) + len(ids["realized"])
    # re-open it in a fresh app: the intervention and the counts come back
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.intervention.silenced == {2}
        assert app.last_apply["repaired"] == len(ids["failure:routes"])
        # ... and the table shows the questions it changed: here every failure-set question, repaired
        assert app.filter.kind == "changed" and shown(app) == ids["failure:routes"]
        assert f"exploration #{eid}" in live_text(app)


async def test_worker_errors_are_notifications_not_crashes(stored):
    path, _ = stored
    app = ReachApp(path)  # the synthetic run's model does not exist: loading it must fail politely
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.is_running
        notes = [n.message for n in app._notifications]
        assert any("synthetic" in m or "not found" in m for m in notes), notes
        assert "failed" in live_text(app)


async def test_export_writes_the_filtered_table(stored, tmp_path):
    path, run_id = stored
    ids = store_ids(path, run_id)
    app = ReachApp(path, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f", "E")
        out = app.last_export
        assert out is not None and out.exists() and out.suffix == ".csv"
        assert f"exported → {out.name}" in str(app.query_one("#status").render())  # the folder: in a notification
        assert any(str(out) in n.message for n in app._notifications)
    rows = list(csv.DictReader(out.open()))
    assert [r["question_id"] for r in rows] == ids["failure:sample"]
    assert all(r["realized"] == "0" and r["reachable_sample"] == "1" for r in rows)


def test_the_app_exports_into_a_git_ignored_folder():
    """By default the app writes exports beside the store, in exports/: for the default store that is
    store/exports/, which git ignores (nothing the app writes shows up as a change to commit)."""
    import shutil

    root = Path(__file__).resolve().parents[1]
    app = ReachApp(root / "store" / "reachtui.sqlite")
    assert app.export_dir == root / "store" / "exports"
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "check-ignore", "-q", "store/exports/run1-questions.csv"], cwd=root)
    assert out.returncode == 0


async def test_palette_has_namespaced_commands(stored):
    from reachtui.tui.palette import palette_commands

    path, _ = stored
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        titles = [t for t, _, _ in palette_commands(app)]
        for want in ("filter: failure set (routes)", "layer: silence MLP 5", "export: questions as CSV",
                     "view: charts (MLP scan)"):
            assert want in titles
        assert any(t.startswith("run: open run 1 ") for t in titles)
        dict((t, cb) for t, cb, _ in palette_commands(app))["filter: failure set (routes)"]()
        assert app.filter.kind == "failure" and app.filter.probe == "routes"
        dict((t, cb) for t, cb, _ in palette_commands(app))["layer: silence MLP 5"]()
        assert app.intervention.silenced == {5}


async def test_charts_and_help_open_and_close(stored):
    path, _ = stored
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("v")
        assert type(app.screen).__name__ == "ChartsScreen"
        await pilot.press("f")  # main-screen keys are off under the charts
        assert app.filter.kind == "all"
        await pilot.press("escape", "question_mark")
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        assert app.screen is app.screen_stack[0]


async def test_live_audit_fills_the_table(tmp_path):
    """An audit job (here: writing a synthetic run in steps) fills the table while it runs."""
    from reachtui.engine.progress import Progress
    from reachtui.tui.app import Launch

    path = tmp_path / "live.sqlite"
    seen = []

    def job(get_runner, on_event, cancel):
        run_id = build_store(path, n=30, k=4, progress=0.5)
        on_event(Progress(run_id, "realized", 15, 30))     # resumed: 15 stored, none generated by this session
        shown.wait(30)
        on_event(Progress(run_id, "realized", 30, 30, generated=15))
        return run_id

    app = ReachApp(path, launch=Launch(model="synthetic", audit_job=job))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, 0.6)
        await until(pilot, lambda: len([r for r in app.table.rows if r.realized is not None]) == 15)
        seen.append(len([r for r in app.table.rows if r.realized is not None]))
        assert app.run_info is not None and len(app.table.rows) == 30
    assert seen == [15]


async def test_a_running_audit_says_its_numbers_are_so_far(tmp_path):
    """While the audit runs, start-up says one thing (the model loads for the audit), and then each figure
    not final yet says "so far (n of N questions)": realized as many as the progress bar shows, a probe
    counting only the questions with all K of its attempts in (one question has 3 of 4); no gap until final."""
    from textual.widgets import Static

    from reachtui.engine.progress import Progress
    from reachtui.tui.app import Launch
    from reachtui.tui.widgets.panes import RunHeader

    path = tmp_path / "live.sqlite"
    started, go_on, shown = threading.Event(), threading.Event(), threading.Event()

    def job(get_runner, on_event, cancel):
        started.set()
        go_on.wait(30)
        run_id = build_store(path, n=30, k=4, progress=0.5)
        with Store(path) as s:
            s.conn.execute("DELETE FROM attempts WHERE run_id = ? AND probe = 'sample' AND attempt = 3 AND "
                           "question_id = (SELECT min(question_id) FROM attempts WHERE run_id = ?)", (run_id, run_id))
            s.conn.commit()
        on_event(Progress(run_id, "realized", 15, 30))     # resumed: 15 stored, none generated by this session
        shown.wait(30)
        on_event(Progress(run_id, "realized", 30, 30, generated=15))
        return run_id

    app = ReachApp(path, launch=Launch(model="synthetic", audit_job=job))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, started.is_set)
        header = app.main.query_one(RunHeader)
        title = str(header.query_one("#run-title", Static).render())
        assert "model loading for the audit" in title and "loads on the first live run" not in title
        assert str(header.query_one("#progress-label", Static).render()) == "audit: loading the model …"
        go_on.set()
        await until(pilot, lambda: "so far" in str(header.query_one("#run-counters", Static).render()))
        await until(pilot, lambda: "15/30" in str(header.query_one("#progress-label", Static).render()))
        counters = str(header.query_one("#run-counters", Static).render())
        realized = sum(1 for r in app.all_rows if r.realized)
        assert f"realized {realized} of 15 so far (15 of 30 questions)" in counters
        assert re.search(r"sample \d+ reached so far \(14 of 30 questions\)", counters)
        assert re.search(r"routes \d+ reached so far \(15 of 30 questions\)", counters)
        assert "gap" not in counters and "%" not in counters
        assert str(header.query_one("#progress-label", Static).render()) == "audit: realized 15/30"
        shown.set()                 # 15 generated since the phase's first event: the bar gains the CLI's rate
        await until(pilot, lambda: "30/30" in str(header.query_one("#progress-label", Static).render()))
        assert re.fullmatch(r"audit: realized 30/30 · \d+(\.\d)? attempts/s",
                            str(header.query_one("#progress-label", Static).render()))
        await settle(app, pilot)


def test_browsing_a_store_never_imports_torch(stored):
    path, _ = stored
    code = (
        "import sys, asyncio\n"
        "from reachtui.tui.app import ReachApp\n"
        f"app = ReachApp({str(path)!r})\n"
        "async def go():\n"
        "    async with app.run_test(size=(120, 40)) as pilot:\n"
        "        await pilot.press('f', 'j', 'r', 'v')\n"
        "        await pilot.pause(0.2)\n"
        "        await pilot.press('escape', 'x', 'm')\n"
        "asyncio.run(go())\n"
        "print(','.join(m for m in ('torch', 'transformers') if m in sys.modules) or 'clean')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "clean"


def test_open_command_errors_are_one_line(tmp_path):
    from reachtui.cli import main

    missing = tmp_path / "none.sqlite"
    out = subprocess.run([sys.executable, "-m", "reachtui", "open", "--store", str(missing)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.startswith("error: no audit store at")
    build_store(tmp_path / "s.sqlite", n=5, k=2)
    out = subprocess.run([sys.executable, "-m", "reachtui", "open", "--store", str(tmp_path / "s.sqlite"),
                          "--run", "7"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip() == f"error: no run 7 in {tmp_path / 's.sqlite'}"
    assert main  # imported without starting anything


def test_app_helpers_import_neither_textual_nor_torch():
    """The open command, the store reads and the intervention model are plain Python: only
    reachtui/tui/app.py and its widgets/screens pull in textual, and nothing here pulls in torch."""
    code = ("import sys, reachtui.commands.open, reachtui.tui.data, reachtui.tui.intervention, reachtui.tui.diff\n"
            "print(','.join(m for m in ('torch', 'transformers', 'textual') if m in sys.modules) or 'clean')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clean"


async def test_keymap_remaps_by_binding_id(stored, tmp_path):
    from reachtui.commands.open import read_keymap
    from reachtui.errors import ReachError

    path, run_id = stored
    ids = store_ids(path, run_id)
    km = tmp_path / "keys.toml"
    km.write_text('"filter.failure" = "F"\n"table.down" = "n"\n')
    keymap = read_keymap(str(km))
    assert keymap == {"filter.failure": "F", "table.down": "n"}
    app = ReachApp(path, keymap=keymap)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("F")
        assert shown(app) == ids["failure:sample"]
        await pilot.press("n")
        assert app.table.cursor == 1
        assert any(r[0] == "F" and r[2] == "filter.failure" for r in app.help_rows())
    km.write_text('"filter.nope" = "F"\n')
    with pytest.raises(ReachError, match="unknown binding id 'filter.nope'"):
        read_keymap(str(km))


async def test_command_palette_runs_a_namespaced_command(stored):
    path, run_id = stored
    ids = store_ids(path, run_id)
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"failure set (routes)")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await until(pilot, lambda: shown(app) == ids["failure:routes"])


def test_intervention_edits_and_texts():
    iv = LayerEditor.identity(8)
    assert iv.is_default and iv.value == Intervention() and iv.describe().startswith("default")
    iv = iv.toggle_skip(4).more(3)
    assert iv.layers == (0, 1, 2, 3, 3, 5, 6, 7) and iv.route_text == "0-3,3,5-7"
    assert iv.more(3) is not iv and iv.more(3).count(3) == 2  # at most twice
    assert iv.toggle_skip(4).layers == (0, 1, 2, 3, 3, 4, 5, 6, 7)  # restored after the 3s
    assert iv.toggle_silence(5).describe() == "route 0-3,3,5-7 · silence MLP 5"
    assert iv.with_route_text("0-3,3,5-7") == iv
    assert iv.reset().is_default
    only = LayerEditor(2, Intervention(Route((1,))))
    assert only.toggle_skip(1) is only  # a route keeps at least one layer
    from reachtui.errors import ReachError

    with pytest.raises(ReachError):
        iv.with_route_text("3-1,99")


def test_word_diff_marks_changes():
    from reachtui.tui.diff import same_text, word_diff

    d = word_diff("4*4=16. 4*2=8. 16-8=8. #### 8", "4*4=16. 5*2=10. 16-10=6. #### 6")
    assert d.plain == "4*4=16. [-4*2=8.-]{+5*2=10.+} [-16-8=8.-]{+16-10=6.+} #### [-8-]{+6+}"
    assert same_text(" a b ", "a b")


async def test_worker_messages_while_another_screen_is_on_top(stored):
    """The audit, a live run or an apply may report while the charts or help are open: the main
    screen's widgets are updated underneath, nothing crashes."""
    from reachtui.engine.progress import APPLY, DONE, Progress
    from reachtui.tui.messages import EngineProgress, LiveDone, ModelState

    path, run_id = stored
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("v")
        assert type(app.screen).__name__ == "ChartsScreen"
        app.reload(force=True)
        app.post_message(ModelState("fake ready", 8))
        app.post_message(EngineProgress(Progress(run_id, "sample", 3, 10)))
        app.post_message(LiveDone(dict(qid="syn-00000", gold="1", intervention="silence MLP 1", text=" 1 #### 1",
                                        answer="1", correct=True, route="0-7", silenced="1", new_tokens=5,
                                        seconds=0.01, default_text=None, default_answer=None,
                                        default_correct=None)))
        app.post_message(EngineProgress(Progress(run_id, APPLY, 1, 2, extra=dict(
            exploration_id=9, name="x", target="failure:sample", repaired=1, failure_n=1, broken=0, realized_n=1))))
        await settle(app, pilot, 0.1)
        await pilot.press("escape", "question_mark")
        app.post_message(EngineProgress(Progress(run_id, DONE, 10, 10, status="complete")))
        await settle(app, pilot, 0.1)
        assert app.is_running
        await pilot.press("escape")
        assert "exploration #9" in live_text(app)


async def test_intervals_on_demand_in_the_question_pane(stored):
    """`i` shows, in the question pane's place, per probe reachable, gap, retained, chance control and excess
    with 95% intervals (the cells of the summary export, `tables.header_grid`): a measure per row, the
    probes side by side in protocol order, an interval never broken (here, at 150 columns, each under its
    value), and the notes; `i` again brings the question back. The reach chart carries each probe's
    control@k curve."""
    from reachtui.tables import header_grid, summary_rows, summary_table
    from reachtui.tui.screens.charts import chart_data
    from tui_screen import cut_words, screen_text

    path, run_id = stored
    with Store(path, readonly=True) as store:
        labels, cells, notes = header_grid(summary_table(store, [run_id]))
        rows = {r["probe"]: r for r in summary_rows(store, run_id, intervals=True)}
    assert [c["probe"] for c in cells] == ["sample", "routes"] and notes
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("i")
        pane = app.main.query_one("#intervals")

        def lines() -> list[str]:
            r = pane.region
            return [line[r.x:r.right] for line in screen_text(app)[r.y:r.bottom]]

        await until(pilot, lambda: any("95% intervals" in line for line in lines()))
        shown = lines()
        assert not app.main.query_one("#detail").display and cut_words(app) == []
        heads = next(line for line in shown if "sample" in line)
        assert heads.index("sample") < heads.index("routes")
        for m, label in labels.items():
            i = next(i for i, line in enumerate(shown) if line.strip().startswith(label))
            values = [c[m].split(" [")[0] for c in cells]
            spans = [c[m][len(v) + 1:] for c, v in zip(cells, values) if c[m] != v]
            at = [shown[i].index(v, len(label)) for v in values]
            assert at == sorted(at), (m, shown[i])
            below = shown[i + 1]
            assert [below.index(span) for span in spans] == sorted(below.index(span) for span in spans), (m, below)
        text = " ".join(" ".join(shown).split())
        for note in notes:
            assert note in text
        await pilot.press("i")
        assert not app.main.intervals_shown and app.main.query_one("#detail").display
        cd = chart_data(app.data, app.run_info)
        for probe in cd.curves:
            assert cd.controls[probe] == list(rows[probe]["control_at_k"])


def test_an_interval_never_breaks_whatever_the_width():
    """The intervals grid at any width: one line per measure where the cells fit, each interval under its
    value where not, the probes one after another where even that is too wide; never "[8.2," alone."""
    from rich.console import Console

    from reachtui.tui.widgets.panes import intervals_grid
    from tui_screen import OPEN_INTERVAL, plain

    labels = {"reachable": "reachable", "control": "control", "retained": "retained (vote)"}
    cells = [dict(probe=p, reachable="80.0 [68.2, 88.2]", control="11.2 [8.2, 15.2]", retained="-900.0")
             for p in ("sample", "routes", "mcts")]
    console = Console(width=200)
    widths = {}
    for width in (120, 60, 30):
        text = plain(intervals_grid(labels, cells, width, console), width)
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        assert max(len(line) for line in lines) <= width
        assert not any(OPEN_INTERVAL.search(line) for line in lines), lines
        assert sum(line.count("[8.2, 15.2]") for line in lines) == 3      # each probe's control, whole
        widths[width] = lines
    assert any(line.startswith("control") and line.count("11.2 [8.2, 15.2]") == 3 for line in widths[120])
    assert any(line.startswith("control") and line.count("11.2") == 3 and "[" not in line for line in widths[60])
    assert sum(line.strip().startswith("control") for line in widths[30]) == 3    # one probe after another


async def test_first_hit_reads_the_same_in_the_table_the_detail_and_the_export(stored, tmp_path):
    """First hit is the k at which the probe first reaches, 1-based: the table cell (◆ k), the detail pane's
    attempt title (#k) and `export questions` (first_hit_<probe>) say the same number for one question."""
    from reachtui import tables
    from reachtui.tui.widgets.question_table import probe_cell

    path, run_id = stored
    with Store(path, readonly=True) as s:
        rows = {r["question_id"]: r for r in tables.questions_table(s, [run_id]).dicts()}
        first_attempt = dict(s.conn.execute(
            "SELECT q.qid, min(a.attempt) FROM attempts a JOIN questions q ON q.id = a.question_id "
            "WHERE a.run_id = ? AND a.probe = 'sample' AND a.correct = 1 GROUP BY q.qid", (run_id,)).fetchall())
    qid = next(q for q, r in rows.items() if r["realized"] is False and r["first_hit_sample"] and
               r["first_hit_sample"] > 1)
    k = rows[qid]["first_hit_sample"]
    assert k == first_attempt[qid] + 1              # attempt index 0-based in the store, k 1-based
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f")                      # failure set (sample)
        assert app.table.select_qid(qid)
        row = app.table.rows[app.table.cursor]
        assert row.first_hit[app.run_info.probes.index("sample")] == k
        assert probe_cell("reached", k).split() == ["◆", str(k)]
        await until(pilot, lambda: qid in str(app.main.query_one("#detail-title").render()))
        titles = [c.title for c in app.main.query("#detail-hits Collapsible") if c.display]
        assert titles[0].startswith(f"sample #{k} ")


async def test_a_probe_column_shows_the_probe_s_own_hits_as_the_header_counts_them(stored):
    """Each probe column draws the probe's own outcome (as reachable counts it): ● reached and realized, ◆
    reached and not realized, ○ not reached (also where the default output is right). So its ● and ◆ are
    as many as the header's reachable % says, and a realized question the probe missed shows ○."""
    from textual.widgets import Static

    from reachtui import tables
    from reachtui.tui.state import cell_status
    from reachtui.tui.widgets.question_table import GLYPHS, probe_cell

    path, run_id = stored
    with Store(path, readonly=True) as s:
        reachable = {r["probe"]: r["reachable"] for r in tables.summary_table(s, [run_id]).dicts()}
        q = {r["question_id"]: r for r in tables.questions_table(s, [run_id]).dicts()}
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        probes, rows = app.run_info.probes, app.all_rows
        counters = str(app.main.query_one("#run-counters", Static).render())
        for i, p in enumerate(probes):
            glyphs = [probe_cell(cell_status(r, i), r.first_hit[i]).split()[0] for r in rows]
            assert glyphs.count("●") + glyphs.count("◆") == round(reachable[p] * len(rows))
            assert f"{p} {100 * reachable[p]:.1f}%" in counters
            for r, g in zip(rows, glyphs):
                want = ("●" if q[r.qid]["realized"] else "◆") if q[r.qid][f"reachable_{p}"] else "○"
                assert g == want, (p, r.qid)
        missed = [(r.qid, p) for r in rows for i, p in enumerate(probes) if r.realized and r.reach[i] is False]
        assert missed                        # the store has realized questions a probe misses: drawn ○
        assert set(GLYPHS.values()) == {"●", "◆", "○", "…"}


async def test_help_shows_binding_ids_and_a_clashing_keymap_is_refused(stored, tmp_path):
    from reachtui.commands.open import read_keymap
    from reachtui.errors import ReachError

    path, _ = stored
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        text = "\n".join(screen_lines(app))
        for bid in ("app.quit", "table.down", "filter.failure", "filter.unreachable"):   # the first screenful
            assert bid in text
    from reachtui.tui.actions import keymap_clash

    assert keymap_clash({}) is None                                   # the default keys never clash
    km = tmp_path / "clash.toml"
    km.write_text('"filter.all" = "f"\n')
    with pytest.raises(ReachError, match="'f' would run both filter.all and filter.failure"):
        read_keymap(str(km))
    km.write_text('"filter.all" = "f"\n"filter.failure" = "F"\n')   # moved out of the way: fine
    assert read_keymap(str(km)) == {"filter.all": "f", "filter.failure": "F"}
    km.write_text('"filter.all" = "?"\n')                             # "?" is the help key
    with pytest.raises(ReachError, match="app.help"):
        read_keymap(str(km))


async def test_the_selected_question_stays_in_view_after_a_filter_change(tmp_path):
    path = tmp_path / "long.sqlite"
    build_store(path, n=200, k=6, seed=3)
    app = ReachApp(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("f", *["j"] * 40)
        qid = app.table.current_qid
        await pilot.press("a")
        await pilot.pause(0.1)
        t = app.table
        assert t.current_qid == qid
        top = round(t.scroll_y)
        assert top <= t.cursor < top + t.scrollable_content_region.height


async def test_the_app_exports_markdown_and_latex(stored, tmp_path):
    from reachtui.tui.palette import palette_commands

    path, _ = stored
    app = ReachApp(path, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        commands = {t: cb for t, cb, _ in palette_commands(app)}
        commands["export: summary as LaTeX"]()
        assert app.last_export.suffix == ".tex"
        assert "\\begin{tabular}" in app.last_export.read_text()
        await pilot.press("f")
        commands = {t: cb for t, cb, _ in palette_commands(app)}
        commands["export: questions as Markdown"]()
        text = app.last_export.read_text()
        assert text.startswith("| run | question |") and "_filter: failure set (sample)_" in text


def test_printable_shows_what_a_terminal_would_act_on():
    from reachtui.tui.data import printable

    assert printable("a\x1b[2J\x1b[31mred\x07") == "a\u241b[2J\u241b[31mred\u2407"
    assert printable("line\r\nnext\rover\ttab") == "line\nnext\u240dover\ttab"
    assert printable("x\u202egnp.exe\x7f\x9b") == "x\ufffdgnp.exe\u2421\ufffd"
    assert printable("Sam has 3 apples. 😀 é") == "Sam has 3 apples. 😀 é"
    assert printable(None) is None and printable(7) == 7


async def test_outputs_with_escape_sequences_show_as_signs_not_as_commands(tmp_path):
    """A model's output or a question may hold escape sequences (clear the screen, recolour) or a CR: the
    detail pane shows them as visible signs; the store keeps the text as generated."""
    path = tmp_path / "audit.sqlite"
    run_id = build_store(path, n=4, k=2, seed=1)
    evil = "the total is 7\x1b[2J\x1b[31m. #### 7\rgotcha"
    with Store(path) as s:
        key = s.run_questions(run_id)[0]["question_id"]
        s.conn.execute("UPDATE attempts SET text = ? WHERE run_id = ? AND question_id = ? AND probe = 'realized'",
                       (evil, run_id, key))
        s.conn.execute("UPDATE questions SET question = question || '\x1b]0;title\x07' WHERE id = ?", (key,))
        s.conn.commit()
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "syn-00000" in str(app.query_one("#detail-title").render()))
        default = str(app.query_one("#detail-default").render())
        question = str(app.query_one("#detail-question").render())
        assert "\x1b" not in default + question and "\r" not in default
        assert "7\u241b[2J\u241b[31m. #### 7\u240dgotcha" in default
        assert question.endswith("\u241b]0;title\u2407")
    with Store(path, readonly=True) as s:
        assert s.default_attempt(run_id, key)["text"] == evil


async def test_keys_typed_right_after_slash_go_to_the_search_box_not_the_bindings(stored):
    """A fast typist's `/`, text and Enter arrive queued together: none may fire the screen's bindings
    (`m` silence, `x` skip, `A` apply, Enter a live run)."""
    from textual import events
    from textual.widgets import Input

    path, run_id = stored
    app = ReachApp(path)
    app.runner = FakeRunner()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        before = app.intervention
        for key, char in [("slash", "/"), *[(c if c.isalnum() else {" ": "space", "#": "number_sign"}[c], c)
                                             for c in "#### mxA 14"], ("enter", "\r")]:
            event = events.Key(key, char)             # as Pilot.press sends them, but without its waits:
            event.set_sender(app)                     # all queued before the app handles the first
            app._driver.send_message(event)
        await settle(app, pilot)
        assert app.intervention == before and app.last_live is None and app.last_apply is None
        assert app.runner.calls == 0
        assert "search “#### mxA 14”" in app.sub_title
        await pilot.press("slash", "1", "slash", "2")     # inside the box `/` is a character
        assert app.screen.query_one("#search", Input).value == "1/2"


async def test_quitting_says_where_the_run_is_stored(stored):
    path, run_id = stored
    app = ReachApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("q")
    assert app.farewell() == (f"run {run_id} is stored in {path}; reopen it with "
                              f"reachtui open --store {path} --run {run_id}")
