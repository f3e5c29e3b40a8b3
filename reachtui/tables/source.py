"""Where the tables read from: a connection to the audit store, the run (`resolve_run`, `run_info`, its
budgets and closed-form chance, `run_probes`), and the SQL pieces several tables share (the run's
questions, the answer-blind selectors, the per-question pivot, per-question outcomes).

The outcomes themselves (realized, reachable, first hit, failure set) are defined in `reachtui.outcomes`
and the probes in `reachtui.probes.registry`; this module only puts them into queries.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from reachtui.control import RunControl, run_control
from reachtui.errors import ReachError
from reachtui.outcomes import PER_PROBE_CTE, REALIZED_IDS_SQL
from reachtui.probes import registry
from reachtui.probes.registry import reach_where, realized_where
from reachtui.tables.table import Column

#: {question id: (attempts n, correct c, first hit k or None)} for one probe
PerQuestion = dict[int, tuple[int, int, "int | None"]]


def connection(source: Any) -> sqlite3.Connection:
    """A sqlite3 connection from a Store, a sqlite_utils Database or a connection."""
    if isinstance(source, sqlite3.Connection):
        return source
    conn = getattr(source, "conn", None)  # Store.conn (plain sqlite3), sqlite_utils Database.conn
    if conn is None and hasattr(source, "db"):
        conn = source.db.conn
    if conn is None:
        raise TypeError(f"not a store or a connection: {source!r}")
    return conn


is_reach_probe = registry.is_reach


def column_suffix(probe: str) -> str:
    """A probe name as a column-name suffix: "mcts-blind" -> "mcts_blind"."""
    return re.sub(r"\W", "_", probe)


def resolve_run(source: Any, spec: str | int | None) -> int:
    """A run id from `spec`: an id, or None/"latest" for the most recently created run."""
    con = connection(source)
    if spec is None or str(spec).strip().lower() == "latest":
        row = con.execute("SELECT max(id) FROM runs").fetchone()
        if row[0] is None:
            raise ReachError("the audit store has no runs yet")
        return int(row[0])
    text = str(spec).strip()
    if not text.isdigit():
        raise ReachError(f"run must be a run id or 'latest', not {text!r}")
    run_id = int(text)
    if run_id >= 2**63 or con.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
        have = con.execute("SELECT min(id), max(id), count(*) FROM runs").fetchone()
        known = f"runs {have[0]}–{have[1]}" if have[2] else "no runs"
        raise ReachError(f"no run {run_id} in the audit store (it has {known})")
    return run_id


def run_info(source: Any, run_id: int) -> dict[str, Any]:
    """The run's model, task, protocol (hash and parsed JSON), status, source and question count."""
    con = connection(source)
    cur = con.execute(
        """SELECT r.id, m.name, t.name, t.sha256, r.protocol_hash, r.status, r.source, r.n_questions,
                  r.protocol_json
           FROM runs r JOIN models m ON m.id = r.model_id JOIN tasks t ON t.id = r.task_id
           WHERE r.id = ?""",
        (run_id,),
    )
    row = cur.fetchone()
    if row is None:
        raise ReachError(f"no run {run_id} in the audit store")
    keys = ("run", "model", "task", "task_sha256", "protocol_hash", "status", "source", "n_questions")
    info = dict(zip(keys, row))
    try:
        protocol = json.loads(row[8]) if row[8] else {}
    except ValueError:
        protocol = {}
    info["protocol"] = protocol if isinstance(protocol, dict) else {}
    return info


def budgets(info: dict[str, Any]) -> dict[str, int]:
    """{probe: K} from the run's protocol."""
    out = {}
    for p in info["protocol"].get("probes") or []:
        try:
            out[str(p["name"])] = int(p["budget"])
        except (KeyError, TypeError, ValueError):
            continue
    return out


def chance(info: dict[str, Any], budget: int | None) -> float | None:
    """Multiple choice with m options: 1 - (1 - 1/m)^K, the chance that K blind guesses hit."""
    proto = info["protocol"]
    m = proto.get("choices") if proto.get("answer_format") == "choice" else None
    if not m or not budget:
        return None
    return 1.0 - (1.0 - 1.0 / int(m)) ** budget


