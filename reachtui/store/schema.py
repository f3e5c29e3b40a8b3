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
from it without sorting them (`reachtui.store.outcomes.ANSWER_GROUPS_SQL`). Versions that differ only in indexes
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

Version 5 gives runs.id AUTOINCREMENT (the runs table is rebuilt, its rows and ids kept): a run id is never
given twice, not even after a run was deleted, so attempts left behind by a run deleted outside reachtui
can never be adopted by a new run of the same id. Readers read version 2-4 stores as they are.

Version 6 adds questions.meta: the task's other columns of a question (subject, level, ...; a JSON object, NULL
when it has none), which the questions table shows as `meta_<key>` columns, the app in its detail and its
filters. Readers read version 2-5 stores as they are (their questions have no metadata).

Version 7 adds the questions a run leaves out because their prompts do not fit the model's positions
(`--skip-long`: `reachtui.engine.fits`), with the prompt's tokens (NULL: over by its characters alone, not
tokenized); they are not in run_questions, and every table says how many there are:

    skipped_questions(run_id->runs, question_id->questions, prompt_tokens, PK(run_id, question_id))

Readers read version 2-6 stores as they are (their runs left nothing out).

Version 8 renames the models of PEFT adapter runs from `BASE+/the/adapter/path` to `BASE+FOLDER#DIGEST`
(`reachtui.model_names`: readable, and still one model per adapter folder), so an adapter audited before
resumes and is found by its new name. Only rows whose stored path is the path in the name are renamed;
readers read older stores as they are (the old names).

A store is checked when it is opened (`check_shape`, a few milliseconds): the tables, columns and triggers
its version must have (`SHAPE`) and a version from 1 to SCHEMA_VERSION; a writer also checks its foreign
keys (`check_references`: a row whose run, question or task is not there, left by a delete made with
foreign keys off, as the sqlite3 shell has them). A store that fails either is damaged: nothing is written
to it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from reachtui.errors import DamagedStore, ReachError

if TYPE_CHECKING:
    from sqlite_utils import Database

SCHEMA_VERSION = 8
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

#: The columns of a run every schema version has (version 5 rebuilt the table with AUTOINCREMENT ids and
#: batch_size: `_SCHEMA_V5`).
_RUN_COLUMNS = f"""model_id INTEGER NOT NULL REFERENCES models(id),
    task_id INTEGER NOT NULL REFERENCES tasks(id),
    protocol_json TEXT NOT NULL, protocol_hash TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running' CHECK (status IN {RUN_STATUSES}),
    source TEXT NOT NULL DEFAULT 'audit' CHECK (source IN {RUN_SOURCES}),
    n_questions INTEGER NOT NULL DEFAULT 0, limit_n INTEGER,
    created_at TEXT NOT NULL DEFAULT ({NOW}), updated_at TEXT NOT NULL DEFAULT ({NOW}), finished_at TEXT,
    reachtui_version TEXT, torch_version TEXT, transformers_version TEXT, device TEXT, dtype TEXT, note TEXT"""

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
    {_RUN_COLUMNS});
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


_SCHEMA_V5 = f"""
CREATE TABLE runs_v5 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    {_RUN_COLUMNS},
    batch_size INTEGER);
INSERT INTO runs_v5 SELECT id, model_id, task_id, protocol_json, protocol_hash, status, source, n_questions, limit_n,
    created_at, updated_at, finished_at, reachtui_version, torch_version, transformers_version, device, dtype, note,
    batch_size FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v5 RENAME TO runs;
CREATE INDEX runs_lookup ON runs (model_id, task_id, protocol_hash);
"""


_SCHEMA_V6 = """
ALTER TABLE questions ADD COLUMN meta TEXT;
"""


_SCHEMA_V7 = """
CREATE TABLE skipped_questions (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    question_id INTEGER NOT NULL REFERENCES questions(id),
    prompt_tokens INTEGER,
    PRIMARY KEY (run_id, question_id)) WITHOUT ROWID;
"""


def _statements(sql: str) -> Callable[[Database], None]:
    """A migration that runs each statement of `sql` in order."""
    def run(db: Database) -> None:
        for statement in sql.split(";\n"):
            if statement.strip():
                db.conn.execute(statement)
    return run


def _rename_adapters(db: Database) -> None:
    """Version 8: adapter models under their readable names (`reachtui.model_names.renamed_adapter`); a name
    already taken is left as it was."""
    from reachtui.model_names import renamed_adapter

    taken = {name for (name,) in db.conn.execute("SELECT name FROM models")}
    for model_id, name, path in db.conn.execute("SELECT id, name, path FROM models").fetchall():
        new = renamed_adapter(name, path)
        if new is not None and new not in taken:
            db.conn.execute("UPDATE models SET name = ? WHERE id = ?", (new, model_id))
            taken.add(new)


