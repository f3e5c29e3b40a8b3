"""The app's trace pane on the demo model (Pilot): select a failure-set question, show the pane, silence a
block: the pane shows where the outputs diverge, the top-5 under each and the logit lens along the route,
as `reachtui.engine.trace` computes them; `<` / `>` move the token; edits follow at once; at 80x24 the pane
takes the detail's place, not the table's rows; L sorts the failure set by the lens."""

from __future__ import annotations

import pytest
from conftest import settle
from trace_store import twelve_question_audit

from reachtui.assets import DEMO_MODEL_DIR

pytestmark = pytest.mark.skipif(not (DEMO_MODEL_DIR / "config.json").is_file(), reason="no demo model in assets/")


@pytest.fixture(scope="module")
def runner():
    import torch

    from reachtui.model.load import load_model
    from reachtui.model.run import Runner

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield Runner(load_model("demo", device="cpu"))
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def stored(tmp_path_factory, runner):
    path, _, protocol, _ = twelve_question_audit(tmp_path_factory.mktemp("tui-trace"), runner)
    return path, protocol


def text(app, wid: str) -> str:
    return str(app.screen.query_one(wid).render())


async def _select(app, pilot, qid: str) -> None:
    await pilot.press("f")
    rows = [r.qid for r in app.table.rows]
    assert qid in rows, rows
    for _ in range(rows.index(qid)):
        await pilot.press("j")


async def test_pane_shows_divergence_top_k_and_lens_of_a_failure_set_question(stored, runner):
    from reachtui.engine.trace import trace_question
    from reachtui.intervention import Intervention
    from reachtui.tui.app import ReachApp

    path, protocol = stored
    app = ReachApp(path)
    app.runner = runner
    async with app.run_test(size=(150, 42)) as pilot:
        await _select(app, pilot, "demo-0026")
        await pilot.press("t")
        await settle(app, pilot, 0.1)
        t = app.last_trace
        assert t.qid == "demo-0026" and t.edited is None and t.position == t.gold_position == 23
        assert "trace demo-0026  no edit: the default output  gold 14" in text(app, "#trace-title")
        assert not app.screen.query_one("#detail").display and not app.screen.query_one("#live").display
        for _ in range(4):
            await pilot.press("right_square_bracket")
        await pilot.press("m")                      # silence MLP 4: the pane follows at once, no enter
        await settle(app, pilot, 0.1)
        t = app.last_trace
        want = trace_question(runner, protocol, {"qid": "demo-0026", **_q(path, "demo-0026")},
                              Intervention(None, frozenset({4})))
        assert (t.edited.intervention, t.divergence, t.position) == ("silence MLP 4", want.divergence, 11)
        assert [(a.output, a.chosen.text, [x.id for x in a.top], a.gold_rank) for a in t.at] == [
            (a.output, a.chosen.text, [x.id for x in a.top], a.gold_rank) for a in want.at]
        title, body = text(app, "#trace-title"), text(app, "#trace-body")
        assert "silence MLP 4" in title and "diverges at token 11" in title
        lines = body.splitlines()
        assert lines[0].split() == ["layer", "0", "1", "2", "3", "4", "5", "6", "7"]      # the edited route's lens
        assert lines[1].split()[-1] == "-"                       # its top token at the last position: its choice
        ranks = {line.split()[0]: line.split()[2:] for line in lines[2:5]}
        edited = next(a for a in want.at if a.output == "edited")
        assert ranks["-"] == [f"[{r.ranks[1]}]" if r.ranks[1] <= 5 else str(r.ranks[1]) for r in edited.lens]
        assert any(line.startswith("default '+' 0.61  gold '1' rank 58") for line in lines)
        assert any(line.startswith("edited  '-' 0.50  gold '1' rank 55") for line in lines)
        assert "token probability: █ p≥0.9" in body
        await pilot.press("enter")                  # the pane is the live result: enter reads it again, no run
        await settle(app, pilot)
        assert app.last_live is None and app.last_trace.edited.intervention == "silence MLP 4"
        await pilot.press("greater_than_sign")
        await settle(app, pilot)
        assert app.last_trace.position == 12 and "token 12 of 26" in text(app, "#trace-title")
        await pilot.press("less_than_sign", "less_than_sign")
        await settle(app, pilot)
        assert app.last_trace.position == 10       # the second press, made while the first move ran, is kept
        await pilot.press("m", "m", "m")          # off, on, off: the newest request wins
        await settle(app, pilot, 0.1)
        assert app.last_trace.edited is None and "no edit" in text(app, "#trace-title")
        await pilot.press("t")
        assert app.screen.query_one("#detail").display and not app.screen.query_one("#trace").display


def _q(path, qid: str) -> dict:
    from reachtui.store import Store

    with Store(path, readonly=True) as s:
        _, question, gold = s.run_question(s.resolve_run(None), qid)
    return dict(question=question, gold=gold)


async def test_at_80x24_the_pane_takes_the_detail_s_place(stored, runner):
    from reachtui.tui.app import ReachApp

    path, _ = stored
    app = ReachApp(path)
    app.runner = runner
    async with app.run_test(size=(80, 24)) as pilot:
        await _select(app, pilot, "demo-0026")
        before = (app.table.size.height, app.screen.query_one("#right").size.height)
        await pilot.press("t")
        await settle(app, pilot, 0.1)
        assert (app.table.size.height, app.screen.query_one("#right").size.height) == before
        assert app.screen.query_one("#trace").size.height >= 5
        assert text(app, "#trace-title").startswith("trace demo-0026")


async def test_lens_sort_orders_the_failure_set_as_export_lens(stored, runner):
    from reachtui.engine.trace import lens_rows
    from reachtui.store import Store
    from reachtui.tables.lens import lens_order
    from reachtui.tui.app import ReachApp

    path, protocol = stored
    app = ReachApp(path)
    app.runner = runner
    async with app.run_test(size=(150, 42)) as pilot:
        await pilot.press("f")
        members = [r.qid for r in app.table.rows]
        await pilot.press("L")
        await settle(app, pilot, 0.1)
        with Store(path, readonly=True) as s:
            run_id = s.resolve_run(None)
            questions = [dict(qid=q, **_q(path, q)) for q in members]
        want = lens_order(lens_rows(runner, protocol, questions))
        assert [r.qid for r in app.table.rows] == want and sorted(want) == sorted(members)
        assert "sorted by the logit lens (L)" in text(app, "#status")
        assert app.lens_sorts[(run_id, "sample")]
