"""The audit store's schema and its migrations (SQLite, real foreign keys, so sqlite-utils and datasette
can follow them). Timestamps are UTC ISO-8601 text; children of a run are deleted with it.

Version 2:

    meta(key PK, value)                         schema_version, app = "reachtui"
    models(id, name UNIQUE, path, model_class, num_layers)
    tasks(id, name, path, sha256 UNIQUE, n_questions)
    questions(id, task_id->tasks, qid, idx, question, gold, solution, UNIQUE(task_id, qid))
    runs(id, model_id->models, task_id->tasks, protocol_json, protocol_hash, status, source, n_questions,
         limit_n, created_at, updated_at, finished_at, reachtui_version, torch_version,
         transformers_version, device, dtype, note, batch_size)
         status in running|complete|failed|cancelled; source in audit|import; batch_size: prompts per
         generation job (an audit resumes with it, so its batches and numbers come out the same)
    run_events(id, run_id->runs, kind, detail, created_at)   what happened to a run besides its attempts:
         "batch_size" (chosen, and why), "out_of_memory" (the batch was halved, never a crash)
    run_questions(run_id->runs, question_id->questions, PK(run_id, question_id))   the run's question set
    attempts(id, run_id->runs, question_id->questions, probe, attempt, route, silenced, temperature, seed,
             text, answer, rule, correct, mean_logprob, new_tokens, layers_executed, compute, created_at,
             UNIQUE(run_id, question_id, probe, attempt))      (version 4 drops temperature, seed, created_at)
         probe: "realized" (one attempt, index 0), "sample", "routes", "mcts", "mcts-blind",
         "mlp:<L>" (default decoding with MLP L silenced), "explore:<exploration id>".
         route: text form ("0-3,3,5-11"), NULL = normal order; silenced: "3,5" or NULL; correct: 0/1.
    failure_sets(id, run_id->runs, name, probe, protocol_hash, size, created_at, UNIQUE(run_id, name))
    failure_set_members(set_id->failure_sets, question_id->questions, PK)   frozen: never updated
    mlp_scan(run_id->runs, set_id->failure_sets, layer, failure_n, repaired, realized_n, broken,
             repair_rate, break_rate, PK(run_id, set_id, layer))
    explorations(id, run_id->runs, name, route, silenced, target, n, repaired, broken, status,
                 created_at, updated_at)        target: "failure:<probe>" | "realized" | ...
    questions_fts(question), attempts_fts(text)  FTS5 over those columns, kept in sync by triggers

Version 3 adds the covering index attempts_by_answer (run_id, probe, question_id, answer, attempt, correct,
mean_logprob): the tables' one pass per run groups a run's attempts by (probe, question, extracted answer)
from it without sorting them (`reachtui.outcomes.ANSWER_GROUPS_SQL`). Versions that differ only in indexes
read alike, so a reader opens a version-2 store as it is (slower); a writer adds the index.

Version 4 keeps only what cannot be recomputed (about 190 -> 135 bytes per attempt at K = 1024):
attempts loses temperature and seed (the protocol gives both: `Protocol.decoding_of` and
`seeds.attempt_seed`, the very functions the engine decodes with; an export computes them) and
created_at (the run's created/updated times remain), and the index attempts_by_probe goes (attempts_by_answer
covers every query it served). Readers never read the dropped columns, so they still open version 2 and 3
stores as they are; a writer migrates (a rewrite of the attempts table; VACUUM returns the space).
`answer`, `rule` and `correct` stay although the grader could recompute them: every table aggregates them,
and grading is milliseconds per attempt. Version 4 also stores the tables' one pass over a finished run
(`reachtui.control.run_control`), so that tables of millions of attempts read one row per (probe, question):

    outcomes(run_id->runs, probe, question_id, n, hits, no_answer, answers, control_hits, control_first,
             first_hit, vote, logprob, PK(run_id, probe, question_id))   a `control.Scatter` each
    outcome_runs(run_id->runs PK, fold, attempts, last_attempt, logprobs)   what the pass saw: its
             definitions (`control.FOLD`), the count and last id of the attempts it read, the probes with
             log-probs (JSON)

A reader uses them only while they still describe the attempts (same definitions, same count and last id;
attempts are only ever added, and a trigger forgets a run's pass when one of its attempts is changed or
deleted); otherwise it makes the pass itself, as for an older store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from reachtui.errors import ReachError

if TYPE_CHECKING:
    from sqlite_utils import Database

SCHEMA_VERSION = 4
#: A reader opens stores from this version on without migrating them (later versions add indexes and drop
#: columns no reader reads).
READABLE_FROM = 2
APP_NAME = "reachtui"
RUN_STATUSES = ("running", "complete", "failed", "cancelled")
RUN_SOURCES = ("audit", "import")
FINISHED_STATUSES = ("complete", "failed", "cancelled")
NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

#: Columns of `attempts` a caller may give in `insert_attempts` rows (question_id, probe, attempt required).
ATTEMPT_COLUMNS = (
    "question_id", "probe", "attempt", "route", "silenced", "text", "answer", "rule", "correct",
    "mean_logprob", "new_tokens", "layers_executed", "compute",
)

_SCHEMA_V1 = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE models (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, path TEXT, model_class TEXT, num_layers INTEGER);
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, path TEXT, sha256 TEXT NOT NULL UNIQUE,
    n_questions INTEGER NOT NULL);
CREATE TABLE questions (
    id INTEGER PRIMARY KEY,
    task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    qid TEXT NOT NULL, idx INTEGER NOT NULL, question TEXT NOT NULL, gold TEXT NOT NULL, solution TEXT,
    UNIQUE (task_id, qid));
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    model_id INTEGER NOT NULL REFERENCES models(id),
    task_id INTEGER NOT NULL REFERENCES tasks(id),
    protocol_json TEXT NOT NULL, protocol_hash TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running' CHECK (status IN {RUN_STATUSES}),
    source TEXT NOT NULL DEFAULT 'audit' CHECK (source IN {RUN_SOURCES}),
    n_questions INTEGER NOT NULL DEFAULT 0, limit_n INTEGER,
    created_at TEXT NOT NULL DEFAULT ({NOW}), updated_at TEXT NOT NULL DEFAULT ({NOW}), finished_at TEXT,
    reachtui_version TEXT, torch_version TEXT, transformers_version TEXT, device TEXT, dtype TEXT, note TEXT);
CREATE INDEX runs_lookup ON runs (model_id, task_id, protocol_hash);
CREATE TABLE run_questions (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    question_id INTEGER NOT NULL REFERENCES questions(id),
    PRIMARY KEY (run_id, question_id)) WITHOUT ROWID;
CREATE TABLE attempts (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    question_id INTEGER NOT NULL REFERENCES questions(id),
    probe TEXT NOT NULL, attempt INTEGER NOT NULL,
    route TEXT, silenced TEXT, temperature REAL, seed INTEGER,
    text TEXT, answer TEXT, rule TEXT, correct INTEGER,
    mean_logprob REAL, new_tokens INTEGER, layers_executed INTEGER, compute INTEGER,
    created_at TEXT NOT NULL DEFAULT ({NOW}),
    UNIQUE (run_id, question_id, probe, attempt));
CREATE INDEX attempts_by_probe ON attempts (run_id, probe, question_id, attempt, correct);
CREATE TABLE failure_sets (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL, probe TEXT, protocol_hash TEXT NOT NULL, size INTEGER NOT NULL,
    created_at TEXT NOT NULL DEFAULT ({NOW}),
    UNIQUE (run_id, name));
CREATE TABLE failure_set_members (
    set_id INTEGER NOT NULL REFERENCES failure_sets(id) ON DELETE CASCADE,
    question_id INTEGER NOT NULL REFERENCES questions(id),
    PRIMARY KEY (set_id, question_id)) WITHOUT ROWID;
CREATE TRIGGER failure_sets_frozen BEFORE UPDATE ON failure_sets
    BEGIN SELECT RAISE(ABORT, 'failure sets are frozen'); END;
CREATE TRIGGER failure_set_members_frozen BEFORE UPDATE ON failure_set_members
    BEGIN SELECT RAISE(ABORT, 'failure sets are frozen'); END;
CREATE TABLE mlp_scan (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    set_id INTEGER NOT NULL REFERENCES failure_sets(id) ON DELETE CASCADE,
    layer INTEGER NOT NULL,
    failure_n INTEGER NOT NULL, repaired INTEGER NOT NULL, realized_n INTEGER NOT NULL, broken INTEGER NOT NULL,
    repair_rate REAL, break_rate REAL,
    PRIMARY KEY (run_id, set_id, layer));
CREATE TABLE explorations (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL, route TEXT, silenced TEXT, target TEXT NOT NULL,
    n INTEGER NOT NULL DEFAULT 0, repaired INTEGER NOT NULL DEFAULT 0, broken INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'running' CHECK (status IN {RUN_STATUSES}),
    created_at TEXT NOT NULL DEFAULT ({NOW}), updated_at TEXT NOT NULL DEFAULT ({NOW}));
CREATE INDEX explorations_by_run ON explorations (run_id);
"""