def _migrate_to_1(db: Database) -> None:
    _statements(_SCHEMA_V1)(db)
    db["questions"].enable_fts(["question"], create_triggers=True)
    db["attempts"].enable_fts(["text"], create_triggers=True)
    db.conn.execute("INSERT INTO meta (key, value) VALUES ('app', ?)", (APP_NAME,))


#: version -> function bringing a store from version-1 to version (run inside one IMMEDIATE transaction).
MIGRATIONS = {1: _migrate_to_1, 2: _statements(_SCHEMA_V2), 3: _statements(_SCHEMA_V3), 4: _statements(_SCHEMA_V4),
              5: _statements(_SCHEMA_V5), 6: _statements(_SCHEMA_V6),
              7: _statements(_SCHEMA_V7), 8: _rename_adapters}

_FTS = {"": (), "_data": ("id", "block"), "_idx": ("segid", "term", "pgno"), "_docsize": ("id", "sz"),
        "_config": ("k", "v")}

#: What each version adds that reachtui reads or writes: {table: columns} and triggers (columns a later
#: version drops are left out: no reader needs them). A store of version v holds SHAPE[1..v]; `check_shape`.
SHAPE: dict[int, tuple[dict[str, tuple[str, ...]], tuple[str, ...]]] = {
    1: ({"meta": ("key", "value"),
         "models": ("id", "name", "path", "model_class", "num_layers"),
         "tasks": ("id", "name", "path", "sha256", "n_questions"),
         "questions": ("id", "task_id", "qid", "idx", "question", "gold", "solution"),
         "runs": ("id", "model_id", "task_id", "protocol_json", "protocol_hash", "status", "source", "n_questions",
                  "limit_n", "created_at", "updated_at", "finished_at", "reachtui_version", "torch_version",
                  "transformers_version", "device", "dtype", "note"),
         "run_questions": ("run_id", "question_id"),
         "attempts": ("id", "run_id", "question_id", "probe", "attempt", "route", "silenced", "text", "answer", "rule",
                      "correct", "mean_logprob", "new_tokens", "layers_executed", "compute"),
         "failure_sets": ("id", "run_id", "name", "probe", "protocol_hash", "size", "created_at"),
         "failure_set_members": ("set_id", "question_id"),
         "mlp_scan": ("run_id", "set_id", "layer", "failure_n", "repaired", "realized_n", "broken", "repair_rate",
                      "break_rate"),
         "explorations": ("id", "run_id", "name", "route", "silenced", "target", "n", "repaired", "broken", "status",
                          "created_at", "updated_at"),
         **{f"{t}_fts{part}": tuple(c.format(column) for c in cols)
            for t, column in (("questions", "question"), ("attempts", "text")) for part, cols in _FTS.items()}},
        ("failure_sets_frozen", "failure_set_members_frozen", "questions_ai", "questions_ad", "questions_au",
         "attempts_ai", "attempts_ad", "attempts_au")),
    2: ({"runs": ("batch_size",), "run_events": ("id", "run_id", "kind", "detail", "created_at")}, ()),
    4: ({"outcomes": ("run_id", "probe", "question_id", "n", "hits", "no_answer", "answers", "control_hits",
                      "control_first", "first_hit", "vote", "logprob"),
         "outcome_runs": ("run_id", "fold", "attempts", "last_attempt", "logprobs")},
        ("attempts_updated_outcomes", "attempts_deleted_outcomes")),
    6: ({"questions": ("meta",)}, ()),
    7: ({"skipped_questions": ("run_id", "question_id", "prompt_tokens")}, ()),
}


def shape_of(version: int) -> tuple[dict[str, set[str]], set[str]]:
    """({table: columns}, triggers) a store of `version` must hold (SHAPE[1..version])."""
    tables: dict[str, set[str]] = {}
    triggers: set[str] = set()
    for v in range(1, version + 1):
        added, trig = SHAPE.get(v, ({}, ()))
        for table, columns in added.items():
            tables.setdefault(table, set()).update(columns)
        triggers.update(trig)
    return tables, triggers


#: What a damaged shape or version can be recovered from (`.recover` copies the same shape).
SHAPE_HINT = ("it was changed outside reachtui: restore it from a backup, or give another --store "
              "(a new file starts an empty store)")


