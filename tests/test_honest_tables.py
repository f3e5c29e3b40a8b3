"""Tables that only say what they know, each checked on a small store: no log-prob selection without
log-probs, no reachability in a realized-only run, no interval for an unbounded retained ratio, one minus sign
in LaTeX (and its table environment), the MLP scan's two best blocks said and chosen as the note says."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from reachtui import tables as T
from reachtui.store import Store
from reachtui.tables.formats import render
from reachtui.tables.mlp import mlp_lines
from reachtui.tables.table import select
from tables_fixtures import add_run, make_task


def _runs(tmp_path):
    task = make_task("honest", 20)
    with Store(tmp_path / "h.sqlite") as store:
        # no log-probs anywhere (an import of generations without them)
        data = {q.id: {"realized": [(i % 2 == 0, q.answer if i % 2 == 0 else "1", None)],
                       "sample": [(i % 3 == 0, q.answer if i % 3 == 0 else "1", None), (False, "2", None)]}
                for i, q in enumerate(task.questions)}
        no_lp = add_run(store, "no-logprobs", task, "p1", data)
        only = add_run(store, "realized-only", task, "p2",
                       {q.id: {"realized": [(i < 5, q.answer if i < 5 else "1", -0.5)]}
                        for i, q in enumerate(task.questions)})
        # a gap of one question in twenty: its interval holds 0, so retained is unbounded
        narrow = add_run(store, "narrow", task, "p3",
                         {q.id: {"realized": [(False, "1", -1.0)],
                                 "routes": [(i == 0, q.answer if i == 0 else "2", -0.5), (False, "3", -0.1)]}
                          for i, q in enumerate(task.questions)})
    return tmp_path / "h.sqlite", no_lp, only, narrow


def test_no_logprob_selection_without_logprobs(tmp_path):
    path, no_lp, _only, _narrow = _runs(tmp_path)
    with Store(path, readonly=True) as store:
        (row,) = T.summary_table(store, [no_lp]).dicts()
    assert row["blind_vote"] == pytest.approx(7 / 20)           # the vote needs no log-probs
    assert math.isnan(row["blind_logprob"]) and math.isnan(row["retained_logprob"])
    md = render(select(T.summary_table(Store(path, readonly=True), [no_lp]),
                       columns=["probe", "blind_vote", "blind_logprob", "retained_logprob"]), "md")
    assert md.splitlines()[2] == "| sample | 35.0 | – | – |"


def test_a_realized_only_run_shows_no_reachability(tmp_path):
    path, _no_lp, only, _narrow = _runs(tmp_path)
    with Store(path, readonly=True) as store:
        (row,) = T.summary_table(store, [only]).dicts()
    assert row["probe"] == "realized" and row["realized"] == pytest.approx(0.25)
    for key in ("reachable", "reachable_lo", "excess", "excess_lo", "excess_hi", "gap", "robust", "blind_vote",
                "retained"):
        assert math.isnan(row[key]), key
    assert row["failure_set_size"] is None
    with Store(path, readonly=True) as store:
        assert all("reachable" not in line and "excess" not in line for line in T.closing_lines(store, only))


def test_an_unbounded_retained_ratio_has_no_interval_anywhere(tmp_path):
    """A positive gap whose interval holds 0: retained is said (the gap is a gain), its interval is not (the
    replicates' ratio is unbounded), and the notes say why."""
    path, _no_lp, _only, narrow = _runs(tmp_path)
    with Store(path, readonly=True) as store:
        table = T.summary_table(store, [narrow])
        closing, lines = T.closing(store, narrow)
    (row,) = table.dicts()
    assert row["gap"] == pytest.approx(0.05) and row["gap_lo"] <= 0 <= row["gap_hi"]
    assert row["retained"] == 0.0 and row["retained_logprob"] == 0.0     # both picks miss the one hit
    assert all(math.isnan(row[k]) for k in ("retained_lo", "retained_hi", "retained_logprob_lo",
                                            "retained_logprob_hi"))
    why = "routes: retained has no interval because the gap's interval holds 0 (the ratio is unbounded)"
    assert why in table.notes and why in closing.notes and why in lines
    (routes,) = [r for r in closing.dicts() if r["probe"] == "routes"]
    assert routes["retained"] == 0.0


def test_latex_writes_one_minus_sign_and_a_table_environment(tmp_path):
    path, _no_lp, _only, narrow = _runs(tmp_path)
    with Store(path, readonly=True) as store:
        table = select(T.summary_table(store, [narrow]), columns=["probe", "gap", "gap_lo", "gap_hi", "excess",
                                                                  "excess_lo", "excess_hi"])
    plain = render(table, "latex")
    row = next(line for line in plain.splitlines() if line.startswith("routes"))
    assert "$-$" in row and "-" not in row.replace("$-$", "").replace("--", "")   # values and intervals alike
    wrapped = render(table, "latex", caption="Narrow gap", label="tab:narrow", inline_ci=True)
    lines = wrapped.splitlines()
    assert lines[lines.index("\\begin{table}[t]") + 2:][:2] == ["\\caption{Narrow gap}", "\\label{tab:narrow}"]
    assert lines[-1] == "\\end{table}" and lines[-2] == "\\end{tabular}"
    row = next(line for line in lines if line.startswith("routes"))
    assert row.split(" & ")[1].startswith("+5.0 [")                      # the interval beside its value
    out = subprocess.run([sys.executable, "-m", "reachtui", "export", "summary", "--store", str(path), "--run",
                          str(narrow), "--format", "latex", "--caption", "Narrow gap", "--label", "tab:narrow",
                          "--ci", "inline", "--columns", "probe,gap,gap_lo,gap_hi,excess,excess_lo,excess_hi"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == wrapped


def test_the_mlp_scan_says_how_its_best_blocks_are_chosen(tmp_path):
    task = make_task("scan", 4)
    with Store(tmp_path / "m.sqlite") as store:
        run = add_run(store, "m", task, "p", {q.id: {"realized": [(i < 2, q.answer if i < 2 else "1", -1.0)],
                                                     "sample": [(True, q.answer, -1.0)]}
                                              for i, q in enumerate(task.questions)})
        fs = store.get_failure_set(run, "failure:sample")
        empty = store.create_failure_set(run, "failure:empty", None, [])
        rows = [dict(set_id=fs["id"], layer=L, failure_n=2, repaired=r, realized_n=2, broken=b)
                for L, (r, b) in enumerate([(2, 2), (1, 0), (0, 0)])]
        rows += [dict(set_id=empty, layer=L, failure_n=0, repaired=0, realized_n=2, broken=L % 2) for L in range(3)]
        store.write_mlp_scan(run, rows)
        table = T.mlp_scan_table(store, [run])
        lines = mlp_lines(store, run)
    got = {(r["set"], r["layer"]): r for r in table.dicts()}
    assert got[("failure:sample", 0)]["best"] and not got[("failure:sample", 0)]["best_net"]
    assert got[("failure:sample", 1)]["best_net"] and got[("failure:sample", 1)]["net"] == 1
    assert not any(r["best"] or r["best_net"] for (s, _L), r in got.items() if s == "failure:empty")
    assert any("highest repair rate" in n and "repaired − broken" in n for n in table.notes)
    assert lines == [
        "MLP scan on failure:sample (|F| = 2, |R| = 2): most repairs = layer 0: repairs 2/2 (100.0%), breaks 2/2 "
        "(100.0%); best net (repaired − broken) = layer 1: +1 (1 repaired, 0 broken)",
        "MLP scan on failure:empty: the failure set is empty (|R| = 2): no best block"]


def test_a_realized_only_audit_finishes_its_failure_set_bar():
    """No probe, no failure set to freeze: the bar says so and is complete (not 0/1 forever)."""
    import io

    from rich.console import Console

    from reachtui.commands.audit import _Bar
    from reachtui.engine.progress import FAILURE_SETS, Progress

    console = Console(file=io.StringIO(), width=120, color_system=None, force_terminal=False)
    with _Bar(console) as bar:
        bar(Progress(1, FAILURE_SETS, 0, 0))
        task = bar.progress.tasks[0]
        assert task.finished and task.fields["info"] == "nothing to freeze (no probe)"


def test_the_progress_bar_labels_its_times_and_shows_the_rate_of_attempts():
    """Each phase's line: done/total, "elapsed" and "left" before their clocks, and the attempts generated
    per second since the phase began in this session (stored attempts of a resumed run are not counted)."""
    import io

    from rich.console import Console

    from reachtui.commands import audit as A
    from reachtui.engine.progress import Progress, attempts_rate

    clock = iter([100.0, 100.0, 104.0])          # the phase starts at 100 s; its second update comes 4 s later
    out = io.StringIO()
    console = Console(file=out, width=160, color_system=None, force_terminal=False)
    with A._Bar(console, clock=lambda: next(clock)) as bar:
        bar(Progress(1, "sample", 32, 128, generated=0))           # resumed: 32 stored, none generated yet
        assert bar.progress.tasks[0].fields["rate"] == ""
        bar(Progress(1, "sample", 82, 128, generated=50, correct=9))
    line = out.getvalue().splitlines()[-1]
    assert "82/128 elapsed " in line and " left " in line and line.endswith(" 12.5 attempts/s 9 ok")
    assert attempts_rate(0, 3.0) == "" and attempts_rate(1234, 2.0) == "617 attempts/s"
    for width in (80, 100):             # at 80 columns the bar gives way: no column is cut
        out = io.StringIO()
        ticks = iter([0.0, 1680.0])
        with A._Bar(Console(file=out, width=width, color_system=None), clock=lambda: next(ticks)) as bar:
            bar(Progress(1, "sample", 20480, 20480, generated=20480, correct=6547))
        line = out.getvalue().splitlines()[-1].rstrip()
        assert line.endswith(" 12.2 attempts/s 6547 ok") and "20480/20480 elapsed " in line and " left " in line and "…" not in line and len(line) <= width
        assert ("━" in line) == (width == 100)