_SCHEMA_V2 = f"""
ALTER TABLE runs ADD COLUMN batch_size INTEGER;
CREATE TABLE run_events (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind TEXT NOT NULL, detail TEXT,
    created_at TEXT NOT NULL DEFAULT ({NOW}));
CREATE INDEX run_events_by_run ON run_events (run_id);
"""


_SCHEMA_V3 = """
CREATE INDEX IF NOT EXISTS attempts_by_answer ON attempts (run_id, probe, question_id, answer, attempt, correct, mean_logprob);
"""


_SCHEMA_V4 = """
DROP INDEX IF EXISTS attempts_by_probe;
ALTER TABLE attempts DROP COLUMN temperature;
ALTER TABLE attempts DROP COLUMN seed;
ALTER TABLE attempts DROP COLUMN created_at;
CREATE TABLE outcomes (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    probe TEXT NOT NULL, question_id INTEGER NOT NULL,
    n INTEGER NOT NULL, hits INTEGER NOT NULL, no_answer INTEGER NOT NULL, answers INTEGER NOT NULL,
    control_hits INTEGER NOT NULL, control_first INTEGER, first_hit INTEGER, vote INTEGER, logprob INTEGER,
    PRIMARY KEY (run_id, probe, question_id)) WITHOUT ROWID;
CREATE TABLE outcome_runs (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    fold TEXT NOT NULL, attempts INTEGER NOT NULL, last_attempt INTEGER, logprobs TEXT NOT NULL);
CREATE TRIGGER attempts_updated_outcomes AFTER UPDATE ON attempts
    BEGIN DELETE FROM outcome_runs WHERE run_id IN (old.run_id, new.run_id); END;
CREATE TRIGGER attempts_deleted_outcomes AFTER DELETE ON attempts
    BEGIN DELETE FROM outcome_runs WHERE run_id = old.run_id; END;
"""


