"""The audit store: schema, opening rules, atomic idempotent writes, and the queries the app reads."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from conftest import Q, T

from reachtui.errors import ReachError
from reachtui.store import Store, default_store_path
from reachtui.store.schema import SCHEMA_VERSION
from reachtui.store.queries import fts_query
import reference  # noqa: E402




TASK = T("toy", "/tmp/toy.jsonl", "a" * 64, (
    Q("t-0", "Tom has 3 apples and buys 4 more. How many apples?", "7"),
    Q("t-1", "A train travels 60 km in 1 hour. How far in 3 hours?", "180"),
    Q("t-2", "What is 12 plus 7 minus 5?", "14"),
    Q("t-3", "Sara reads 5 pages a day for 6 days. How many pages?", "30"),
))

# Hand-made outcomes: question index -> probe -> correctness of attempts 0, 1, 2, ...
OUTCOMES = {
    0: {"realized": [1], "sample": [1, 0, 1, 1], "routes": [0, 0, 0]},
    1: {"realized": [0], "sample": [0, 0, 1, 0], "routes": [0, 1, 1]},   # failure under sample & routes
    2: {"realized": [0], "sample": [0, 0, 0, 0], "routes": [0, 0, 1]},   # failure under routes only
    3: {"realized": [0], "sample": [0, 0, 0, 0], "routes": [0, 0, 0]},   # unreachable
}


def rows_for(qids: list[int]) -> list[dict]:
    rows = []
    for i, outcomes in OUTCOMES.items():
        for probe, corrects in outcomes.items():
            for j, c in enumerate(corrects):
                rows.append({"question_id": qids[i], "probe": probe, "attempt": j, "correct": bool(c),
                             "text": f"{probe} says q{i} a{j} #### {7 if c else 0}", "answer": "7" if c else "0",
                             "rule": "hash", "route": "0-3,3,5-7" if probe == "routes" else None})
    return rows


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "s" / "audit.sqlite") as s:
        yield s


@pytest.fixture
def run(store):
    model_id = store.upsert_model("toy-model", "/models/toy", "LlamaForCausalLM", 8)
    task_id = store.upsert_task(TASK)
    qids = list(store.task_question_ids(task_id).values())
    run_id = store.create_run(model_id, task_id, protocol_json={"seed": 0}, protocol_hash="abc123",
                              question_ids=qids)
    return run_id, qids


# -- schema and opening ----------------------------------------------------------------------------

def test_schema_has_real_foreign_keys_wal_and_a_version(store):
    fks = {(r[2], r[3]) for r in store.db.execute("PRAGMA foreign_key_list(attempts)")}
    assert fks == {("runs", "run_id"), ("questions", "question_id")}
    for table, parents in {"questions": {"tasks"}, "runs": {"models", "tasks"},
                           "run_questions": {"runs", "questions"}, "failure_sets": {"runs"},
                           "failure_set_members": {"failure_sets", "questions"},
                           "mlp_scan": {"runs", "failure_sets"}, "explorations": {"runs"}}.items():
        assert {r[2] for r in store.db.execute(f"PRAGMA foreign_key_list({table})")} == parents, table
    assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert store.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == \
        str(SCHEMA_VERSION)
    assert store.db["questions"].detect_fts() == "questions_fts"
    assert store.db["attempts"].detect_fts() == "attempts_fts"


def test_the_shape_a_store_is_checked_against_is_what_the_migrations_make(store):
    """`reachtui.store.schema.SHAPE` is written by hand beside the migrations: a new store holds exactly its tables,
    columns and triggers (nothing missing that a check would then call damage, nothing it does not know)."""
    from reachtui.store.schema import shape_of

    tables, triggers = shape_of(SCHEMA_VERSION)
    conn = store.conn
    names = {n: sql for n, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name "
                                               "NOT LIKE 'sqlite_%'")}
    assert set(names) == set(tables)
    for name, sql in names.items():
        if not sql.startswith("CREATE VIRTUAL TABLE"):
            assert {r[1] for r in conn.execute(f"PRAGMA table_info([{name}])")} == tables[name], name
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")} == triggers


def test_foreign_keys_are_enforced(store):
    with pytest.raises(sqlite3.IntegrityError):
        store.insert_attempts(999, [{"question_id": 1, "probe": "realized", "attempt": 0}])


def test_reopening_is_idempotent_and_keeps_data(tmp_path, run):
    path = tmp_path / "s" / "audit.sqlite"
    for _ in range(2):
        with Store(path) as again:
            assert [r["id"] for r in again.list_runs()] == [run[0]]
            assert again.db.execute("SELECT count(*) FROM meta WHERE key = 'schema_version'").fetchone()[0] == 1


def rewrite_as_version(path, version: int, fill=None) -> None:
    """Replace the store at `path` by one of schema `version` holding the same rows: the schema the real
    migrations 1..version make (columns later versions dropped are filled by `fill(table, column, row)`,
    else NULL), the rows copied column by column, the FTS filled by the old triggers."""
    from sqlite_utils import Database

    from reachtui.store.schema import MIGRATIONS

    old = path.with_name("old.sqlite")
    conn = sqlite3.connect(old)
    db = Database(conn)
    for v in range(1, version + 1):
        MIGRATIONS[v](db)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(version),))
    conn.execute("ATTACH DATABASE ? AS new", (str(path),))
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE "
                                         "'%VIRTUAL%' AND name NOT LIKE '%fts%' AND name != 'meta' ORDER BY rowid")]
    for table in tables:
        mine = [r[1] for r in conn.execute(f"PRAGMA main.table_info({table})")]
        theirs = {r[1] for r in conn.execute(f"PRAGMA new.table_info({table})")}
        for row in conn.execute(f"SELECT * FROM new.{table}").fetchall():
            got = dict(zip([r[1] for r in conn.execute(f"PRAGMA new.table_info({table})")], row))
            values = {c: got[c] if c in theirs else (fill(table, c, got) if fill else None) for c in mine}
            values = {c: v for c, v in values.items() if c in theirs or v is not None}   # else its default
            conn.execute(f"INSERT INTO main.{table} ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                         list(values.values()))
    conn.commit()
    conn.execute("DETACH DATABASE new")
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    old.rename(path)


def test_a_version_1_store_is_migrated_keeping_its_runs(tmp_path, run):
    """Stores written before run events existed: opened for writing, they gain runs.batch_size and
    run_events; their runs and attempts stay; a reader asks for one writable open first."""
    path = tmp_path / "s" / "audit.sqlite"
    with Store(path) as s:
        s.insert_attempts(run[0], rows_for(run[1]))
    rewrite_as_version(path, 1)
    assert "schema version 1" in _one_line_error(lambda: Store(path, readonly=True))
    with Store(path) as migrated:
        assert [r["id"] for r in migrated.list_runs()] == [run[0]]
        assert migrated.get_run(run[0])["batch_size"] is None
        assert migrated.conn.execute("SELECT count(*) FROM attempts").fetchone()[0] == len(rows_for(run[1]))
        migrated.set_run_batch_size(run[0], 32)
        migrated.add_run_event(run[0], "out_of_memory", "batch 32 -> 16")
    with Store(path, readonly=True) as ro:
        assert ro.get_run(run[0])["batch_size"] == 32
        assert [(e["kind"], e["detail"]) for e in ro.run_events(run[0])] == [("out_of_memory", "batch 32 -> 16")]


@pytest.mark.parametrize("version", [2, 3])
def test_an_older_store_is_read_as_it_is_and_migrated_by_a_writer(tmp_path, run, version):
    """Version 3 adds the covering index attempts_by_answer; version 4 drops the per-attempt columns the
    protocol gives (temperature, seed) or nobody reads (created_at) and the index attempts_by_probe. A reader
    reads a version-2 or -3 store as it is (the same tables, the same recomputed temperatures and seeds); a
    writer migrates it: the columns go, every attempt and its full-text search stay, new attempts go in."""
    from reachtui.tables import build_table

    path = tmp_path / "s" / "audit.sqlite"
    with Store(path) as s:
        s.insert_attempts(run[0], rows_for(run[1]))
    with Store(path, readonly=True) as ro:
        want = {name: build_table(ro, name, [run[0]]).rows for name in ("summary", "questions", "attempts")}
        kept = ro.conn.execute("SELECT * FROM attempts ORDER BY id").fetchall()
        seeds = {(r[1], r[2], r[3]): r[7] for r in want["attempts"]}   # (question, probe, attempt) -> seed
    with sqlite3.connect(path) as c:
        qid_of = dict(c.execute("SELECT id, qid FROM questions").fetchall())

    def fill(table, column, row):   # what the engine used to store in the dropped columns
        if table == "attempts" and column == "temperature":
            return 1.0 if row["probe"] == "sample" else 0.0
        if table == "attempts" and column == "seed":
            return seeds[qid_of[row["question_id"]], row["probe"], row["attempt"]]
        return None

    rewrite_as_version(path, version, fill)
    columns = "SELECT name FROM pragma_table_info('attempts')"
    indexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'attempts_by_%' ORDER BY name"
    with Store(path, readonly=True) as ro:
        assert {"temperature", "seed", "created_at"} <= {r[0] for r in ro.conn.execute(columns)}
        assert [r[0] for r in ro.conn.execute(indexes)] == (
            ["attempts_by_probe"] if version == 2 else ["attempts_by_answer", "attempts_by_probe"])
        assert {name: build_table(ro, name, [run[0]]).rows for name in want} == want
        stored = ro.conn.execute("SELECT temperature, seed FROM attempts ORDER BY id").fetchall()
        assert any(seed is not None for _t, seed in stored)
    with Store(path) as migrated:
        assert {"temperature", "seed", "created_at"} & {r[0] for r in migrated.conn.execute(columns)} == set()
        assert [r[0] for r in migrated.conn.execute(indexes)] == ["attempts_by_answer"]
        assert migrated.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == \
            str(SCHEMA_VERSION)
        assert [r[:7] for r in migrated.conn.execute("SELECT * FROM attempts ORDER BY id")] == [r[:7] for r in kept]
        assert {name: build_table(migrated, name, [run[0]]).rows for name in want} == want
        assert migrated.search(run[0], "q1") == [run[1][1]]
        migrated.insert_attempts(run[0], [{"question_id": run[1][0], "probe": "sample", "attempt": 9,
                                           "text": "late #### 7", "answer": "7", "correct": True}])
        assert migrated.search(run[0], "late") == [run[1][0]]


def test_a_version_4_store_is_read_as_it_is_and_a_writer_gives_run_ids_autoincrement(tmp_path, run):
    """Version 5 rebuilds the runs table with AUTOINCREMENT: every run, id and child row stays, foreign keys
    hold, and an id is never given again (not even the last one, after its run is deleted)."""
    path = tmp_path / "s" / "audit.sqlite"
    with Store(path) as s:
        s.insert_attempts(run[0], rows_for(run[1]))
        s.add_run_event(run[0], "batch_size", "8")
        second = s.create_run(1, 1, protocol_json={"seed": 1}, protocol_hash="def456", question_ids=run[1])
    rewrite_as_version(path, 4)
    runs_sql = "SELECT sql FROM sqlite_master WHERE name = 'runs'"
    with Store(path, readonly=True) as ro:
        assert "AUTOINCREMENT" not in ro.conn.execute(runs_sql).fetchone()[0]
        assert ro.run_ids() == [run[0], second]
        want = ro.conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
    with Store(path) as migrated:
        assert "AUTOINCREMENT" in migrated.conn.execute(runs_sql).fetchone()[0]
        assert migrated.conn.execute("SELECT * FROM runs ORDER BY id").fetchall() == want
        assert migrated.conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert migrated.conn.execute("SELECT count(*) FROM attempts WHERE run_id = ?", (run[0],)).fetchone()[0] == \
            len(rows_for(run[1]))
        assert [e["detail"] for e in migrated.run_events(run[0])] == ["8"]
        migrated.conn.execute("DELETE FROM runs WHERE id = ?", (second,))     # its children go with it
        migrated.conn.commit()
        third = migrated.create_run(1, 1, protocol_json={"seed": 2}, protocol_hash="0a0a0a", question_ids=run[1])
        assert third == second + 1
        assert migrated.conn.execute("SELECT count(*) FROM run_questions WHERE run_id = ?", (third,)).fetchone()[0] \
            == len(run[1])


def test_default_store_path(monkeypatch, tmp_path):
    monkeypatch.delenv("REACHTUI_STORE", raising=False)
    assert str(default_store_path()) == "store/reachtui.sqlite"
    monkeypatch.setenv("REACHTUI_STORE", str(tmp_path / "x.sqlite"))
    assert default_store_path() == tmp_path / "x.sqlite"


def _one_line_error(fn) -> str:
    with pytest.raises(ReachError) as info:
        fn()
    message = str(info.value)
    assert "\n" not in message and message
    return message


def test_readonly_open_of_a_missing_file_fails_in_one_line(tmp_path):
    path = tmp_path / "nope" / "audit.sqlite"
    assert "no audit store at" in _one_line_error(lambda: Store(path, readonly=True))
    assert not path.parent.exists()  # a reader never creates anything


def test_a_file_that_is_not_sqlite_fails_in_one_line(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("hello, I am a text file with enough bytes to have a header\n")
    for readonly in (True, False):
        assert "not a reachtui store" in _one_line_error(lambda: Store(path, readonly=readonly))
    assert path.read_text().startswith("hello")


def test_an_sqlite_file_of_another_app_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE things (x)")
    conn.close()
    for readonly in (True, False):
        assert "not a reachtui store" in _one_line_error(lambda: Store(path, readonly=readonly))


def test_a_store_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "audit.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    for readonly in (True, False):
        assert "newer" in _one_line_error(lambda: Store(path, readonly=readonly))


def test_readonly_store_refuses_writes(tmp_path, run):
    with Store(tmp_path / "s" / "audit.sqlite", readonly=True) as ro:
        assert "read-only" in _one_line_error(lambda: ro.set_run_status(run[0], "complete"))


# -- writes --------------------------------------------------------------------------------------

def test_upserts_are_idempotent(store):
    a = store.upsert_model("m", "/p1", None, 8)
    assert store.upsert_model("m", None, "LlamaForCausalLM", None) == a
    assert store.db.execute("SELECT path, model_class, num_layers FROM models").fetchall() == \
        [("/p1", "LlamaForCausalLM", 8)]
    t = store.upsert_task(TASK)
    assert store.upsert_task(TASK) == t
    assert store.db.execute("SELECT count(*) FROM questions").fetchone()[0] == 4
    assert list(store.task_question_ids(t)) == ["t-0", "t-1", "t-2", "t-3"]


def test_question_ids_follow_task_order_and_the_attempts_export_comes_in_it(store):
    """Whatever the qids and the order attempts arrive in, `export attempts` lists them in task order (it
    reads the unique index unsorted: a task's question ids follow its order)."""
    from reachtui.tables import build_table

    first = store.upsert_task(T("a", "/a", "c" * 64, (Q("z", "z?", "1"), Q("a", "a?", "2"), Q("m", "m?", "3"))))
    second = store.upsert_task(T("b", "/b", "d" * 64, (Q("b", "b?", "4"), Q("a", "a?", "5"))))
    for task_id in (first, second):
        rows = store.db.execute("SELECT id, idx FROM questions WHERE task_id = ? ORDER BY id", (task_id,)).fetchall()
        assert [idx for _id, idx in rows] == list(range(len(rows)))
    ids = store.task_question_ids(first)
    run_id = store.create_run(store.upsert_model("m"), first, protocol_json={}, protocol_hash="h",
                              question_ids=ids.values())
    for qid in ("m", "a", "z"):
        store.insert_attempts(run_id, [{"question_id": ids[qid], "probe": p, "attempt": j, "correct": 0}
                                       for p in ("sample", "realized") for j in ((1, 0) if p == "sample" else (0,))])
    got = [(r["question_id"], r["probe"], r["attempt"]) for r in build_table(store, "attempts", [run_id]).dicts()]
    assert got == [(q, p, j) for q in ("z", "a", "m") for p, j in (("realized", 0), ("sample", 0), ("sample", 1))]


def test_a_task_with_duplicate_ids_is_refused_whole(store):
    bad = T("dup", "/d", "b" * 64, (Q("x", "a?", "1"), Q("x", "b?", "2")))
    assert "unique" in _one_line_error(lambda: store.upsert_task(bad))
    assert store.db.execute("SELECT count(*) FROM tasks").fetchone()[0] == 0


def test_insert_attempts_ignores_duplicates_and_counts_inserted(store, run):
    run_id, qids = run
    rows = rows_for(qids)
    assert store.insert_attempts(run_id, rows) == len(rows)
    assert store.insert_attempts(run_id, rows) == 0
    extra = {"question_id": qids[0], "probe": "sample", "attempt": 4, "correct": 0}
    assert store.insert_attempts(run_id, rows[:3] + [extra]) == 1
    assert store.db.execute("SELECT count(*) FROM attempts").fetchone()[0] == len(rows) + 1


def test_a_failing_batch_leaves_no_partial_rows(store, run):
    run_id, qids = run
    good = rows_for(qids)[:5]
    bad = {"question_id": 10_000, "probe": "sample", "attempt": 0}   # no such question: FK fails
    with pytest.raises(sqlite3.IntegrityError):
        store.insert_attempts(run_id, good + [bad])
    assert store.db.execute("SELECT count(*) FROM attempts").fetchone()[0] == 0
    assert store.db.execute("SELECT count(*) FROM attempts_fts").fetchone()[0] == 0
    # several writes in one transaction: all or nothing
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.insert_attempts(run_id, good)
            store.set_run_status(run_id, "complete")
            raise RuntimeError("killed mid-batch")
    assert store.get_run(run_id)["status"] == "running"
    assert store.db.execute("SELECT count(*) FROM attempts").fetchone()[0] == 0
    assert store.insert_attempts(run_id, good) == 5


def test_run_lifecycle_and_lookup(store, run):
    run_id, qids = run
    r = store.get_run(run_id)
    assert (r["model"], r["task"], r["n_questions"], r["status"], r["source"]) == \
        ("toy-model", "toy", 4, "running", "audit")
    assert r["finished_at"] is None and r["num_layers"] == 8 and r["protocol_json"] == '{"seed":0}'
    assert store.find_run(r["model_id"], r["task_id"], "abc123")["id"] == run_id
    assert store.find_run(r["model_id"], r["task_id"], "abc123", statuses=("complete",)) is None
    assert store.find_run(r["model_id"], r["task_id"], "abc123", limit_n=2) is None
    store.set_run_status(run_id, "complete")
    assert store.get_run(run_id)["finished_at"] is not None
    assert store.find_run(r["model_id"], r["task_id"], "abc123", statuses=("complete",))["id"] == run_id
    assert store.latest_run()["id"] == run_id
    assert "no run 99" in _one_line_error(lambda: store.get_run(99))
    assert "no run 99" in _one_line_error(lambda: store.set_run_status(99, "failed"))
    with pytest.raises(ValueError):
        store.set_run_status(run_id, "done")
    limited = store.create_run(r["model_id"], r["task_id"], protocol_json="{}", protocol_hash="abc123",
                               limit_n=2)
    store.add_run_questions(limited, qids[:2])
    store.add_run_questions(limited, qids[:2])
    assert store.get_run(limited)["n_questions"] == 2
    assert store.find_run(r["model_id"], r["task_id"], "abc123", limit_n=2)["id"] == limited
    assert [q["qid"] for q in store.run_questions(limited)] == ["t-0", "t-1"]


# -- reads -----------------------------------------------------------------------------------------

def test_question_status_matches_hand_computed_numbers(store, run):
    run_id, qids = run
    store.insert_attempts(run_id, rows_for(qids))
    status = {(r["question_id"], r["probe"]): r for r in reference.question_status(store, run_id)}
    assert len(status) == 12
    for i, outcomes in OUTCOMES.items():
        for probe, corrects in outcomes.items():
            row = status[(qids[i], probe)]
            assert row["n"] == len(corrects)
            assert row["n_correct"] == sum(corrects)
            assert row["reachable"] == any(corrects)
            assert row["first_hit"] == (corrects.index(1) + 1 if 1 in corrects else None)  # 1-based k
            assert row["realized"] is bool(outcomes["realized"][0])
    assert store.probe_names(run_id) == ["realized", "sample", "routes"]
    assert {r["probe"] for r in reference.question_status(store, run_id, probes=["routes"])} == {"routes"}
    summary = {r["probe"]: r for r in reference.probe_summary(store, run_id)}
    assert (summary["sample"]["reachable"], summary["sample"]["realized"], summary["sample"]["failure"]) == (2, 1, 1)
    assert (summary["routes"]["reachable"], summary["routes"]["failure"]) == (2, 2)
    assert summary["routes"]["n_attempts"] == 12 and summary["sample"]["n_correct"] == 4
    assert store.failure_candidates(run_id, "sample") == [qids[1]]
    assert store.failure_candidates(run_id, "routes") == [qids[1], qids[2]]
    assert store.realized_ids(run_id) == [qids[0]]
    runs = store.list_runs()
    assert (runs[0]["n_attempts"], runs[0]["n_realized_done"], runs[0]["n_realized"]) == (32, 4, 1)
    assert store.done_keys(run_id, "realized") == {(q, "realized", 0) for q in qids}
    assert len(store.done_keys(run_id)) == 32
    assert [a["attempt"] for a in store.attempts(run_id, qids[1], "routes")] == [0, 1, 2]
    assert store.attempts(run_id, qids[1], "routes")[1]["route"] == "0-3,3,5-7"


def test_question_status_before_realized_has_run(store, run):
    run_id, qids = run
    store.insert_attempts(run_id, [{"question_id": qids[0], "probe": "sample", "attempt": 0, "correct": 1}])
    (row,) = reference.question_status(store, run_id)
    assert row["realized"] is None and row["reachable"] is True
    assert store.failure_candidates(run_id, "sample") == []


def test_failure_sets_are_frozen(store, run):
    run_id, qids = run
    store.insert_attempts(run_id, rows_for(qids))
    members = store.failure_candidates(run_id, "routes")
    set_id = store.create_failure_set(run_id, "failure:routes", "routes", members)
    assert "frozen" in _one_line_error(lambda: store.create_failure_set(run_id, "failure:routes", "routes", []))
    (fs,) = store.failure_sets(run_id)
    assert (fs["name"], fs["size"], fs["protocol_hash"]) == ("failure:routes", 2, "abc123")
    assert store.failure_set_members(set_id) == members
    assert store.get_failure_set(run_id, "failure:routes")["id"] == set_id
    with pytest.raises(sqlite3.IntegrityError, match="frozen"):
        store.db.execute("UPDATE failure_sets SET size = 5")
    with pytest.raises(sqlite3.IntegrityError, match="frozen"):
        store.db.execute("UPDATE failure_set_members SET question_id = 1")


def test_mlp_scan_and_explorations(store, run):
    run_id, qids = run
    set_id = store.create_failure_set(run_id, "failure:routes", "routes", qids[1:3])
    store.write_mlp_scan(run_id, [{"layer": L, "set_id": set_id, "failure_n": 2, "repaired": L % 3,
                                   "realized_n": 1, "broken": L % 2} for L in range(4)])
    store.write_mlp_scan(run_id, [{"layer": 0, "set_id": set_id, "failure_n": 2, "repaired": 1,
                                   "realized_n": 0, "broken": 0}])
    scan = store.mlp_scan(run_id)
    assert [r["layer"] for r in scan] == [0, 1, 2, 3]
    assert (scan[0]["repair_rate"], scan[0]["break_rate"], scan[0]["set_name"]) == (0.5, None, "failure:routes")
    assert (scan[2]["repaired"], scan[2]["repair_rate"], scan[3]["break_rate"]) == (2, 1.0, 1.0)
    ex = store.create_exploration(run_id, "silence 5", target="failure:routes", silenced="5", n=2)
    store.insert_attempts(run_id, [{"question_id": qids[1], "probe": f"explore:{ex}", "attempt": 0,
                                    "silenced": "5", "correct": 1}])
    store.update_exploration(ex, repaired=1)
    store.update_exploration(ex, status="complete")
    (row,) = store.explorations(run_id)
    assert (row["n"], row["repaired"], row["broken"], row["status"]) == (2, 1, 0, "complete")
    assert store.get_exploration(ex)["silenced"] == "5"
    assert store.probe_names(run_id) == [f"explore:{ex}"]


def test_probe_names_display_order(store, run):
    run_id, qids = run
    probes = ["mlp:10", "explore:2", "routes", "mlp:2", "realized", "mcts-blind", "mcts", "sample"]
    store.insert_attempts(run_id, [{"question_id": qids[0], "probe": p, "attempt": 0} for p in probes])
    assert store.probe_names(run_id) == ["realized", "sample", "routes", "mcts", "mcts-blind",
                                         "mlp:2", "mlp:10", "explore:2"]


def test_search_finds_question_text_and_outputs(store, run):
    run_id, qids = run
    store.insert_attempts(run_id, rows_for(qids) + [
        {"question_id": qids[3], "probe": "sample", "attempt": 9, "text": " Sara reads quickly. #### 31"}])
    assert store.search(run_id, "train") == [qids[1]]            # a word of the question
    assert store.search(run_id, "APPLES") == [qids[0]]           # case-insensitive
    assert store.search(run_id, "quickly") == [qids[3]]          # a word of an output only
    assert store.search(run_id, "q2 a3") == [qids[2]]            # all words, inside one output
    assert store.search(run_id, "t-1") == [qids[1]]              # a question id
    assert store.search(run_id, '"reads quickly"') == [qids[3]]  # a phrase
    assert store.search(run_id, "quick", prefix=True) == [qids[3]]
    assert store.search(run_id, "zebra") == []
    assert store.search(run_id, '" ( * :') == []                  # FTS syntax is never passed through
    assert store.search(run_id, "apples OR zebra") == []         # ... nor are its operators
    other = store.create_run(1, 1, protocol_json="{}", protocol_hash="x", question_ids=qids)
    assert store.search(other, "quickly") == []                  # outputs of another run don't count


def test_fts_query_is_safe():
    assert fts_query("12+7 apples") == '"12 7" "apples"'
    assert fts_query('"the answer is" 14', prefix=True) == '"the answer is" "14" *'
    assert fts_query("  ()*: ") is None


def test_concurrent_reader_sees_committed_rows_while_writer_is_open(tmp_path, run):
    run_id, qids = run
    path = tmp_path / "s" / "audit.sqlite"
    with Store(path) as writer, Store(path, readonly=True) as reader:
        assert reader.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert reference.question_status(reader, run_id) == []
        with writer.transaction():
            writer.insert_attempts(run_id, rows_for(qids)[:4])
            assert reference.question_status(reader, run_id) == []            # uncommitted: invisible, not blocked
        assert len(reference.question_status(reader, run_id)) == 2            # committed: visible
        seen = []

        def read_in_a_thread():
            with Store(path, readonly=True) as other:              # one connection per thread
                seen.append(len(other.done_keys(run_id)))

        t = threading.Thread(target=read_in_a_thread)
        t.start()
        t.join()
        assert seen == [4]


def test_unusable_paths_fail_in_one_line(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert "cannot create the folder" in _one_line_error(lambda: Store(afile / "sub" / "audit.sqlite"))
    assert "directory" in _one_line_error(lambda: Store(tmp_path))
    assert "empty" in _one_line_error(lambda: Store(afile, readonly=True))


def test_a_reader_does_not_import_sqlite_utils_or_heavy_libraries(tmp_path, run):
    import subprocess
    import sys

    path = tmp_path / "s" / "audit.sqlite"
    code = (
        "import sys\n"
        "from reachtui.store import Store\n"
        f"s = Store({str(path)!r}, readonly=True)\n"
        "r = s.latest_run()['id']\n"
        "s.run_questions(r); s.failure_candidates(r, 'sample'); s.realized_ids(r); s.probe_names(r)\n"
        "s.search(r, 'apples')\n"
        "print(sorted(m for m in ('sqlite_utils', 'torch', 'transformers', 'textual') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
