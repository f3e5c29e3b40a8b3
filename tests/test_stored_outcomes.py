"""A finished run stores the tables' one pass over its attempts (`outcomes`, `outcome_runs`): every table
reads it instead of making the pass again, gives exactly the numbers the pass gives, and stops reading it
the moment it no longer describes the attempts."""

from __future__ import annotations

import pytest

import reachtui.control as control
from fake_runner import FakeRunner, write_task
from reachtui.engine.audit import run_audit
from reachtui.engine.mlp import apply
from reachtui.intervention import Intervention
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tables import build_table, compare_runs
from reachtui.tasks import load_task

PROBES = (ProbeSpec("sample", budget=4), ProbeSpec("routes", budget=4), ProbeSpec("mcts", budget=3),
          ProbeSpec("mcts-blind", budget=3))
TABLES = ("summary", "questions", "passk", "hits")


@pytest.fixture
def audited(tmp_path):
    task = load_task(str(write_task(tmp_path / "t.jsonl", 16)))
    store = Store(tmp_path / "s.sqlite")
    runs = [run_audit(store, FakeRunner(), model_name="fake", task=task, protocol=Protocol(probes=PROBES, seed=s),
                      batch_size=5).run_id for s in (3, 4)]
    yield store, runs
    store.close()


def tables(store, runs) -> dict:
    out = {name: build_table(store, name, runs).rows for name in TABLES}
    out["compare"] = compare_runs(store, runs[0], runs[1], allow_unmatched=True).table.rows
    return out


@pytest.fixture
def no_pass(monkeypatch):
    """Making the pass fails: what builds now read the stored pass."""
    def refuse(*args, **kwargs):
        raise AssertionError("the pass was made again")

    monkeypatch.setattr(control, "_fold_groups", refuse)


def test_a_finished_audit_stores_its_pass_and_the_tables_read_it_to_the_same_numbers(audited):
    store, runs = audited
    seen = store.conn.execute("SELECT run_id, attempts, fold FROM outcome_runs ORDER BY run_id").fetchall()
    assert seen == [(r, 16 * (1 + 4 + 4 + 3 + 3), control.fold_key()) for r in runs]
    assert store.conn.execute("SELECT count(*) FROM outcomes").fetchone()[0] == 2 * 16 * 5
    stored = tables(store, runs)
    store.conn.execute("DELETE FROM outcome_runs")        # forget the pass: the tables make it themselves
    store.conn.commit()
    assert tables(store, runs) == stored


def test_tables_read_the_stored_pass_without_making_it(audited, no_pass):
    store, runs = audited
    assert {name: len(rows) for name, rows in tables(store, runs).items()} == {
        "summary": 8, "questions": 32, "passk": 28, "hits": 36, "compare": 4}


def test_an_exploration_keeps_the_stored_pass(audited, no_pass):
    store, runs = audited
    apply(store, FakeRunner(), runs[0], "sample", Intervention(None, frozenset({2})))
    assert build_table(store, "summary", runs[:1]).rows


def test_a_new_attempt_of_a_probe_the_pass_reads_makes_the_tables_make_it_again(audited, no_pass):
    store, runs = audited
    q = store.conn.execute("SELECT question_id FROM run_questions WHERE run_id = ? LIMIT 1", (runs[0],)).fetchone()[0]
    store.insert_attempts(runs[0], [{"question_id": q, "probe": "sample", "attempt": 99, "text": "x", "answer": "1",
                                     "correct": False}])
    with pytest.raises(AssertionError, match="made again"):
        build_table(store, "summary", runs[:1])
    build_table(store, "summary", runs[1:])          # the other run's pass still holds


@pytest.mark.parametrize("change", ["UPDATE attempts SET correct = 1 - correct WHERE id = {id}",
                                    "DELETE FROM attempts WHERE id = {id}"])
def test_a_changed_or_deleted_attempt_forgets_the_pass_and_the_tables_show_the_change(audited, change):
    store, runs = audited
    rid = runs[0]
    before = build_table(store, "summary", [rid]).rows
    one = store.conn.execute("SELECT id FROM attempts WHERE run_id = ? AND probe = 'realized' ORDER BY id LIMIT 1",
                             (rid,)).fetchone()[0]
    store.conn.execute(change.format(id=one))
    store.conn.commit()
    assert store.conn.execute("SELECT run_id FROM outcome_runs").fetchall() == [(runs[1],)]
    after = build_table(store, "summary", [rid]).rows
    assert after != before
    store.conn.execute("DELETE FROM outcome_runs")
    store.conn.commit()
    assert build_table(store, "summary", [rid]).rows == after


def test_a_pass_stored_under_other_definitions_is_not_read(audited, no_pass):
    store, runs = audited
    store.conn.execute("UPDATE outcome_runs SET fold = '0/old'")
    store.conn.commit()
    with pytest.raises(AssertionError, match="made again"):
        build_table(store, "summary", runs[:1])


def test_the_apps_rows_from_the_stored_pass_equal_those_from_the_attempts(audited, tmp_path):
    """The first paint of a finished run reads its question rows (realized, reachable and first hit per
    probe) from the stored pass; they are the rows the attempts give, an ungraded realized attempt included."""
    from reachtui.tui.data import AuditData

    store, runs = audited
    one = store.conn.execute("SELECT id FROM attempts WHERE run_id = ? AND probe = 'realized' ORDER BY id LIMIT 1",
                             (runs[1],)).fetchone()[0]
    store.conn.execute("UPDATE attempts SET correct = NULL WHERE id = ?", (one,))   # forgets run 2's pass
    store.conn.commit()
    from reachtui.engine.finish import write_stored_pass

    write_stored_pass(store, runs[1])
    data = AuditData(store.path)
    try:
        stored = {r: data.rows(data.run(r)) for r in runs}
        assert any(row.realized is None for row in stored[runs[1]])
        assert any(any(row.reach) for row in stored[runs[0]]) and any(any(row.first_hit) for row in stored[runs[0]])
    finally:
        data.close()
    store.conn.execute("DELETE FROM outcome_runs")
    store.conn.commit()
    data = AuditData(store.path)
    try:
        assert {r: data.rows(data.run(r)) for r in runs} == stored
    finally:
        data.close()
