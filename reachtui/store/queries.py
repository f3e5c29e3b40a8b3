"""Read queries of the audit store (mixed into `reachtui.store.Store`): runs and their protocols, questions,
attempts, failure sets, the MLP scan, explorations, search. Plain SQL, answered from an index, rows as plain
dicts. What realized, reachable and a failure set mean is `reachtui.outcomes`, asked in `reachtui/store/outcomes.py`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reachtui.errors import ReachError
from reachtui.probes import registry
from reachtui.probes.registry import ordered_names
from reachtui.store.outcomes import realized_where

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from reachtui.protocol import Protocol

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
        """Every run, oldest first, with model and task names, attempt counts and the questions it left out
        (`n_skipped`: prompts over the model's positions, `--skip-long`)."""
        skipped = ("(SELECT count(*) FROM skipped_questions s WHERE s.run_id = r.id)" if self._has_skipped()
                   else "0")
        return self._rows(f"""
            SELECT {_RUN_COLUMNS}, {skipped} AS n_skipped,
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

    def resolve_run(self, spec: str | int | None) -> int:
        """A run id from `spec`: an id; None or "latest" for the most recently created run; or a model's name
        for that model's latest complete run (what `compare`, `open --compare`, `export --run` and `protocol`
        accept alike)."""
        con = self.conn
        if spec is None or str(spec).strip().lower() == "latest":
            row = con.execute("SELECT max(id) FROM runs").fetchone()
            if row[0] is None:
                raise ReachError("the audit store has no runs yet")
            return int(row[0])
        text = str(spec).strip()
        if not (text.isascii() and text.isdigit()):       # a model name ("١" is not run 1: ASCII digits only)
            found = self.latest_complete_run(text)
            if found is not None:
                return found
            models = [m for (m,) in con.execute("SELECT DISTINCT m.name FROM runs r JOIN models m ON m.id = r.model_id "
                                                "WHERE r.status = 'complete' ORDER BY m.name")]
            shown = text if len(text) <= 40 else text[:37] + "..."
            raise ReachError(f"no run {shown!r}: not a run id, 'latest', or a model with a complete run "
                             f"(models: {', '.join(models) or 'none yet'})")
        if len(text.lstrip("0")) > 19:                     # no SQLite integer (and no 4,300-digit conversion)
            raise ReachError(f"no run {text if len(text) <= 40 else text[:37] + '...'} in the audit store")
        run_id = int(text)
        if run_id >= 2**63 or con.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            have = con.execute("SELECT min(id), max(id), count(*) FROM runs").fetchone()
            known = f"runs {have[0]}–{have[1]}" if have[2] else "no runs"
            raise ReachError(f"no run {run_id} in the audit store (it has {known})")
        return run_id

    def resolve_runs(self, specs: Sequence[str | int | None]) -> list[int]:
        """The run ids `specs` name (`resolve_run` each; none given: the latest run), or every run, oldest
        first, for 'all' given alone (`export --run all`, the API's `table(name, "all")`)."""
        if any(isinstance(s, str) and s.strip().lower() == "all" for s in specs):
            if len(specs) > 1:
                raise ReachError("'all' cannot be combined with other runs: it names every run")
            run_ids = self.run_ids()
            if not run_ids:
                raise ReachError("the audit store has no runs yet")
            return run_ids
        return [self.resolve_run(s) for s in (specs or (None,))]

    def run_protocol(self, run: int | Mapping[str, Any]) -> Protocol:
        """The protocol run `run` (an id, or its `get_run` row) was made under: every reader's one way to
        it. Older stored forms are read as they were meant (a protocol stored without `sampler` drew with
        sampler 1); ReachError, naming the run, when this reachtui cannot read it."""
        from reachtui.protocol import read_stored

        row = run if isinstance(run, Mapping) else self.get_run(run)
        return read_stored(row["protocol_json"], f"run {row['id']}" if row.get("id") is not None else "a run")

    def readable_protocol(self, run: int | Mapping[str, Any]) -> Protocol | None:
        """`run_protocol`, or None where this reachtui cannot read it (another version, a store edited by
        hand): such a run is listed and browsed without it, and matches only a run of the same hash."""
        try:
            return self.run_protocol(run)
        except ReachError:
            return None

    def run_status(self, run_id: int) -> str:
        row = self.conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        return row[0] if row else "unknown"

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

    def question(self, question_id: int) -> dict:
        """One question: id, qid, idx, question, gold, solution and meta (its metadata as a dict; {} when
        there is none) ({} when there is no such question)."""
        meta = "meta" if self._has_meta() else "NULL AS meta"
        row = self._one(f"SELECT id, qid, idx, question, gold, solution, {meta} FROM questions WHERE id = ?",
                        (question_id,))
        if row:
            row["meta"] = _meta(row["meta"])
        return row or {}

    def _has_meta(self) -> bool:
        """Whether the questions keep their metadata (schema 6; a reader opens older stores as they are)."""
        has = getattr(self, "_meta_column", None)
        if has is None:
            has = self._meta_column = any(r[1] == "meta" for r in self.conn.execute("PRAGMA table_info(questions)"))
        return has

    def _has_skipped(self) -> bool:
        """Whether runs keep the questions they left out (schema 7; older stores' runs left none out)."""
        has = getattr(self, "_skipped_table", None)
        if has is None:
            has = self._skipped_table = self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'skipped_questions'").fetchone() is not None
        return has

    def skipped_questions(self, run_id: int) -> list[tuple[str, int | None]]:
        """(the task's question id, prompt tokens) of the questions the run left out because their prompts do
        not fit the model's positions (`--skip-long`), in task order; tokens None where not counted."""
        if not self._has_skipped():
            return []
        return self.conn.execute("SELECT q.qid, s.prompt_tokens FROM skipped_questions s JOIN questions q "
                                 "ON q.id = s.question_id WHERE s.run_id = ? ORDER BY q.idx", (int(run_id),)).fetchall()

    def question_meta(self, run_id: int) -> dict[int, dict[str, Any]]:
        """{question id: its metadata} of the run's questions that have any, in task order."""
        if not self._has_meta():
            return {}
        rows = self.conn.execute("SELECT q.id, q.meta FROM run_questions rq JOIN questions q ON q.id = rq.question_id "
                                 "WHERE rq.run_id = ? AND q.meta IS NOT NULL ORDER BY q.idx", (run_id,))
        return {key: _meta(text) for key, text in rows}

    def question_texts(self, run_id: int) -> list[tuple[int, str, str]]:
        """(question id, qid, question) of the run's questions, in task order."""
        return self.conn.execute("SELECT q.id, q.qid, q.question FROM run_questions rq JOIN questions q "
                                 "ON q.id = rq.question_id WHERE rq.run_id = ? ORDER BY q.idx", (run_id,)).fetchall()

    def run_question(self, run_id: int, qid: str) -> tuple[int, str, str] | None:
        """(question id, question, gold) of the run's question with the task's id `qid`, or None."""
        return self.conn.execute("SELECT q.id, q.question, q.gold FROM run_questions rq JOIN questions q "
                                 "ON q.id = rq.question_id WHERE rq.run_id = ? AND q.qid = ?", (run_id, qid)).fetchone()

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

    def default_attempt(self, run_id: int, question_id: int) -> dict | None:
        """The question's realized attempt: text, answer, rule, correct, new_tokens, route, silenced."""
        return self._one("SELECT text, answer, rule, correct, new_tokens, route, silenced FROM attempts "
                         f"WHERE run_id = ? AND question_id = ? AND {realized_where()}", (run_id, question_id))

    def correct_attempts(self, run_id: int, question_id: int, probes: Sequence[str], limit: int = 64) -> list[dict]:
        """The question's correct attempts of `probes`, probe by probe (in the order given), in attempt order:
        probe, attempt, route, silenced, answer, text, new_tokens."""
        if not probes:
            return []
        marks = ",".join("?" * len(probes))
        order = " ".join(f"WHEN ? THEN {i}" for i in range(len(probes)))
        return self._rows(
            f"SELECT probe, attempt, route, silenced, answer, text, new_tokens FROM attempts "
            f"WHERE run_id = ? AND question_id = ? AND correct = 1 AND probe IN ({marks}) "
            f"ORDER BY CASE probe {order} END, attempt LIMIT ?", (run_id, question_id, *probes, *probes, limit))

    def probe_tallies(self, run_id: int, question_id: int) -> dict[str, str]:
        """{probe: "correct/attempts"} of one question of the run."""
        return dict(self.conn.execute(
            "SELECT probe, coalesce(sum(correct = 1), 0) || '/' || count(*) FROM attempts "
            "WHERE run_id = ? AND question_id = ? GROUP BY probe", (run_id, question_id)).fetchall())

    def stored_attempts(self, run_id: int, probe: str) -> list[tuple]:
        """(question_id, attempt, route, correct, mean_logprob) of the probe's stored attempts, by question and
        attempt (what a resumed search replays)."""
        return self.conn.execute("SELECT question_id, attempt, route, correct, mean_logprob FROM attempts "
                                 "WHERE run_id = ? AND probe = ? ORDER BY question_id, attempt",
                                 (run_id, probe)).fetchall()

    def correct_count(self, run_id: int, probes: Sequence[str]) -> int:
        """How many of the run's attempts of `probes` are correct."""
        marks = ", ".join("?" * len(probes))
        return self.conn.execute(f"SELECT coalesce(sum(correct), 0) FROM attempts WHERE run_id = ? AND probe IN "
                                 f"({marks})", (run_id, *probes)).fetchone()[0]

    def attempt_export(self, run_id: int) -> list[tuple]:
        """The run's raw attempts for the attempts table, by question (task order: a task's question ids follow
        it, `Store.upsert_task`; so the rows come in the order of the store's unique index, unsorted), probe,
        attempt: (run, qid, probe, attempt, route, silenced, temperature, seed, text, answer, rule, correct,
        mean_logprob, new_tokens, layers_executed, compute). Temperature and seed are not stored: they are
        recomputed from the run's protocol (`Protocol.decoding_of` and `Protocol.attempt_seeder`, what the
        engine decoded with) inside the query; blank for an imported run, which records neither."""
        row = self.get_run(run_id)
        temperature, params = "NULL", ()
        if row["source"] == "audit":
            protocol = self.run_protocol(row)
            self.conn.create_function("reachtui_seed", 5, protocol.attempt_seeder(), deterministic=True)
            own = {spec.name: protocol.decoding_of(spec.name).temperature for spec in protocol.probes}
            default = protocol.decoding_of(registry.REALIZED.name).temperature   # realized, mlp:<L>, explore:<id>
            cases = " ".join("WHEN ? THEN ?" for _ in own)
            temperature, params = ((f"CASE a.probe {cases} ELSE ? END", (*(v for kv in own.items() for v in kv),
                                                                           default)) if own else ("?", (default,)))
        # an imported run records no decoding: no seed either (and no reachtui_seed function registered)
        seed = "NULL" if temperature == "NULL" else (
            f"CASE WHEN {temperature} > 0 THEN reachtui_seed(a.probe, a.route, a.silenced, q.idx, a.attempt) END")
        return self.conn.execute(
            f"""SELECT a.run_id, q.qid, a.probe, a.attempt, a.route, a.silenced, {temperature},
                       {seed},
                       a.text, a.answer, a.rule, a.correct, a.mean_logprob, a.new_tokens,
                       a.layers_executed, a.compute
                FROM attempts a JOIN questions q ON q.id = a.question_id
                WHERE a.run_id = ? ORDER BY a.question_id, a.probe, a.attempt""",
            (*params, *params, run_id)).fetchall()

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

    def mlp_scan_ranked(self, run_id: int) -> list[tuple]:
        """The run's MLP-scan rows by set and layer, each with its set's rank: (run, set name, layer, failure_n,
        repaired, repair_rate, realized_n, broken, break_rate, net, most repairs, best net). Most repairs: the
        highest repair rate, then the lowest break rate, then the lowest layer; best net: the highest repaired
        - broken, then the most repairs, then the lowest layer; neither for an empty failure set."""
        return [r[:10] + (bool(r[10]), bool(r[11])) for r in self.conn.execute(
            """SELECT s.run_id, f.name, s.layer, s.failure_n, s.repaired, s.repair_rate, s.realized_n,
                      s.broken, s.break_rate, s.repaired - s.broken,
                      s.failure_n > 0 AND row_number() OVER (PARTITION BY s.set_id ORDER BY s.repair_rate IS NULL,
                        s.repair_rate DESC, s.break_rate IS NULL, s.break_rate, s.layer) = 1,
                      s.failure_n > 0 AND row_number() OVER (PARTITION BY s.set_id ORDER BY
                        s.repaired - s.broken DESC, s.repaired DESC, s.layer) = 1
               FROM mlp_scan s JOIN failure_sets f ON f.id = s.set_id
               WHERE s.run_id = ? ORDER BY s.set_id, s.layer""", (run_id,))]

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


def _meta(text: str | None) -> dict[str, Any]:
    """A question's stored metadata (a JSON object, or NULL) as a dict."""
    import json

    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