def run_probes(source: Any, run_id: int) -> list[str]:
    """The reachability probes with attempts in the run, in display order."""
    con = connection(source)
    rows = con.execute(
        """WITH RECURSIVE p(probe) AS (
             SELECT min(probe) FROM attempts WHERE run_id = :run
             UNION ALL
             SELECT (SELECT min(probe) FROM attempts WHERE run_id = :run AND probe > p.probe)
             FROM p WHERE p.probe IS NOT NULL)
           SELECT probe FROM p WHERE probe IS NOT NULL""",
        {"run": run_id},
    ).fetchall()
    return sorted((r[0] for r in rows if is_reach_probe(r[0])), key=registry.sort_key)


def controls(con: sqlite3.Connection, run_ids: Sequence[int]) -> Iterator[tuple[int, dict[str, Any], RunControl]]:
    """(run id, run_info, its chance control) for each run."""
    for run_id in run_ids:
        info = run_info(con, run_id)
        yield run_id, info, run_control(con, run_id, info["protocol"])


def run_notes(info: dict[str, Any], probes_done: dict[str, int] | None, n: int) -> list[str]:
    """What a table of an unfinished run says about it."""
    notes = []
    if info["status"] != "complete":
        notes.append(f"run {info['run']} is {info['status']}: its numbers cover what has run so far")
        for probe, done in (probes_done or {}).items():
            if done < n:
                notes.append(f"run {info['run']}: {probe} has attempts for {done} of {n} questions")
    return notes


def runs_label(run_ids: Sequence[int]) -> str:
    if len(run_ids) == 1:
        return f" (run {run_ids[0]})"
    return f" (runs {', '.join(map(str, run_ids))})"


def ci_columns(name: str, label: str | None = None, signed: bool = False) -> list[Column]:
    """`name_lo`, `name_hi`: the 95% interval of column `name` (people see them folded into one)."""
    label = label or name
    return [Column(f"{name}_lo", "frac", label=f"{label} lo", signed=signed),
            Column(f"{name}_hi", "frac", label=f"{label} hi", signed=signed)]


# --------------------------------------------------------------------------------------------------
# Shared SQL
# --------------------------------------------------------------------------------------------------

#: The run's questions: its question set, plus any question that has attempts (belt and braces).
RUN_QUESTIONS = """
  rq AS (SELECT question_id FROM run_questions WHERE run_id = :run
         UNION SELECT DISTINCT question_id FROM attempts WHERE run_id = :run)"""

# Answer-blind selection in SQL, exactly as reachtui.probes.blind does it:
#   logprob: the highest mean log-prob candidate (NULL lowest), earliest attempt on ties;
#   vote: the most frequent extracted answer (no answer: no vote), ties to the answer whose best
#         candidate has the highest log-prob, then to the earliest first appearance; the chosen
#         candidate is that answer's highest-log-prob (earliest) candidate. Nothing chosen = wrong.
#         When all candidates with the winning answer agree on correctness (always, for graded
#         attempts: correctness is a function of the answer), that is the pick's correctness; else the
#         chosen candidate is looked up. GROUP BYs and one small window, no self-joins.
_CANDIDATES = f"run_id = :run AND {reach_where()}"
BLIND = f"""
  lp_best AS (SELECT probe, question_id, max(mean_logprob) AS m FROM attempts WHERE {_CANDIDATES}
              GROUP BY probe, question_id),
  lp_pick AS (SELECT probe, question_id,
                (SELECT a.correct FROM attempts a WHERE a.run_id = :run AND a.probe = b.probe
                   AND a.question_id = b.question_id AND a.mean_logprob IS b.m ORDER BY a.attempt LIMIT 1)
                AS correct FROM lp_best b),
  votes AS (SELECT probe, question_id, answer, count(*) AS cnt, max(mean_logprob) AS best_lp,
                   min(attempt) AS first_at, min(correct) AS c_lo, max(correct) AS c_hi
            FROM attempts WHERE {_CANDIDATES} AND answer IS NOT NULL GROUP BY probe, question_id, answer),
  winner AS (SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY probe, question_id
                 ORDER BY cnt DESC, best_lp IS NULL, best_lp DESC, first_at) AS rk FROM votes) WHERE rk = 1),
  vote_pick AS (SELECT probe, question_id,
                  CASE WHEN c_lo IS c_hi THEN c_hi ELSE
                    (SELECT a.correct FROM attempts a WHERE a.run_id = :run AND a.probe = w.probe
                       AND a.question_id = w.question_id AND a.answer = w.answer
                     ORDER BY a.mean_logprob IS NULL, a.mean_logprob DESC, a.attempt LIMIT 1) END AS correct
                FROM winner w)"""


