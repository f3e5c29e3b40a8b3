"""The audit store: one SQLite file for every model, task and run. The room `reachtui/store/`: `Store` here
opens it and writes to it; its reads are mixed in from `queries.py` (runs, questions, attempts) and
`outcomes.py` (the SQL of what outcomes are); `schema.py` holds the schema and its migrations. Nothing
outside this room runs SQL on the store's connection: everything reads through a `Store`.

`Store(path)` is a writer (creates, migrates, WAL); `Store(path, readonly=True)` a reader (a `mode=ro`
URI, never creates or migrates). One `Store` per thread; a reader and a writer on the same file work side
by side (WAL, busy_timeout 5 s). `store.conn` is the plain sqlite3 connection, `store.db` its sqlite-utils
view (made on first use, so a reader never imports sqlite-utils). Every write method is one transaction;
`with store.transaction(): ...` makes several one.

Faults of the environment are `EnvironmentFault`s (exit status 3), raised where they arise: every opening
checks the store's shape (its tables, columns and triggers: `schema.check_shape`); a writer checks
at opening that the file can be written and is intact (`PRAGMA quick_check`, and `PRAGMA
foreign_key_check`: no row of a run that is not there); a damaged store is `DamagedStore` and is never
written to (`check=True` makes a reader run quick_check too); and a failed write (disk full, read-only,
damaged) rolls its transaction back whole and says so in one line.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reachtui.errors import DamagedStore, EnvironmentFault, ReachError, os_fault, sqlite_fault
from reachtui.inputs import short_name, too_long
from reachtui.store.outcomes import OutcomeQueries
from reachtui.store.queries import StoreQueries
from reachtui.store.schema import (ATTEMPT_COLUMNS, FINISHED_STATUSES, NOW, RUN_SOURCES, RUN_STATUSES,
                                   check_references, migrate, opened_version)

if TYPE_CHECKING:
    from sqlite_utils import Database

    from reachtui.protocol import Protocol

BUSY_TIMEOUT_MS = 5000
#: The file beside the store whose byte N is locked (a POSIX record lock, released by the kernel when the
#: process ends) while this process audits run N: two audits never work on one run at once.
RUN_LOCK_SUFFIX = ".lock"
_LOCK_FILES: dict[str, int] = {}     # lock file -> the one descriptor this process holds on it (closing
_LOCK_GUARD = threading.Lock()       # any descriptor of a file drops all of a process's locks on it)

#: The last store opened in this process: `reachtui.cli.main` names it when an sqlite3 error of a read
#: (a damaged page met mid-query) reaches it.
LAST_OPENED: Path | None = None

def default_store_path() -> Path:
    """`$REACHTUI_STORE` if set, else `./store/reachtui.sqlite` (relative to the current directory)."""
    env = os.environ.get("REACHTUI_STORE")
    return Path(env) if env else Path("store") / "reachtui.sqlite"


def _looks_like_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise ReachError(f"cannot read audit store {path}: {exc.strerror or exc}") from None
    return head == b"" or head == b"SQLite format 3\x00"


def check_creatable(path: Path) -> None:
    """Before a long job that makes the store at `path` at its end (an audit makes it once the model has
    loaded): its folder, or the nearest one that exists (the rest are made), can be written. The line `Store`
    would give, now, with nothing made."""
    folder = Path(path).absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():       # the line Store gives (os.makedirs' error)
        raise ReachError(f"cannot create the folder of audit store {path}: {os.strerror(errno.ENOTDIR)} ({folder} is "
                         f"a file)")
    if not os.access(folder, os.W_OK | os.X_OK) or _on_readonly_fs(folder / "store"):
        raise EnvironmentFault(f"the store {path} cannot be written ({folder} cannot be written: a read-only file "
                               f"system or missing permissions)")


def _wal_mode(path: Path) -> bool:
    """Whether the SQLite file at `path` is in WAL mode (its header's read and write versions are 2)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return False
    return len(head) == 20 and head[18] == 2 and head[19] == 2


def _on_readonly_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path.parent if str(path.parent) else ".").f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _protocol_text(protocol: str | Mapping[str, Any]) -> str:
    if isinstance(protocol, str):
        return protocol
    return json.dumps(protocol, sort_keys=True, separators=(",", ":"))


