"""Read queries of the audit store (mixed into `reachtui.store.Store`). Pure Python, plain SQL.

Every query here is answered by SQLite from an index (no Python loop over a run's attempts). Rows come
back as plain dicts. Definitions used throughout (see DESIGN.md):

- realized: the question's "realized" attempt (index 0) is correct; None while it has not run.
- reachable under a probe: some attempt of that probe is correct; first_hit = the lowest such index.
- failure set of a probe: reachable under it and (known) not realized.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from reachtui.errors import ReachError

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

_PROBE_ORDER = {"realized": 0, "sample": 1, "routes": 2, "mcts": 3, "mcts-blind": 4}


def probe_sort_key(probe: str) -> tuple:
    """realized, sample, routes, mcts, mcts-blind, then mlp:<L> by L, explore:<id> by id, then the rest."""
    if probe in _PROBE_ORDER:
        return (0, _PROBE_ORDER[probe], 0, "")
    kind, _, arg = probe.partition(":")
    rank = {"mlp": 1, "explore": 2}.get(kind, 3)
    return (rank, 0, int(arg) if arg.isdigit() else -1, probe)


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
              (SELECT count(*) FROM attempts a WHERE a.run_id = r.id AND a.probe = 'realized'
                 AND a.attempt = 0) AS n_realized_done,
              (SELECT count(*) FROM attempts a WHERE a.run_id = r.id AND a.probe = 'realized'
                 AND a.attempt = 0 AND a.correct = 1) AS n_realized
            FROM runs r JOIN models m ON m.id = r.model_id JOIN tasks t ON t.id = r.task_id
            ORDER BY r.id""")

    def run_events(self, run_id: int) -> list[dict]:
        """The run's events (batch size chosen, out-of-memory halvings), oldest first."""
        cur = self.conn.execute("SELECT kind, detail, created_at FROM run_events WHERE run_id = ? ORDER BY id",
                                (int(run_id),))
        return [dict(zip(("kind", "detail", "created_at"), row)) for row in cur]

    def get_run(self, run_id: int) -> dict:
        """The run row with its model's and task's fields; ReachError if there is no such run."""
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
        return sorted((r[0] for r in rows), key=probe_sort_key)

    def question_status(self, run_id: int, probes: list[str] | tuple[str, ...] | None = None) -> list[dict]:
        """One row per (question, probe) with attempts: question_id, probe, n (attempts), n_correct,
        first_hit (lowest correct attempt index, None if none), reachable (n_correct > 0) and realized
        (the question's realized attempt is correct; None while it has not run). One GROUP BY query."""
        sql = """
            SELECT question_id, probe, count(*) AS n, coalesce(sum(correct), 0) AS n_correct,
                   min(CASE WHEN correct = 1 THEN attempt END) AS first_hit,
                   max(max(CASE WHEN probe = 'realized' AND attempt = 0 THEN correct END))
                     OVER (PARTITION BY question_id) AS realized
            FROM attempts WHERE run_id = ? GROUP BY probe, question_id"""
        params: list[Any] = [run_id]
        if probes is not None:
            sql = f"SELECT * FROM ({sql}) WHERE probe IN ({', '.join('?' * len(probes))})"
            params += list(probes)
        cur = self.conn.execute(sql + " ORDER BY question_id, probe", params)
        return [{"question_id": q, "probe": p, "n": n, "n_correct": c, "first_hit": f,
                 "reachable": c > 0, "realized": None if r is None else bool(r)}
                for q, p, n, c, f, r in cur]

    def probe_summary(self, run_id: int) -> list[dict]:
        """Per probe with attempts: n_questions (with ≥1 attempt of it), reachable, realized (of those
        questions, realized correct), failure (reachable and realized known wrong), n_attempts,
        n_correct. Probes in display order."""
        rows = self._rows("""
            WITH s AS (
              SELECT question_id, probe, max(coalesce(correct, 0)) AS hit, count(*) AS n,
                     coalesce(sum(correct), 0) AS c
              FROM attempts WHERE run_id = :run GROUP BY probe, question_id),
            r AS (SELECT question_id, correct FROM attempts
                  WHERE run_id = :run AND probe = 'realized' AND attempt = 0)
            SELECT s.probe, count(*) AS n_questions, sum(s.hit) AS reachable,
                   coalesce(sum(r.correct = 1), 0) AS realized,
                   coalesce(sum(s.hit = 1 AND r.correct = 0), 0) AS failure,
                   sum(s.n) AS n_attempts, sum(s.c) AS n_correct
            FROM s LEFT JOIN r ON r.question_id = s.question_id
            GROUP BY s.probe""", {"run": run_id})
        return sorted(rows, key=lambda row: probe_sort_key(row["probe"]))

    def failure_candidates(self, run_id: int, probe: str) -> list[int]:
        """Question ids reachable under `probe` whose realized attempt is wrong, in task order (what
        `create_failure_set(run_id, f"failure:{probe}", probe, ...)` freezes)."""
        return [r[0] for r in self.conn.execute("""
            SELECT a.question_id FROM attempts a
            JOIN attempts r ON r.run_id = a.run_id AND r.question_id = a.question_id
                            AND r.probe = 'realized' AND r.attempt = 0 AND r.correct = 0
            JOIN questions q ON q.id = a.question_id
            WHERE a.run_id = ? AND a.probe = ?
            GROUP BY a.question_id HAVING max(a.correct) = 1 ORDER BY q.idx""", (run_id, probe))]

    def realized_ids(self, run_id: int) -> list[int]:
        """Question ids whose realized attempt is correct (the realized set an MLP scan breaks), in task
        order."""
        return [r[0] for r in self.conn.execute("""
            SELECT a.question_id FROM attempts a JOIN questions q ON q.id = a.question_id
            WHERE a.run_id = ? AND a.probe = 'realized' AND a.attempt = 0 AND a.correct = 1
            ORDER BY q.idx""", (run_id,))]

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