def check_shape(conn: sqlite3.Connection, path: Path, version: int) -> None:
    """DamagedStore (nothing is written to it) when a reachtui store of `version` lacks a table, a column or a
    trigger it must have, or its version is not one this reachtui knows (below 1). Reads sqlite_master and
    the tables' column lists only: milliseconds."""
    if version < 1:
        raise DamagedStore(path, f"its schema version is {version}", hint=SHAPE_HINT)
    tables, triggers = shape_of(min(version, SCHEMA_VERSION))
    present, virtual = {}, set()
    for name, kind, sql in conn.execute("SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'trigger')"):
        present[name] = kind
        if (sql or "").upper().startswith("CREATE VIRTUAL TABLE"):
            virtual.add(name)      # its columns are read by connecting to it (FTS5 reads its pages): not here
    missing = sorted(t for t in tables if present.get(t) != "table")
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DamagedStore(path, f"table {missing[0]} is missing{more}", hint=SHAPE_HINT)
    for table, columns in sorted(tables.items()):
        if table in virtual:
            continue
        have = {r[1] for r in conn.execute(f"PRAGMA table_info([{table}])")}
        lacking = sorted(columns - have)
        if lacking:
            raise DamagedStore(path, f"table {table} lacks column {', '.join(lacking)}", hint=SHAPE_HINT)
    gone = sorted(t for t in triggers if present.get(t) != "trigger")
    if gone:
        raise DamagedStore(path, f"trigger {gone[0]} is missing (it keeps the store consistent)", hint=SHAPE_HINT)


def check_references(conn: sqlite3.Connection, path: Path) -> None:
    """DamagedStore when a row refers to a run, question, task or set that is not there (`PRAGMA
    foreign_key_check`: rows left by a delete made with foreign keys off); the hint is the statement that
    deletes those rows. One pass over the tables, like `PRAGMA quick_check`."""
    found: dict[tuple[str, str, int], int] = {}
    for table, _rowid, parent, fkid in conn.execute("PRAGMA foreign_key_check"):
        found[table, parent, fkid] = found.get((table, parent, fkid), 0) + 1
    if not found:
        return
    fixes, what = [], []
    for (table, parent, fkid), n in sorted(found.items()):
        column = next(r[3] for r in conn.execute(f"PRAGMA foreign_key_list([{table}])") if r[0] == fkid)
        what.append(f"{n} row(s) of {table} refer to a {parent} row that is not there ({column})")
        fixes.append(f"DELETE FROM {table} WHERE {column} NOT IN (SELECT id FROM {parent})")
    raise DamagedStore(path, "; ".join(what), hint=(
        f"rows were left behind by a delete made with foreign keys off. Delete them with: sqlite3 {path} "
        f"\"PRAGMA foreign_keys = ON; {'; '.join(fixes)}\", then run the command again"))


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
    text = str(meta["schema_version"]).strip()
    if not re.fullmatch(r"-?[0-9]{1,18}", text):
        raise DamagedStore(path, f"its schema version {meta['schema_version']!r} is not a number", hint=SHAPE_HINT)
    return int(text)


def opened_version(conn: sqlite3.Connection, path: Path) -> int:
    """The schema version of the store at `path` (0: an empty database), checked as it is opened: ReachError
    for an SQLite file that is not a reachtui store or one newer than this reachtui; DamagedStore for a store
    without the shape of its version (`check_shape`)."""
    version = schema_version(conn, path)
    if version > SCHEMA_VERSION:
        raise ReachError(f"the audit store {path} has schema version {version}, newer than this "
                         f"reachtui understands ({SCHEMA_VERSION}); upgrade reachtui")
    if version != 0:
        check_shape(conn, path, version)
    return version


def migrate(conn: sqlite3.Connection, db: Callable[[], Database], path: Path, version: int, *,
            readonly: bool) -> None:
    """Bring the store from `version` (`opened_version`) to SCHEMA_VERSION (a writer, in one IMMEDIATE
    transaction: other writers wait, then see the new version; `db()` gives the sqlite-utils view the
    migrations use); a reader only checks, and reads a store from READABLE_FROM on as it is. ReachError for
    one a reader cannot use."""
    if version == SCHEMA_VERSION:
        return
    if readonly:
        if version == 0:
            raise ReachError(f"no audit store at {path} (the file is empty)")
        if version >= READABLE_FROM:
            return
        raise ReachError(f"the audit store {path} has schema version {version}; open it once "
                         f"for writing to migrate it to version {SCHEMA_VERSION}")
    conn.execute("PRAGMA foreign_keys = OFF")     # version 5 rebuilds the runs table its children refer to
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
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
