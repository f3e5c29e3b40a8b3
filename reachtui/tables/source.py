"""Where the tables read from: a connection to the audit store, the run (`resolve_run`, `run_info`, its
budgets and closed-form chance, `run_probes`), and the SQL pieces several tables share (the run's
questions, each question's hits).

The outcomes themselves (realized, reachable, first hit, failure set) are defined in `reachtui.outcomes`
and the probes in `reachtui.probes.registry`; this module only puts them into queries.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from reachtui.control import Graded, RunControl, run_control
from reachtui.errors import ReachError
from reachtui.outcomes import PER_PROBE_CTE, RUN_QUESTIONS_CTE
from reachtui.probes import registry
from reachtui.probes.registry import realized_where
from reachtui.tables.table import Column

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
    """A run id from `spec`: an id; None or "latest" for the most recently created run; or a model's name
    for that model's latest complete run (what `compare`, `open --compare`, `export --run` and `protocol`
    accept alike)."""
    from reachtui.store_queries import LATEST_COMPLETE_RUN_SQL

    con = connection(source)
    if spec is None or str(spec).strip().lower() == "latest":
        row = con.execute("SELECT max(id) FROM runs").fetchone()
        if row[0] is None:
            raise ReachError("the audit store has no runs yet")
        return int(row[0])
    text = str(spec).strip()
    if not (text.isascii() and text.isdigit()):       # a model name ("١" is not run 1: ASCII digits only)
        row = con.execute(LATEST_COMPLETE_RUN_SQL, {"model": text}).fetchone()
        if row[0] is not None:
            return int(row[0])
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
    except (ValueError, RecursionError):
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
    """(run id, run_info, its chance control) for each run; the runs share their graded answers."""
    graded: Graded = {}
    for run_id in run_ids:
        info = run_info(con, run_id)
        yield run_id, info, run_control(con, run_id, info["protocol"], graded)


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

#: The run's questions (`reachtui.outcomes.RUN_QUESTIONS_CTE`): rq(question_id).
RUN_QUESTIONS = RUN_QUESTIONS_CTE


#: The run's questions in task order: id, qid, idx, gold, and its realized attempt's answer and correctness.
QUESTION_ROWS = f"""
  WITH {RUN_QUESTIONS} SELECT q.id, q.qid, q.idx, q.gold, real.answer, real.correct
  FROM rq JOIN questions q ON q.id = rq.question_id
  LEFT JOIN attempts real ON real.run_id = :run AND {realized_where('real')} AND real.question_id = q.id
  ORDER BY q.idx"""


def probe_hits(con: sqlite3.Connection, run_id: int, probes: Sequence[str]) -> dict[int, list]:
    """{question id: [hit under probe 0, probe 1, ...]} (`reachtui.outcomes.PER_PROBE_CTE`: some attempt
    correct, 0/1; None where the probe has no attempt of the question) for the run's questions with attempts."""
    index = {p: i for i, p in enumerate(probes)}
    out: dict[int, list] = {}
    for probe, q, hit in con.execute(f"WITH {PER_PROBE_CTE} SELECT probe, question_id, hit FROM pq", {"run": run_id}):
        i = index.get(probe)
        if i is not None:
            row = out.get(q)
            if row is None:
                row = out[q] = [None] * len(probes)
            row[i] = hit
    return out