class Store(StoreQueries, OutcomeQueries):
    """The audit database. Writes are one transaction per call; reads are in `StoreQueries` and
    `OutcomeQueries`."""

    def __init__(self, path: str | os.PathLike | None = None, *, readonly: bool = False,
                 check: bool | None = None) -> None:
        """`check`: run `PRAGMA quick_check` at opening (default: for a writer, which never writes into a
        damaged store; a reader asked to check reports damage before it reads anything)."""
        global LAST_OPENED
        self.path = Path(path) if path is not None else default_store_path()
        self.readonly = readonly
        if (long := too_long(self.path)) is not None:
            raise ReachError(f"audit store {short_name(str(self.path))}: {long}")
        LAST_OPENED = self.path
        if readonly and not self.path.exists():
            raise ReachError(f"no audit store at {self.path}")
        if self.path.is_dir():
            raise ReachError(f"{self.path} is a directory, not an audit store")
        if self.path.exists() and not self.path.is_file():     # a FIFO, /dev/null, a socket: never opened
            raise ReachError(f"{self.path} is not a regular file (a device, a pipe or a socket), so it cannot be "
                             f"an audit store")
        if self.path.is_file() and not _looks_like_sqlite(self.path):
            raise ReachError(f"{self.path} is not a reachtui store (not an SQLite database)")
        if not readonly:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                what = f"the folder of audit store {self.path}"
                raise (os_fault(exc, what) or ReachError(f"cannot create {what}: {exc.strerror or exc}")) from None
        conn = None
        self._db: Database | None = None
        try:
            conn = self.conn = self._connect(readonly)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA foreign_keys = ON")
            version = opened_version(conn, self.path)       # its tables, columns, triggers: milliseconds
            if (not readonly) if check is None else check:
                self._check_intact()
            if not readonly and version:
                check_references(conn, self.path)           # a writer never adopts rows left behind
            if not readonly:
                self.db.enable_wal()
                conn.execute("PRAGMA synchronous = NORMAL")
                self._check_writable()
            migrate(conn, lambda: self.db, self.path, version, readonly=readonly)
        except ReachError:
            if conn is not None:
                conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            fault = sqlite_fault(exc, self.path)
            if fault is not None:
                raise fault from None
            raise ReachError(f"cannot open audit store {self.path}: {exc}") from None

    def _connect(self, readonly: bool) -> sqlite3.Connection:
        """A writer's connection; or a reader's, which leaves the folder as it found it. A WAL store needs its
        -wal and -shm files beside it to be read, and a `mode=ro` connection makes them and leaves them there.
        So where a WAL store has no -wal file (no writer is connected) a reader opens it read-write, made
        read-only by `PRAGMA query_only`: when it closes as the last connection SQLite removes both files, and
        while it is open it reads as any connection does, seeing what a writer commits meanwhile. A store this
        process cannot write is read as immutable then (its -shm would be this user's, in the way of its owner's
        writer)."""
        if not readonly:
            return sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000)
        uri = self.path.resolve().as_uri()
        if _wal_mode(self.path) and not self.path.with_name(self.path.name + "-wal").exists():
            if os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK) \
                    and not _on_readonly_fs(self.path):
                conn = sqlite3.connect(uri + "?mode=rw", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
                conn.execute("PRAGMA query_only = 1")
                return conn
            return sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        uri += "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # A WAL store on a read-only file system cannot get its -shm file: nobody can write there, so
            # the file is read as immutable.
            if not _on_readonly_fs(self.path):
                raise
            conn.close()
            conn = sqlite3.connect(uri + "&immutable=1", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        return conn

    def _check_intact(self) -> None:
        """`PRAGMA quick_check` (a pass over the file: about 0.2 s per 100 MB); DamagedStore if it fails."""
        rows = [str(r[0]) for r in self.conn.execute("PRAGMA quick_check(4)").fetchall()]
        if rows != ["ok"]:
            lines = [line.strip() for r in rows for line in r.splitlines()]
            problems = [line for line in lines if line and not line.startswith("*** in database")] or ["?"]
            more = f", and {len(problems) - 1} more" if len(problems) > 1 else ""
            raise DamagedStore(self.path, f"quick_check: {problems[0][:200]}{more}")

    def _check_writable(self) -> None:
        """A write that is rolled back: an immutable file or a read-only file system is told now, before
        any work, not at the first attempt stored."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            conn.execute(f"PRAGMA user_version = {int(version)}")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    @property
    def db(self) -> Database:
        """The sqlite-utils view of the connection (made on first use: a read-only store that only runs
        the read queries never imports sqlite-utils)."""
        if self._db is None:
            from sqlite_utils import Database

            self._db = Database(self.conn, execute_plugins=False)
        return self._db

    # -- opening -------------------------------------------------------------------------------------

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Store {self.path}{' (read-only)' if self.readonly else ''}>"

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Store]:
        """One write transaction (BEGIN IMMEDIATE, so a second writer waits up to busy_timeout instead of
        failing mid-way); nested calls become savepoints. Every write method uses it, so several writes
        inside `with store.transaction():` commit together or not at all. A write or COMMIT that fails for
        the environment (disk full, read-only, damaged store) is rolled back whole and raised as an
        `EnvironmentFault`."""
        if self.readonly:
            raise ReachError(f"the audit store {self.path} is open read-only")
        conn = self.conn
        if conn.in_transaction:
            with self.db.atomic():
                yield self
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc
        try:
            yield self
        except BaseException as exc:
            self._rollback()
            fault = sqlite_fault(exc, self.path) if isinstance(exc, sqlite3.Error) else None
            if fault is not None:
                raise fault from exc
            raise
        else:
            try:
                self._commit()
            except BaseException as exc:
                self._rollback()
                if isinstance(exc, sqlite3.Error):
                    raise self._fault(exc) from exc
                raise

    def _commit(self) -> None:
        """COMMIT (a seam: tests make it fail as a full disk would)."""
        self.conn.execute("COMMIT")

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:      # SQLite rolls back itself after some errors (a full disk)
                pass

    def _fault(self, exc: sqlite3.Error) -> Exception:
        return sqlite_fault(exc, self.path) or exc

    _write = transaction

    # -- models, tasks, questions ------------------------------------------------------------------

    def upsert_model(self, name: str, path: str | os.PathLike | None = None, model_class: str | None = None,
                     num_layers: int | None = None) -> int:
        """The id of the model called `name`, created or updated (fields given as None are kept)."""
        with self._write():
            self.db.execute(
                "INSERT INTO models (name, path, model_class, num_layers) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET path = coalesce(excluded.path, path), "
                "model_class = coalesce(excluded.model_class, model_class), "
                "num_layers = coalesce(excluded.num_layers, num_layers)",
                (name, None if path is None else str(path), model_class, num_layers))
            return self.db.execute("SELECT id FROM models WHERE name = ?", (name,)).fetchone()[0]

    def upsert_task(self, task: Any) -> int:
        """The id of `task` (`.name .path .sha256 .questions`, each `.id .question .answer [.solution .meta]`),
        inserted with its questions if its sha256 is new (a task given a name, `.named`, renames a known
        one). Idempotent. A task's questions are inserted once, in task order, so their ids follow it (the
        raw attempts export relies on this to read rows in task order without sorting them)."""
        questions = list(task.questions)
        with self._write():
            self.db.execute("INSERT OR IGNORE INTO tasks (name, path, sha256, n_questions) VALUES (?, ?, ?, ?)",
                            (task.name, str(task.path), task.sha256, len(questions)))
            if getattr(task, "named", False):
                self.db.execute("UPDATE tasks SET name = ? WHERE sha256 = ?", (task.name, task.sha256))
            task_id = self.db.execute("SELECT id FROM tasks WHERE sha256 = ?", (task.sha256,)).fetchone()[0]
            # a task stored before metadata was kept (schema 6) gains its questions' metadata here
            self.conn.executemany(
                "INSERT INTO questions (task_id, qid, idx, question, gold, solution, meta) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_id, qid) DO UPDATE SET meta = excluded.meta "
                "WHERE questions.meta IS NULL AND excluded.meta IS NOT NULL",
                ((task_id, str(q.id), i, q.question, str(q.answer), getattr(q, "solution", None),
                  _meta_json(getattr(q, "meta", ()))) for i, q in enumerate(questions)))
            n = self.db.execute("SELECT count(*) FROM questions WHERE task_id = ?", (task_id,)).fetchone()[0]
            if n != len(questions):
                raise ReachError(f"task {task.name}: {len(questions)} questions but {n} distinct ids "
                                 f"(question ids must be unique)")
        return task_id

    # -- runs --------------------------------------------------------------------------------------

    def create_run(self, model_id: int, task_id: int, *, protocol: Protocol | None = None,
                   protocol_json: str | Mapping[str, Any] | None = None, protocol_hash: str | None = None,
                   source: str = "audit", limit_n: int | None = None,
                   question_ids: Iterable[int] | None = None,
                   skipped: Iterable[tuple[int, int | None]] = (), status: str = "running",
                   reachtui_version: str | None = None, torch_version: str | None = None,
                   transformers_version: str | None = None, device: str | None = None,
                   dtype: str | None = None, note: str | None = None) -> int:
        """A new run (status 'running' unless given); with `question_ids`, its question set too, and with
        `skipped` the (question id, prompt tokens) it leaves out (`--skip-long`: prompts over the model's
        positions; tokens None where not counted). Its
        `protocol` is stored in the one stored form, its canonical JSON, with its hash (audits and imports
        alike); `protocol_json` and `protocol_hash` store a hand-made one as given (tests, old stores)."""
        if protocol is not None:
            protocol_json, protocol_hash = protocol.canonical_json(), protocol.hash()
        if protocol_json is None or protocol_hash is None:
            raise ValueError("a run needs its protocol (or protocol_json and protocol_hash)")
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, not {status!r}")
        if source not in RUN_SOURCES:
            raise ValueError(f"run source must be one of {RUN_SOURCES}, not {source!r}")
        if reachtui_version is None:
            from reachtui import __version__ as reachtui_version
        with self._write():
            cur = self.db.execute(
                "INSERT INTO runs (model_id, task_id, protocol_json, protocol_hash, status, source, limit_n, "
                "reachtui_version, torch_version, transformers_version, device, dtype, note) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (model_id, task_id, _protocol_text(protocol_json), protocol_hash, status, source, limit_n,
                 reachtui_version, torch_version, transformers_version, device, dtype, note))
            run_id = cur.lastrowid
            if question_ids is not None:
                self._add_run_questions(run_id, question_ids)
            self.conn.executemany("INSERT INTO skipped_questions (run_id, question_id, prompt_tokens) VALUES (?, ?, ?)",
                                  ((run_id, int(q), tokens) for q, tokens in skipped))
        return run_id

    def claim_run(self, run_id: int) -> None:
        """Hold run `run_id` for this process until `release_run` or its end; EnvironmentFault when another
        process holds it (the same audit started twice: the second would generate the first's attempts again).
        Where record locks are not available (no fcntl), nothing is held."""
        try:
            import fcntl
        except ImportError:
            return
        fd = self._lock_fd()
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, int(run_id))
        except OSError:
            raise EnvironmentFault(f"run {run_id} of {self.path} is being audited by another process right now; "
                                   f"wait for it to finish (then the same command shows the run), or pass --new "
                                   f"for a run of its own") from None

    def release_run(self, run_id: int) -> None:
        """Let another process audit run `run_id` (`claim_run`)."""
        try:
            import fcntl
        except ImportError:
            return
        fcntl.lockf(self._lock_fd(), fcntl.LOCK_UN, 1, int(run_id))

    def _lock_fd(self) -> int:
        key = os.path.realpath(self.path.with_name(self.path.name + RUN_LOCK_SUFFIX))
        with _LOCK_GUARD:
            if key not in _LOCK_FILES:
                try:
                    _LOCK_FILES[key] = os.open(key, os.O_RDWR | os.O_CREAT, 0o644)
                except OSError as exc:
                    raise (os_fault(exc, key) or ReachError(f"cannot create the run lock {key}: "
                                                            f"{exc.strerror or exc}")) from None
            return _LOCK_FILES[key]

    def set_run_batch_size(self, run_id: int, batch_size: int) -> None:
        with self._write():
            self.conn.execute("UPDATE runs SET batch_size = ? WHERE id = ?", (int(batch_size), int(run_id)))

    def add_run_event(self, run_id: int, kind: str, detail: str | None = None) -> None:
        with self._write():
            self.conn.execute("INSERT INTO run_events (run_id, kind, detail) VALUES (?, ?, ?)",
                              (int(run_id), kind, detail))

    def add_run_questions(self, run_id: int, question_ids: Iterable[int]) -> None:
        """Add questions to the run's question set (duplicates ignored); keeps runs.n_questions exact."""
        with self._write():
            self._add_run_questions(run_id, question_ids)

    def _add_run_questions(self, run_id: int, question_ids: Iterable[int]) -> None:
        self.conn.executemany("INSERT OR IGNORE INTO run_questions (run_id, question_id) VALUES (?, ?)",
                                 ((run_id, int(q)) for q in question_ids))
        self.db.execute(f"UPDATE runs SET n_questions = (SELECT count(*) FROM run_questions WHERE run_id = ?), "
                        f"updated_at = {NOW} WHERE id = ?", (run_id, run_id))

    def set_run_status(self, run_id: int, status: str, note: str | None = None) -> None:
        """Set the status; finished_at is stamped for complete/failed/cancelled, cleared for running."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, not {status!r}")
        finished = status in FINISHED_STATUSES
        with self._write():
            cur = self.db.execute(
                f"UPDATE runs SET status = ?, updated_at = {NOW}, "
                f"finished_at = {NOW if finished else 'NULL'}, note = coalesce(?, note) WHERE id = ?",
                (status, note, run_id))
            if cur.rowcount == 0:
                raise ReachError(f"no run {run_id} in {self.path}")

    # -- attempts ----------------------------------------------------------------------------------

    def insert_attempts(self, run_id: int, rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert a batch of attempts in one transaction; rows already present (same run, question, probe,
        attempt) are ignored. Returns how many rows were inserted. All or nothing on error."""
        if not rows:
            return 0
        values = []
        for row in rows:
            unknown = set(row) - set(ATTEMPT_COLUMNS) - {"run_id"}
            if unknown:
                raise ValueError(f"unknown attempt columns: {sorted(unknown)}")
            if row.get("run_id", run_id) != run_id:
                raise ValueError(f"attempt row for run {row['run_id']} given to run {run_id}")
            vals = [run_id]
            for col in ATTEMPT_COLUMNS:
                v = row.get(col)
                if col == "correct" and v is not None:
                    v = int(bool(v))
                vals.append(v)
            values.append(vals)
        cols = ", ".join(("run_id",) + ATTEMPT_COLUMNS)
        marks = ", ".join("?" * (len(ATTEMPT_COLUMNS) + 1))
        with self._write():
            cur = self.conn.executemany(f"INSERT OR IGNORE INTO attempts ({cols}) VALUES ({marks})", values)
            inserted = cur.rowcount
            if inserted:
                self.db.execute(f"UPDATE runs SET updated_at = {NOW} WHERE id = ?", (run_id,))
        return inserted

    # -- failure sets, MLP scan, explorations ------------------------------------------------------

    def create_failure_set(self, run_id: int, name: str, probe: str | None,
                           question_ids: Iterable[int]) -> int:
        """Freeze a named question set for the run (e.g. "failure:routes"). Refuses an existing name:
        a set is never recomputed in place."""
        ids = sorted({int(q) for q in question_ids})
        with self._write():
            run = self.db.execute("SELECT protocol_hash FROM runs WHERE id = ?", (run_id,)).fetchone()
            if run is None:
                raise ReachError(f"no run {run_id} in {self.path}")
            if self.db.execute("SELECT 1 FROM failure_sets WHERE run_id = ? AND name = ?",
                               (run_id, name)).fetchone():
                raise ReachError(f"failure set {name!r} of run {run_id} already exists; sets are frozen "
                                 f"(start a new run to make new sets)")
            set_id = self.db.execute(
                "INSERT INTO failure_sets (run_id, name, probe, protocol_hash, size) VALUES (?, ?, ?, ?, ?)",
                (run_id, name, probe, run[0], len(ids))).lastrowid
            self.conn.executemany("INSERT INTO failure_set_members (set_id, question_id) VALUES (?, ?)",
                                     ((set_id, q) for q in ids))
        return set_id

    def freeze_failure_sets(self, run_id: int, probes: Iterable[str]) -> dict[str, dict]:
        """Freeze `failure:<probe>` (reachable under the probe, realized wrong) for each probe that has no
        set yet, in one transaction; returns {name: set row} for every probe, new or already frozen. The
        audit and the importer both freeze through here."""
        from reachtui.outcomes import failure_set_name

        out = {}
        with self._write():
            for probe in probes:
                name = failure_set_name(probe)
                if self.get_failure_set(run_id, name) is None:
                    self.create_failure_set(run_id, name, probe, self.failure_candidates(run_id, probe))
                out[name] = self.get_failure_set(run_id, name)
        return out

    def write_outcomes(self, run_id: int, rows: Sequence[tuple], *, fold: str, seen: tuple[int, int | None],
                       logprobs: Iterable[str]) -> None:
        """Store a finished run's pass (`reachtui.control.outcome_rows`), replacing any earlier one, with what
        it saw: its definitions `fold`, the (count, last id) of the attempts it read, the probes with
        log-probs."""
        with self._write():
            self.conn.execute("DELETE FROM outcome_runs WHERE run_id = ?", (run_id,))
            self.conn.execute("DELETE FROM outcomes WHERE run_id = ?", (run_id,))
            self.conn.executemany(
                "INSERT INTO outcomes (run_id, probe, question_id, n, hits, no_answer, answers, control_hits, "
                "control_first, first_hit, vote, logprob) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, *r) for r in rows])
            self.conn.execute("INSERT INTO outcome_runs (run_id, fold, attempts, last_attempt, logprobs) "
                              "VALUES (?, ?, ?, ?, ?)", (run_id, fold, *seen, json.dumps(sorted(logprobs))))

    def write_mlp_scan(self, run_id: int, rows: Iterable[Mapping[str, Any]]) -> None:
        """Upsert MLP-scan rows: each has layer, set_id, failure_n, repaired, realized_n, broken
        (repair_rate / break_rate computed when absent; None when the denominator is 0)."""
        values = []
        for r in rows:
            fn, rn = int(r["failure_n"]), int(r["realized_n"])
            repair = r.get("repair_rate", r["repaired"] / fn if fn else None)
            brk = r.get("break_rate", r["broken"] / rn if rn else None)
            values.append((run_id, int(r["set_id"]), int(r["layer"]), fn, int(r["repaired"]), rn,
                           int(r["broken"]), repair, brk))
        with self._write():
            self.conn.executemany(
                "INSERT INTO mlp_scan (run_id, set_id, layer, failure_n, repaired, realized_n, broken, "
                "repair_rate, break_rate) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(run_id, set_id, layer) DO UPDATE SET failure_n = excluded.failure_n, "
                "repaired = excluded.repaired, realized_n = excluded.realized_n, broken = excluded.broken, "
                "repair_rate = excluded.repair_rate, break_rate = excluded.break_rate", values)

    def create_exploration(self, run_id: int, name: str, *, target: str, route: str | None = None,
                           silenced: str | None = None, n: int = 0) -> int:
        """A new exploration (an intervention applied to a set); its attempts use probe "explore:<id>"."""
        with self._write():
            return self.db.execute(
                "INSERT INTO explorations (run_id, name, route, silenced, target, n) VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, name, route, silenced, target, n)).lastrowid

    def update_exploration(self, exploration_id: int, *, n: int | None = None, repaired: int | None = None,
                           broken: int | None = None, status: str | None = None) -> None:
        """Update an exploration's live counts and/or status (None leaves a field as it is)."""
        if status is not None and status not in RUN_STATUSES:
            raise ValueError(f"exploration status must be one of {RUN_STATUSES}, not {status!r}")
        with self._write():
            cur = self.db.execute(
                f"UPDATE explorations SET n = coalesce(?, n), repaired = coalesce(?, repaired), "
                f"broken = coalesce(?, broken), status = coalesce(?, status), updated_at = {NOW} WHERE id = ?",
                (n, repaired, broken, status, exploration_id))
            if cur.rowcount == 0:
                raise ReachError(f"no exploration {exploration_id} in {self.path}")


def _meta_json(meta) -> str | None:
    """A question's metadata ((key, value) pairs) as its stored form: a JSON object, NULL when it has none."""
    import json

    return json.dumps(dict(meta), ensure_ascii=False, sort_keys=True) if meta else None