def pivot(probes: Sequence[str], params: dict[str, Any]) -> str:
    """SQL over `PER_PROBE_CTE` (pq): one row per question of the run with, per probe i, hit{i} (some
    attempt correct; NULL when the probe has no attempt) and first{i} (its first hit, 1-based k)."""
    cols = []
    for i, p in enumerate(probes):
        params[f"p{i}"] = p
        cols.append(f"max(CASE WHEN probe = :p{i} THEN hit END) AS hit{i}, "
                    f"max(CASE WHEN probe = :p{i} THEN first_hit END) AS first{i}")
    marks = ", ".join(f":p{i}" for i in range(len(probes))) or "NULL"
    return (f"SELECT question_id{''.join(', ' + c for c in cols)} FROM pq "
            f"WHERE probe IN ({marks}) GROUP BY question_id")


def pivot_rows(con: sqlite3.Connection, run_id: int, probes: Sequence[str], head: str,
               tail: str = "") -> sqlite3.Cursor:
    """Per question of the run: `head` (SQL columns over q = questions, real = its realized attempt),
    then per probe i the `tail` columns (over piv: hit{i}, first{i}); in task order."""
    params: dict[str, Any] = {"run": run_id}
    piv = pivot(probes, params)
    per_probe = "".join(", " + tail.format(i=i) for i in range(len(probes))) if tail else ""
    sql = (
        f"WITH {RUN_QUESTIONS}, {PER_PROBE_CTE}, piv AS MATERIALIZED ({piv}) SELECT {head}{per_probe}"
        " FROM rq JOIN questions q ON q.id = rq.question_id"
        f" LEFT JOIN attempts real ON real.run_id = :run AND {realized_where('real')}"
        " AND real.question_id = q.id"
        " LEFT JOIN piv ON piv.question_id = q.id ORDER BY q.idx"
    )
    return con.execute(sql, params)


def per_question_outcomes(con: sqlite3.Connection, run_id: int) -> tuple[
        set[int], dict[str, PerQuestion], dict[str, set[int]], dict[str, set[int]]]:
    """(realized-correct question ids, {probe: {question: (n, c, first_hit)}}, {probe: question ids whose
    majority-vote pick is correct}, {probe: ... highest-log-prob pick correct}) for the reach probes."""
    params = {"run": run_id}
    realized_ok = {q for (q,) in con.execute(REALIZED_IDS_SQL, params)}
    per: dict[str, PerQuestion] = {}
    for probe, q, n, c, first in con.execute(
            f"WITH {PER_PROBE_CTE} SELECT probe, question_id, n, c, first_hit FROM pq", params):
        per.setdefault(probe, {})[q] = (n, c, first)
    vote: dict[str, set[int]] = {}
    for probe, q in con.execute(f"WITH {BLIND} SELECT probe, question_id FROM vote_pick WHERE correct = 1", params):
        vote.setdefault(probe, set()).add(q)
    lp: dict[str, set[int]] = {}
    for probe, q in con.execute(f"WITH {BLIND} SELECT probe, question_id FROM lp_pick WHERE correct = 1", params):
        lp.setdefault(probe, set()).add(q)
    return realized_ok, per, vote, lp
