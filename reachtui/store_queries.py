"""Read queries of the audit store (mixed into `reachtui.store.Store`): plain SQL, answered from an index,
rows as plain dicts. What realized, reachable and a failure set mean is `reachtui.outcomes`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from reachtui.errors import ReachError
from reachtui.probes.registry import ordered_names, realized_where

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

#: The id of model :model's (by name) most recent complete run (NULL: none).
LATEST_COMPLETE_RUN_SQL = ("SELECT max(r.id) FROM runs r JOIN models m ON m.id = r.model_id "
                           "WHERE m.name = :model AND r.status = 'complete'")


def fts_query(text: str, *, prefix: bool = False) -> str | None:
    """A safe FTS5 MATCH expression: each whitespace-separated chunk (or "quoted phrase") becomes a
    phrase of its word tokens, all phrases ANDed; with `prefix`, the last one matches as a prefix."""
    phrases = []
    for quoted, bare in re.findall(r'"([^"]*)"|(\S+)', text):
        tokens = re.findall(r"\w+", quoted or bare)
        if tokens:
            phrases.append('"' + " ".join(tokens) + '"')
    if not phrases:
        return None
    if prefix:
        phrases[-1] += " *"
    return " ".join(phrases)


_RUN_COLUMNS = """r.id, r.model_id, r.task_id, m.name AS model, t.name AS task, r.status, r.source,
    r.protocol_hash, r.n_questions, r.limit_n, r.batch_size, r.created_at, r.updated_at, r.finished_at"""


class StoreQueries:
    """Read side of `Store` (needs `self.conn: sqlite3.Connection` and `self.path`). Uses the plain
    connection, so a read-only store never imports sqlite-utils (a quarter second of start-up)."""

    conn: sqlite3.Connection
    path: Path

    def _rows(self, sql: str, params: Any = ()) -> list[dict]:
        cur = self.conn.execute(sql, params)
        keys = [d[0] for d in cur.description]
        return [dict(zip(keys, row)) for row in cur]

    def _one(self, sql: str, params: Any = ()) -> dict | None:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    # -- runs --------------------------------------------------------------------------------------

    def list_runs(self) -> list[dict]:
        """Every run, oldest first, with model and task names and attempt counts."""
        return self._rows(f"""
            SELECT {_RUN_COLUMNS},
              (SELECT count(*) FROM attempts a WHERE a.run_id = r.id) AS n_attempts,
              (SELECT count(*) FROM attempts a WHERE a.run_id = r.id AND {realized_where('a')})
                AS n_realized_done,
              (SELECT count(*) FROM attempts a WHERE a.run_id = r.id AND {realized_where('a')}
                 AND a.correct = 1) AS n_realized
            FROM runs r JOIN models m ON m.id = r.model_id JOIN tasks t ON t.id = r.task_id
            ORDER BY r.id""")

    def run_events(self, run_id: int) -> list[dict]:
        """The run's events (batch size chosen, out-of-memory halvings), oldest first."""
        cur = self.conn.execute("SELECT kind, detail, created_at FROM run_events WHERE run_id = ? ORDER BY id",
                                (int(run_id),))
        return [dict(zip(("kind", "detail", "created_at"), row)) for row in cur]

    def get_run(self, run_id: int) -> dict:
        """The run row with its model's and task's fields; ReachError if there is no such run."""
        if not -(2**63) <= int(run_id) < 2**63:        # no SQLite integer: no such run
            raise ReachError(f"no run {run_id} in {self.path}")
        row = self._one("""
            SELECT r.*, m.name AS model, m.path AS model_path, m.model_class, m.num_layers,
                   t.name AS task, t.path AS task_path, t.sha256 AS task_sha256
            FROM runs r JOIN models m ON m.id = r.model_id JOIN tasks t ON t.id = r.task_id
            WHERE r.id = ?""", (int(run_id),))
        if row is None:
            raise ReachError(f"no run {run_id} in {self.path}")
        return row

    def latest_run(self) -> dict | None:
        """The most recently created run (as `get_run`), or None for an empty store."""
        row = self.conn.execute("SELECT max(id) FROM runs").fetchone()
        return None if row[0] is None else self.get_run(row[0])

    def latest_complete_run(self, model: str) -> int | None:
        """The id of the model's (by name) most recent complete run, or None."""
        row = self.conn.execute(LATEST_COMPLETE_RUN_SQL, {"model": model}).fetchone()
        return None if row[0] is None else int(row[0])

    def find_run(self, model_id: int, task_id: int, protocol_hash: str, limit_n: int | None = None,
                 statuses: tuple[str, ...] | list[str] | None = None) -> dict | None:
        """The latest run of (model, task, protocol, limit) with one of `statuses` (any if None)."""
        sql = ("SELECT id FROM runs WHERE model_id = ? AND task_id = ? AND protocol_hash = ? "
               "AND limit_n IS ?")
        params: list[Any] = [model_id, task_id, protocol_hash, limit_n]
        if statuses is not None:
            sql += f" AND status IN ({', '.join('?' * len(statuses))})"
            params += list(statuses)
        row = self.conn.execute(sql + " ORDER BY id DESC LIMIT 1", params).fetchone()
        return None if row is None else self.get_run(row[0])

    def run_ids(self) -> list[int]:
        """Every run's id, oldest first."""
        return [r[0] for r in self.conn.execute("SELECT id FROM runs ORDER BY id")]

    def model_id(self, name: str) -> int | None:
        """The id of the model called `name`, or None."""
        row = self.conn.execute("SELECT id FROM models WHERE name = ?", (name,)).fetchone()
        return None if row is None else int(row[0])

    def task_id(self, sha256: str) -> int | None:
        """The id of the task whose file has this sha256, or None."""
        row = self.conn.execute("SELECT id FROM tasks WHERE sha256 = ?", (sha256,)).fetchone()
        return None if row is None else int(row[0])

    # -- questions ---------------------------------------------------------------------------------

    def task_question_ids(self, task_id: int) -> dict[str, int]:
        """The task's question ids: {qid (the task's own id): question_id (the store's)}."""
        return dict(self.conn.execute("SELECT qid, id FROM questions WHERE task_id = ? ORDER BY idx",
                                         (task_id,)).fetchall())

    def run_questions(self, run_id: int) -> list[dict]:
        """The run's questions in task order: question_id, qid, idx, question, gold, solution."""
        return self._rows("""
            SELECT q.id AS question_id, q.qid, q.idx, q.question, q.gold, q.solution
            FROM run_questions rq JOIN questions q ON q.id = rq.question_id
            WHERE rq.run_id = ? ORDER BY q.idx""", (run_id,))

    # -- attempts ----------------------------------------------------------------------------------

    def attempts(self, run_id: int, question_id: int | None = None, probe: str | None = None) -> list[dict]:
        """Attempts of the run (optionally one question and/or one probe), by question, probe, attempt."""
        sql, params = "SELECT * FROM attempts WHERE run_id = ?", [run_id]
        if question_id is not None:
            sql += " AND question_id = ?"
            params.append(question_id)
        if probe is not None:
            sql += " AND probe = ?"
            params.append(probe)
        return self._rows(sql + " ORDER BY question_id, probe, attempt", params)

    def done_keys(self, run_id: int, probe: str | None = None) -> set[tuple[int, str, int]]:
        """{(question_id, probe, attempt)} already stored for the run (what a resumed audit skips)."""
        sql, params = "SELECT question_id, probe, attempt FROM attempts WHERE run_id = ?", [run_id]
        if probe is not None:
            sql += " AND probe = ?"
            params.append(probe)
        return set(self.conn.execute(sql, params).fetchall())

    def probe_names(self, run_id: int) -> list[str]:
        """The probes that have attempts in the run, in display order (see `probe_sort_key`)."""
        # A loose index scan: one index seek per distinct probe instead of a pass over all attempts.
        rows = self.conn.execute("""
            WITH RECURSIVE p(probe) AS (
              SELECT min(probe) FROM attempts WHERE run_id = :run
              UNION ALL
              SELECT (SELECT min(probe) FROM attempts WHERE run_id = :run AND probe > p.probe)
              FROM p WHERE p.probe IS NOT NULL)
            SELECT probe FROM p WHERE probe IS NOT NULL""", {"run": run_id}).fetchall()
        return ordered_names(r[0] for r in rows)

    def failure_candidates(self, run_id: int, probe: str) -> list[int]:
        """Question ids reachable under `probe` whose realized attempt is wrong, in task order (what
        `freeze_failure_sets` freezes as failure:<probe>)."""
        from reachtui.outcomes import FAILURE_CANDIDATES_SQL

        return [r[0] for r in self.conn.execute(FAILURE_CANDIDATES_SQL, {"run": run_id, "probe": probe})]

    def realized_ids(self, run_id: int) -> list[int]:
        """Question ids whose realized attempt is correct (the realized set an MLP scan breaks), in task
        order."""
        from reachtui.outcomes import REALIZED_IDS_SQL

        return [r[0] for r in self.conn.execute(REALIZED_IDS_SQL, {"run": run_id})]

    # -- failure sets, MLP scan, explorations ------------------------------------------------------

    def failure_sets(self, run_id: int) -> list[dict]:
        """The run's frozen sets: id, run_id, name, probe, protocol_hash, size, created_at."""
        return self._rows("SELECT * FROM failure_sets WHERE run_id = ? ORDER BY id", (run_id,))

    def get_failure_set(self, run_id: int, name: str) -> dict | None:
        return self._one("SELECT * FROM failure_sets WHERE run_id = ? AND name = ?", (run_id, name))

    def failure_set_members(self, set_id: int) -> list[int]:
        """Question ids of a frozen set, in task order."""
        return [r[0] for r in self.conn.execute("""
            SELECT m.question_id FROM failure_set_members m JOIN questions q ON q.id = m.question_id
            WHERE m.set_id = ? ORDER BY q.idx""", (set_id,))]

    def mlp_scan(self, run_id: int, set_id: int | None = None) -> list[dict]:
        """MLP-scan rows (with the set's name as set_name), by set then layer."""
        sql = ("SELECT s.*, f.name AS set_name FROM mlp_scan s JOIN failure_sets f ON f.id = s.set_id "
               "WHERE s.run_id = ?")
        params: list[Any] = [run_id]
        if set_id is not None:
            sql += " AND s.set_id = ?"
            params.append(set_id)
        return self._rows(sql + " ORDER BY s.set_id, s.layer", params)

    def explorations(self, run_id: int) -> list[dict]:
        return self._rows("SELECT * FROM explorations WHERE run_id = ? ORDER BY id", (run_id,))

    def get_exploration(self, exploration_id: int) -> dict:
        row = self._one("SELECT * FROM explorations WHERE id = ?", (exploration_id,))
        if row is None:
            raise ReachError(f"no exploration {exploration_id} in {self.path}")
        return row

    # -- search ------------------------------------------------------------------------------------

    def search(self, run_id: int, text: str, *, prefix: bool = False) -> list[int]:
        """Question ids of the run, in task order, whose question text or some attempt's output of this
        run matches `text` (every word, via FTS5; "quoted" for a phrase), or whose qid equals it."""
        match = fts_query(text, prefix=prefix)
        if match is None:
            return []
        return [r[0] for r in self.conn.execute("""
            SELECT q.id FROM run_questions rq JOIN questions q ON q.id = rq.question_id
            WHERE rq.run_id = :run AND (
              q.qid = :text
              OR q.id IN (SELECT rowid FROM questions_fts WHERE questions_fts MATCH :match)
              OR q.id IN (SELECT a.question_id FROM attempts a WHERE a.run_id = :run AND a.id IN
                            (SELECT rowid FROM attempts_fts WHERE attempts_fts MATCH :match)))
            ORDER BY q.idx""", {"run": run_id, "text": text.strip(), "match": match})]
