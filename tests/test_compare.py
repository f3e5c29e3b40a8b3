"""`reachtui compare`: deltas, question-level transitions and McNemar p-values on hand-built runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from tables_fixtures import add_run, make_task

from reachtui import tables as T
from reachtui.cli import cli
from reachtui.store import Store

# Hand-built transitions over the 20 questions q000..q019 both runs have (A = run 1, B = run 2):
REALIZED = {"kept": range(0, 3), "lost": [3], "gained": range(4, 11), "never": range(11, 20)}
ROUTES = {"kept": range(0, 10), "lost": range(10, 15), "gained": [15], "never": range(16, 20)}
SAMPLE = {"kept": range(0, 12), "lost": [], "gained": [12, 13], "never": range(14, 20)}


def _side(cells, in_a: bool) -> set[int]:
    """The questions that count as in (realized/reachable) in run A, or in run B."""
    return {i for c in (("kept", "lost") if in_a else ("kept", "gained")) for i in cells[c]}


def _run_data(task, which: str, questions, extra_probe=None):
    real = _side(REALIZED, which == "a")
    routes = _side(ROUTES, which == "a")
    sample = _side(SAMPLE, which == "a")
    data = {}
    for i in questions:
        q = task.questions[i]
        gold = q.answer
        per = {"realized": [(i in real, gold if i in real else "-1", -0.5)],
               # the hit (if any) at attempt i % 4, so first hits differ
               "routes": [(i in routes and j == i % 4, gold if (i in routes and j == i % 4) else "-1", -1.0)
                          for j in range(4)],
               "sample": [(i in sample and j == 3, gold if (i in sample and j == 3) else "-2", -1.0)
                          for j in range(4)]}
        if extra_probe:
            per[extra_probe] = [(True, gold, -0.1)]
        data[q.id] = per
    return data


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("compare") / "audit.sqlite"
    task = make_task("arith", 22)
    with Store(path) as store:
        # A has q000..q020, B has q000..q019 and q021: they share q000..q019.
        add_run(store, "base", task, "proto1", _run_data(task, "a", list(range(21))))
        add_run(store, "trained", task, "proto1", _run_data(task, "b", list(range(20)) + [21], "mcts"))
        add_run(store, "other", task, "proto2", _run_data(task, "b", list(range(20))))
    return path


def _json(store_path, *args):
    res = CliRunner().invoke(cli, ["compare", *args, "--store", str(store_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


def test_deltas_transitions_and_p_values(store_path):
    res = _json(store_path, "1", "2", "--format", "json")
    rows = {r["probe"]: r for r in json.loads(res.stdout)}
    assert set(rows) == {"sample", "routes"}  # mcts is only in run 2
    assert "probe(s) only in run 2, not compared: mcts" in res.stderr
    assert "compared on the 20 question(s) both runs have (run 1: 21, run 2: 21)" in res.stderr
    for probe, cells, a, b in (("routes", ROUTES, 0.75, 0.55), ("sample", SAMPLE, 0.60, 0.70)):
        r = rows[probe]
        assert r["n"] == 20 and r["matched"] is True
        assert r["realized_a"] == pytest.approx(0.20) and r["realized_b"] == pytest.approx(0.50)
        assert r["realized_delta"] == pytest.approx(0.30)
        assert [r[f"realized_{c}"] for c in T.CELLS] == [7, 1, 3, 9]
        assert r["realized_p"] == pytest.approx(2 * (1 + 8) / 2**8)  # gained 7, lost 1: 0.0703125
        assert r["reachable_a"] == pytest.approx(a) and r["reachable_b"] == pytest.approx(b)
        assert r["reachable_delta"] == pytest.approx(b - a)
        assert [r[f"reachable_{c}"] for c in T.CELLS] == [len(list(cells[c])) for c in T.CELLS]
    assert rows["routes"]["reachable_p"] == pytest.approx(14 / 64)  # gained 1, lost 5
    assert rows["sample"]["reachable_p"] == pytest.approx(0.5)  # gained 2, lost 0


def test_terminal_output_shows_signed_deltas_and_transitions(store_path):
    out = _json(store_path, "1", "2").stdout
    assert "+30.0" in out and "-20.0" in out and "+10.0" in out
    assert "reachable routes" in out and "0.0703" in out and "0.219" in out


def test_list_prints_question_ids_of_a_cell(store_path):
    out = _json(store_path, "1", "2", "--list", "routes:lost").stdout
    assert out.split() == [f"q{i:03d}" for i in ROUTES["lost"]]
    out = _json(store_path, "1", "2", "--list", "realized:gained").stdout
    assert out.split() == [f"q{i:03d}" for i in REALIZED["gained"]]
    out = _json(store_path, "1", "2", "--list", "reachable:gained").stdout
    assert out.splitlines() == [f"sample\tq{i:03d}" for i in SAMPLE["gained"]] + \
        [f"routes\tq{i:03d}" for i in ROUTES["gained"]]
    recs = json.loads(_json(store_path, "1", "2", "--list", "reachable:lost", "--format", "json").stdout)
    assert {(r["probe"], r["question_id"]) for r in recs} == {("routes", f"q{i:03d}") for i in ROUTES["lost"]}


def _main(*args):
    return subprocess.run([sys.executable, "-m", "reachtui", *args], capture_output=True, text=True)


def test_unmatched_protocols_are_refused_with_one_line(store_path):
    out = _main("compare", "1", "3", "--store", str(store_path))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "different protocols (proto1 vs proto2)" in out.stderr
    assert "--allow-unmatched" in out.stderr


def test_allow_unmatched_marks_every_output(store_path):
    out = _main("compare", "1", "3", "--store", str(store_path), "--allow-unmatched", "--format", "json")
    assert out.returncode == 0
    assert "WARNING: UNMATCHED PROTOCOLS" in out.stderr
    assert all(r["matched"] is False for r in json.loads(out.stdout))
    for fmt, mark in (("md", "**WARNING: UNMATCHED PROTOCOLS"), ("latex", r"\textbf{WARNING: UNMATCHED PROTOCOLS"),
                      ("table", "WARNING: UNMATCHED PROTOCOLS")):
        out = _main("compare", "1", "3", "--store", str(store_path), "--allow-unmatched", "--format", fmt)
        assert out.returncode == 0
        assert out.stdout.count(mark) == 3, fmt  # every table (scores, transitions, categories) is marked
    out = _main("compare", "1", "3", "--store", str(store_path), "--allow-unmatched", "--list", "routes:kept")
    assert "WARNING: UNMATCHED PROTOCOLS" in out.stderr


def test_bad_list_and_runs_are_one_line(store_path):
    for args, msg in ((["1", "2", "--list", "routes"], "MEASURE:CELL"),
                      (["1", "2", "--list", "routes:sideways"], "unknown transition"),
                      (["1", "2", "--list", "mcts:lost"], "not in both runs"),
                      (["1", "7"], "no run 7")):
        out = _main("compare", *args, "--store", str(store_path))
        assert out.returncode == 2 and msg in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_compare_table_via_export_equals_compare(store_path):
    res = CliRunner().invoke(cli, ["export", "compare", "--run", "1", "--run", "2", "--json", "--store",
                                   str(store_path)])
    assert res.exit_code == 0
    assert json.loads(res.stdout) == json.loads(_json(store_path, "1", "2", "--format", "json").stdout)


def test_a_run_against_itself_changes_nothing(store_path):
    rows = json.loads(_json(store_path, "2", "2", "--format", "json").stdout)
    for r in rows:
        assert r["realized_delta"] == 0 and r["reachable_delta"] == 0
        assert r["realized_gained"] == r["realized_lost"] == r["reachable_gained"] == r["reachable_lost"] == 0
        assert r["realized_p"] == 1.0 and r["reachable_p"] == 1.0


def test_categories_and_the_questions_table(store_path):
    """Reach transitions under their names in the literature (preserved, expanded, shrunk, out-of-reach):
    the categories view, `--list PROBE:CATEGORY`, and one row per question with both runs' status."""
    from reachtui import tables as T
    from reachtui.store import Store

    with Store(store_path, readonly=True) as store:
        comparison = T.compare_runs(store, 1, 2)
    scores, trans, cats = T.compare_views(comparison)
    row = dict(zip(cats.column_names, next(r for r in cats.rows if r[0] == "routes")))
    cell = comparison.cells[("reachable", "routes")]
    assert (row["preserved"], row["expanded"], row["shrunk"], row["out-of-reach"]) == (
        len(cell["kept"]), len(cell["gained"]), len(cell["lost"]), len(cell["never"]))
    assert comparison.list_table("routes:shrunk").rows == comparison.list_table("routes:lost").rows
    qs = comparison.questions_table().dicts()
    assert [r["question_id"] for r in qs] == list(comparison.status)
    for r in qs:
        expected = T.compare.CATEGORIES[next(c for c, ids in cell.items() if r["question_id"] in ids)]
        assert r["category_routes"] == expected
        assert r["reachable_routes_a"] == (expected in ("preserved", "shrunk"))
    ids = _json(store_path, "1", "2", "--list", "routes:expanded").stdout.split()
    assert ids == cell["gained"]