def _statements(sql: str) -> Callable[[Database], None]:
    """A migration that runs each statement of `sql` in order."""
    def run(db: Database) -> None:
        for statement in sql.split(";\n"):
            if statement.strip():
                db.conn.execute(statement)
    return run


def _migrate_to_1(db: Database) -> None:
    _statements(_SCHEMA_V1)(db)
    db["questions"].enable_fts(["question"], create_triggers=True)
    db["attempts"].enable_fts(["text"], create_triggers=True)
    db.conn.execute("INSERT INTO meta (key, value) VALUES ('app', ?)", (APP_NAME,))


#: version -> function bringing a store from version-1 to version (run inside one IMMEDIATE transaction).
MIGRATIONS = {1: _migrate_to_1, 2: _statements(_SCHEMA_V2), 3: _statements(_SCHEMA_V3), 4: _statements(_SCHEMA_V4)}


def schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """0 for an empty database; ReachError for an SQLite file that is not a reachtui store."""
    names = {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    if not names:
        return 0
    if "meta" not in names:
        raise ReachError(f"{path} is an SQLite database but not a reachtui store")
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("app") != APP_NAME or "schema_version" not in meta:
        raise ReachError(f"{path} is an SQLite database but not a reachtui store")
    try:
        return int(meta["schema_version"])
    except ValueError:
        raise ReachError(f"{path} has a malformed schema version {meta['schema_version']!r}") from None


def migrate(conn: sqlite3.Connection, db: Callable[[], Database], path: Path, *, readonly: bool) -> None:
    """Bring the store to SCHEMA_VERSION (a writer, in one IMMEDIATE transaction: other writers wait, then see
    the new version; `db()` gives the sqlite-utils view the migrations use); a reader only checks, and reads a
    store from READABLE_FROM on as it is. ReachError for a store newer than this reachtui, or one a reader
    cannot use."""
    version = schema_version(conn, path)
    if version > SCHEMA_VERSION:
        raise ReachError(f"the audit store {path} has schema version {version}, newer than this "
                         f"reachtui understands ({SCHEMA_VERSION}); upgrade reachtui")
    if version == SCHEMA_VERSION:
        return
    if readonly:
        if version == 0:
            raise ReachError(f"no audit store at {path} (the file is empty)")
        if version >= READABLE_FROM:
            return
        raise ReachError(f"the audit store {path} has schema version {version}; open it once "
                         f"for writing to migrate it to version {SCHEMA_VERSION}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        for target in range(schema_version(conn, path) + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[target](db())
            conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                         "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(target),))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
