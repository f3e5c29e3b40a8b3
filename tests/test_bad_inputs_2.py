"""Bad inputs, round 2 (issue 25): output paths that could destroy data, stores with orphaned rows or a damaged
schema, silently wrong models and golds, unbounded work, Python's own limits, exports turned against their
reader, files reachtui could not read back, grading that could hang, and the rest.

Every refused command answers with one line (`error: ...`) and its exit status (2 bad input, 3 the environment
or a damaged store), no traceback, no hang, and leaves every file of the test folder as it was (the store,
its write-ahead log, the files beside it: `folder_state`). The data-loss cases (an output that is the store,
orphaned rows adopted by a new run) would have passed silently before: each has its own test that shows the
rows kept.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_helpers import HAVE_DEMO, fingerprint, run_cli
from fake_runner import FakeRunner, write_task
from reachtui.engine.audit import run_audit
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tasks import load_task

BIG = "9" * 5000                   # an integer Python will not convert (over 4,300 digits)
DEEP = 100_000                      # nesting deeper than any parser's recursion limit


@dataclass
class Env:
    root: Path

    def __getitem__(self, name: str) -> str:
        return str(self.root / name)


def _store_with_runs(path: Path, task: Path, seeds=(1, 2)) -> None:
    with Store(path) as store:
        t = load_task(str(task))
        for seed in seeds:
            run_audit(store, FakeRunner(), model_name="fake", task=t,
                      protocol=Protocol(probes=(ProbeSpec("sample", budget=2),), seed=seed))
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def _edited(root: Path, name: str, *statements: str) -> Path:
    """A copy of the good store changed by `statements` as the sqlite3 shell would run them (foreign keys off)."""
    path = root / name
    shutil.copy(root / "good.sqlite", path)
    con = sqlite3.connect(path)
    for sql in statements:
        con.execute(sql)
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return path


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad2")
    task = write_task(root / "t.jsonl", 6)
    _store_with_runs(root / "good.sqlite", task)
    # -- stores: orphaned rows, damaged schemas --------------------------------------------------------
    _edited(root, "orphans.sqlite", "DELETE FROM runs WHERE id = 2")
    _edited(root, "no_attempts.sqlite", "DROP TABLE attempts")
    _edited(root, "no_outcomes.sqlite", "DROP TABLE outcomes")
    _edited(root, "no_fts.sqlite", "DROP TABLE attempts_fts")
    _edited(root, "no_trigger.sqlite", "DROP TRIGGER attempts_ai")
    _edited(root, "no_column.sqlite", "ALTER TABLE runs DROP COLUMN note")
    _edited(root, "negative_version.sqlite", "UPDATE meta SET value = '-1' WHERE key = 'schema_version'")
    _edited(root, "text_version.sqlite", "UPDATE meta SET value = '4x' WHERE key = 'schema_version'")
    _edited(root, "correct_yes.sqlite", "DELETE FROM outcome_runs",
            "UPDATE attempts SET correct = 'yes' WHERE id = (SELECT min(id) FROM attempts WHERE probe = 'sample')")
    con = sqlite3.connect(root / "meta_alone.sqlite")
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    con.execute("INSERT INTO meta VALUES ('app', 'reachtui'), ('schema_version', '5')")
    con.commit()
    con.close()
    os.mkfifo(root / "fifo")
    # -- inputs --------------------------------------------------------------------------------------
    qids = [f"q{i:03d}" for i in range(6)]
    gens = [{"question_id": q, "probe": "realized", "attempt": 0, "output": "#### 1"} for q in qids]
    _jsonl(root / "gens.jsonl", gens)
    (root / "adir").mkdir()
    try:
        yield Env(root)
    finally:
        import gc

        gc.collect()


def folder_state(root: Path) -> dict:
    """Every file under `root` (recursively) with its type and, for a regular file, its bytes' digest; the
    shared-memory index `-shm` (no data: rebuilt from the WAL) and an empty `-wal` are left out."""
    state = {}
    for p in sorted(root.rglob("*")):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        name = str(p.relative_to(root))
        if name.endswith("-shm") or (name.endswith("-wal") and st.st_size == 0):
            continue
        if stat.S_ISREG(st.st_mode):
            state[name] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            state[name] = stat.filemode(st.st_mode)[0]
    return state


def _fill(arg: str, env: Env) -> str:
    if arg.startswith("{") and arg.endswith("}"):
        return env[arg[1:-1]]
    return arg


S = "{good.sqlite}"

#: (id, argv, exit status, a piece of the error line, what it needs: "demo" | None)
CASES = [
    # -- 1. an output path that could destroy data -------------------------------------------------------
    ("export-output-is-the-store", ["export", "summary", "--store", S, "-o", S], 2, "is the audit store", None),
    ("export-output-is-the-wal", ["export", "summary", "--store", S, "-o", "{good.sqlite-wal}"], 2,
     "is the audit store", None),
    ("export-output-is-the-shm", ["export", "summary", "--store", S, "-o", "{good.sqlite-shm}"], 2,
     "is the audit store", None),
    ("export-output-is-the-journal", ["export", "summary", "--store", S, "-o", "{good.sqlite-journal}"], 2,
     "is the audit store", None),
    ("export-output-is-another-database", ["export", "summary", "--store", S, "-o", "{orphans.sqlite}"], 2,
     "is an SQLite database", None),
    ("compare-output-is-the-store", ["compare", "1", "1", "--store", S, "-o", S], 2, "is the audit store", None),
    ("export-output-fifo-without-reader", ["export", "summary", "--store", S, "-o", "{fifo}"], 2,
     "a pipe that nobody reads", None),
    ("export-output-under-a-file", ["export", "summary", "--store", S, "-o", "{t.jsonl/x.csv}"], 2,
     "not a folder", None),
    # -- 2. orphaned rows --------------------------------------------------------------------------------
    ("import-store-with-orphans", ["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--store", "{orphans.sqlite}"],
     3, "refer to a runs row that is not there", None),
    ("audit-store-with-orphans", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{orphans.sqlite}"], 3,
     "DELETE FROM attempts WHERE run_id NOT IN (SELECT id FROM runs)", None),
    # -- 7. damaged schemas --------------------------------------------------------------------------------
    ("runs-table-dropped", ["runs", "--store", "{no_attempts.sqlite}"], 3, "table attempts is missing", None),
    ("export-table-dropped", ["export", "summary", "--store", "{no_attempts.sqlite}"], 3, "table attempts is missing",
     None),
    ("audit-table-dropped", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{no_attempts.sqlite}"], 3,
     "table attempts is missing", None),
    ("import-table-dropped", ["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--store", "{no_attempts.sqlite}"],
     3, "table attempts is missing", None),
    ("export-outcomes-dropped", ["export", "summary", "--store", "{no_outcomes.sqlite}"], 3,
     "table outcomes is missing", None),
    ("audit-outcomes-dropped", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{no_outcomes.sqlite}"], 3,
     "table outcomes is missing", None),
    ("runs-fts-dropped", ["runs", "--store", "{no_fts.sqlite}"], 3, "table attempts_fts is missing", None),
    ("audit-fts-dropped", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{no_fts.sqlite}"], 3,
     "table attempts_fts is missing", None),
    ("audit-trigger-dropped", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{no_trigger.sqlite}"], 3,
     "trigger attempts_ai is missing", None),
    ("export-column-dropped", ["export", "summary", "--store", "{no_column.sqlite}"], 3,
     "table runs lacks column note", None),
    ("runs-meta-alone", ["runs", "--store", "{meta_alone.sqlite}"], 3, "is missing", None),
    ("audit-meta-alone", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{meta_alone.sqlite}"], 3,
     "is missing", None),
    ("runs-negative-version", ["runs", "--store", "{negative_version.sqlite}"], 3, "schema version is -1", None),
    ("audit-negative-version", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{negative_version.sqlite}"], 3,
     "schema version is -1", None),
    ("open-negative-version", ["open", "--store", "{negative_version.sqlite}"], 3, "schema version is -1", None),
    ("export-text-version", ["export", "summary", "--store", "{text_version.sqlite}"], 3, "is not a number", None),
    ("compare-table-dropped", ["compare", "1", "2", "--store", "{no_attempts.sqlite}"], 3, "is missing", None),
    # -- 11. the rest: a store that is not a regular file, a value the store should not hold -----------------
    ("runs-store-a-fifo", ["runs", "--store", "{fifo}"], 2, "is not a regular file", None),
    ("audit-store-a-fifo", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{fifo}"], 2,
     "is not a regular file", None),
    ("import-store-dev-null", ["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--store", "/dev/null"], 2,
     "is not a regular file", None),
    ("export-correct-yes", ["export", "summary", "--run", "all", "--store", "{correct_yes.sqlite}"], 3, "has correct = 'yes'", None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_with_its_exit_status_and_nothing_written(case, env, capsys):
    name, argv, code, needle, needs = case
    if needs == "demo" and not HAVE_DEMO:
        pytest.skip("no demo model in assets/")
    argv = [_fill(a, env) for a in argv]
    before = folder_state(env.root)

    got, out, err = run_cli(argv, capsys)

    lines = [line for line in err.splitlines() if line.strip()]
    assert got == code, (got, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert lines == [lines[0]] and lines[0].startswith("error: ") and needle in lines[0], err
    assert folder_state(env.root) == before, "a file changed"
    assert not Path("/dev/null-journal").exists()


# -- 1. output paths -----------------------------------------------------------------------------------------


def _runs_in(path: Path) -> list[int]:
    with Store(path, readonly=True) as store:
        return store.run_ids()


def test_an_output_that_is_the_store_keeps_every_run(env, tmp_path, capsys):
    """Before: `export -o` onto the store (or a hard link to it, or a symlink) replaced it with a CSV, exit 0,
    every run gone."""
    store = tmp_path / "s.sqlite"
    shutil.copy(env["good.sqlite"], store)
    os.link(store, tmp_path / "hard.csv")
    (tmp_path / "soft.csv").symlink_to(store)
    for output in (store, tmp_path / "hard.csv", tmp_path / "soft.csv", tmp_path / "." / "s.sqlite"):
        code, out, err = run_cli(["export", "questions", "--store", str(store), "-o", str(output)], capsys)
        assert code == 2 and "is the audit store" in err and len(err.strip().splitlines()) == 1, err
    assert _runs_in(store) == [1, 2]
    assert (tmp_path / "soft.csv").is_symlink() and os.stat(tmp_path / "hard.csv").st_nlink == 2


def test_the_default_store_is_protected_too(env, tmp_path, capsys, monkeypatch):
    store = tmp_path / "store" / "reachtui.sqlite"
    store.parent.mkdir()
    shutil.copy(env["good.sqlite"], store)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REACHTUI_STORE", raising=False)
    code, _, err = run_cli(["export", "summary", "-o", "store/reachtui.sqlite"], capsys)
    assert code == 2 and "is the audit store" in err
    assert _runs_in(store) == [1, 2]


def test_a_character_device_is_written_to_not_replaced(env, capsys):
    code, _, err = run_cli(["export", "summary", "--store", env["good.sqlite"], "-o", "/dev/null"], capsys)
    assert code == 0, err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_fifo_with_a_reader_gets_the_table_and_stays_a_fifo(env, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = {}

    def reader():
        with open(fifo, "rb") as fh:
            got["data"] = fh.read()

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.2)
    code, _, err = run_cli(["export", "passk", "--store", env["good.sqlite"], "--csv", "-o", str(fifo)], capsys)
    t.join(10)
    assert code == 0, err
    assert got["data"].decode().startswith("run,probe,estimator,k,value")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_symlink_stays_a_symlink_and_its_target_gets_the_table(env, tmp_path, capsys):
    target = tmp_path / "real.csv"
    target.write_text("old\n")
    os.chmod(target, 0o644)
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "new.csv")
    for path in (link, dangling):
        code, _, err = run_cli(["export", "passk", "--store", env["good.sqlite"], "-o", str(path)], capsys)
        assert code == 0, err
        assert path.is_symlink()
    assert target.read_text().startswith("run,probe,estimator,k,value")
    assert (tmp_path / "new.csv").read_text() == target.read_text()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644           # the file keeps its permissions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.csv", "link.csv", "new.csv", "real.csv"]


def test_an_output_that_is_stdout_redirected_to_a_file_is_written_through_it(env, tmp_path):
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        fh.write("before\n")
        fh.flush()
        proc = subprocess.run([sys.executable, "-m", "reachtui", "export", "passk", "--store", env["good.sqlite"],
                               "--csv", "-o", "/dev/stdout"], stdout=fh, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text.startswith("before\nrun,probe,estimator,k,value,") and not out.is_symlink()


# -- 2. orphaned rows and run ids ------------------------------------------------------------------------------


def test_orphaned_attempts_are_never_adopted_by_a_new_run(env, tmp_path, capsys):
    """Before: run 2 deleted with foreign keys off left its attempts; the next import got id 2 and
    `INSERT OR IGNORE` kept the old model's outputs under it, exit 0."""
    store = tmp_path / "s.sqlite"
    shutil.copy(env["orphans.sqlite"], store)
    before = fingerprint(store)
    code, _, err = run_cli(["import", env["gens.jsonl"], "--task", env["t.jsonl"], "--store", str(store)], capsys)
    assert code == 3 and "foreign keys off" in err and "DELETE FROM" in err, err
    assert fingerprint(store) == before
    # the line's own statement repairs the store; then the import is a new run, with its own outputs
    statement = err.split('"')[1]
    con = sqlite3.connect(store)
    con.executescript(statement)
    con.close()
    code, out, err = run_cli(["import", env["gens.jsonl"], "--task", env["t.jsonl"], "--store", str(store)], capsys)
    assert code == 0, err
    with Store(store, readonly=True) as s:
        new = s.run_ids()[-1]
        texts = {r[0] for r in s.conn.execute("SELECT text FROM attempts WHERE run_id = ?", (new,))}
    assert new == 3 and texts == {"#### 1"}         # id 2 is never given again


def test_run_ids_are_never_given_twice(tmp_path):
    path = tmp_path / "s.sqlite"
    _store_with_runs(path, write_task(tmp_path / "t.jsonl", 3), seeds=(1, 2, 3))
    with Store(path) as store:
        store.conn.execute("DELETE FROM runs WHERE id = 3")     # foreign keys on: its rows go with it
        store.conn.commit()
    _store_with_runs(path, tmp_path / "t.jsonl", seeds=(4,))
    with Store(path, readonly=True) as store:
        assert store.run_ids() == [1, 2, 4]
