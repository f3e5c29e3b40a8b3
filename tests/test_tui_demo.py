"""The app on the real demo model: a small audit with the MLP scan, then

- a live edit (silenced MLP, typed route) on a failure-set question shows exactly what
  `reachtui generate demo QUESTION --silence L / --route R --json` prints;
- applying "silence MLP L" to the failure set gives the MLP scan's repaired/broken counts for L;
- `reachtui open demo` without a finished run starts the audit in a worker and the table fills.

Skipped when the demo model is not in assets/ (REACHTUI_TUI_TEST_MODEL may name another model dir)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import settle
from click.testing import CliRunner

from reachtui.assets import DEMO_MODEL_DIR

MODEL = os.environ.get("REACHTUI_TUI_TEST_MODEL", "demo")
MODEL_DIR = DEMO_MODEL_DIR if MODEL == "demo" else Path(MODEL)
pytestmark = pytest.mark.skipif(not (MODEL_DIR / "config.json").is_file(), reason="no demo model in assets/")

SIZE = (150, 42)
LIMIT = 24
BUDGET = 2


@pytest.fixture(scope="module")
def runner():
    """The demo model, on one torch thread: on a shared 2-core machine, intra-op threads fighting other
    processes made batched generation ~8x slower (measured: 27 s vs 3.4 s for 64 prompts)."""
    import torch

    from reachtui.model.load import load_model
    from reachtui.model.run import Runner

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield Runner(load_model(MODEL, device="cpu"))
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def protocol():
    from reachtui.protocol import Protocol, protocol_from_options

    return protocol_from_options(Protocol(), probes="sample,routes", budget=BUDGET)


@pytest.fixture(scope="module")
def audited(tmp_path_factory, runner, protocol):
    from reachtui.engine.audit import run_audit
    from reachtui.store import Store
    from reachtui.tasks import load_task

    path = tmp_path_factory.mktemp("demo") / "audit.sqlite"
    loaded = runner.loaded
    with Store(path) as store:
        result = run_audit(store, runner, model_name=loaded.name, model_path=str(loaded.path),
                           model_class=loaded.arch.model_class, task=load_task("demo"), protocol=protocol,
                           limit=LIMIT, batch_size=8, mlp_scan="sample")
        scan = {r["layer"]: r for r in store.mlp_scan(result.run_id)}
        fs = store.get_failure_set(result.run_id, "failure:sample")
    assert result.status == "complete"
    return path, result.run_id, scan, fs


def _generate(question: str, *args: str) -> dict:
    from reachtui.cli import cli

    out = CliRunner().invoke(cli, ["generate", MODEL, question, "--json", *args])
    assert out.exit_code == 0, out.output
    return json.loads(out.output.strip().splitlines()[-1])


async def test_live_edit_equals_reachtui_generate(audited, runner):
    from reachtui.store import Store
    from reachtui.tui.app import ReachApp

    path, run_id, scan, fs = audited
    best = max(scan.values(), key=lambda r: (r["repaired"], -r["broken"]))["layer"]
    app = ReachApp(path, launch=None)
    app.runner = runner  # the model is already loaded (as after the first live run)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f")  # failure set (sample)
        assert app.filter.probe == "sample" and app.table.rows
        key = app.table.rows[0].key
        with Store(path, readonly=True) as s:
            question = s.conn.execute("SELECT question FROM questions WHERE id = ?", (key,)).fetchone()[0]
        for _ in range(best):
            await pilot.press("right_square_bracket")
        await pilot.press("m", "enter")
        await settle(app, pilot)
        live = app.last_live
        assert live["silenced"] == str(best) and live["route"] == f"0-{runner.num_layers - 1}"
        ref = _generate(question, "--silence", str(best))
        assert (live["text"], live["answer"]) == (ref["text"], ref["answer"])
        assert live["new_tokens"] == ref["new_tokens"]
        # a typed route with a repeated and a skipped layer, MLP still silenced
        route = "0-3,3,5-7" if runner.num_layers == 8 else f"0-1,1,3-{runner.num_layers - 1}"
        await pilot.press("e")
        app.screen.query_one("#route-input").value = route
        await pilot.pause()
        await pilot.press("enter", "enter")
        await settle(app, pilot)
        live = app.last_live
        assert live["route"] == route
        ref = _generate(question, "--route", route, "--silence", str(best))
        assert (live["text"], live["answer"]) == (ref["text"], ref["answer"])
        assert ref["route"] == route


async def test_apply_to_failure_set_equals_the_mlp_scan(audited, runner):
    from reachtui.store import Store
    from reachtui.tui.app import ReachApp

    path, run_id, scan, fs = audited
    best = max(scan.values(), key=lambda r: (r["repaired"], -r["broken"]))["layer"]
    worst = max(scan.values(), key=lambda r: r["broken"])["layer"]
    app = ReachApp(path)
    app.runner = runner
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f")  # failure set (sample): the set the scan ran on
        for layer in dict.fromkeys([best, worst]):
            await pilot.press("0")
            for _ in range(layer - app.query_one("#layers").position):
                await pilot.press("right_square_bracket")
            for _ in range(app.query_one("#layers").position - layer):
                await pilot.press("left_square_bracket")
            await pilot.press("m", "A")
            await settle(app, pilot)
            a = app.last_apply
            row = scan[layer]
            assert a["status"] == "complete"
            assert (a["repaired"], a["failure_n"], a["broken"], a["realized_n"]) == (
                row["repaired"], row["failure_n"], row["broken"], row["realized_n"]), (layer, a, row)
            assert a["failure_n"] == fs["size"]
            with Store(path, readonly=True) as store:   # the same texts, question by question
                texts = lambda probe: dict(store.conn.execute(  # noqa: E731
                    "SELECT question_id, text FROM attempts WHERE run_id = ? AND probe = ?", (run_id, probe)))
                assert texts(f"explore:{a['exploration_id']}") == texts(f"mlp:{layer}")


async def test_open_model_runs_the_audit_and_fills_the_table(tmp_path, runner, protocol):
    from reachtui.commands.open import find_finished_run, make_audit_job
    from reachtui.tasks import load_task
    from reachtui.tui.app import Launch, ReachApp

    path = tmp_path / "live.sqlite"
    task = load_task("demo")
    assert find_finished_run(path, MODEL, task, protocol, 8) is None
    job = make_audit_job(path, task, protocol, limit=8, batch_size=8, mlp_scan=None, new_run=False)
    app = ReachApp(path, launch=Launch(model=MODEL, audit_job=job))
    app.runner = runner
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot, 0.6)
        assert app.run_info is not None and len(app.table.rows) == 8
        assert all(r.realized is not None for r in app.table.rows)
        assert app.run_info.status == "complete"
        assert not app.query_one("#header").has_class("running")
    assert find_finished_run(path, MODEL, task, protocol, 8) == app.run_info.id


@pytest.mark.parametrize("args, limit, budget", [
    ([], 64, 8),                                    # the quick demo: 64 questions at K = 8
    (["--full"], None, 16),                         # all 320 at the protocol's budget
    (["--limit", "10"], 10, 16), (["--budget", "4"], None, 4),     # an option that sizes it: as given
    (["--task", "{tmp}/mine.jsonl"], None, None),                  # not the demo task
])
def test_open_demo_runs_the_quick_demo_unless_an_option_sizes_the_audit(tmp_path, monkeypatch, args, limit, budget):
    """What `reachtui open demo` audits: the quick demo by default (the same run as `reachtui audit demo --task
    demo --limit 64 --budget 8 --mlp-scan`), the whole task with --full, the options' sizes when given."""
    from reachtui.commands import open as O
    from reachtui.cli import cli

    made = {}
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))   # open's set_threads: no change
    monkeypatch.setattr(O, "make_audit_job", lambda path, task, protocol, **kw: made.update(protocol=protocol, **kw))
    monkeypatch.setattr(O, "_run_app", lambda *a, **kw: None)
    (tmp_path / "mine.jsonl").write_text('{"question": "1 + 1?", "answer": "2"}\n')
    args = [a.format(tmp=tmp_path) for a in args]
    out = CliRunner().invoke(cli, ["open", "demo", "--store", str(tmp_path / "s.sqlite"), *args])
    assert out.exit_code == 0, out.output
    assert made["limit"] == limit and made["mlp_scan"] == "sample"
    assert {p.budget for p in made["protocol"].probes} == {budget or 16}
    assert [p.name for p in made["protocol"].probes] == ["sample", "routes"]
