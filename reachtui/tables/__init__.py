"""Every table reachtui shows or exports, built in one place, and every way of writing one out.

The CLI (`reachtui export`, `reachtui compare`, the audit's closing summary) and the TUI read their
tables from here; nobody else aggregates attempts. Builders run SQL over the store (see the schema in
`reachtui/store.py`) and return a `Table`: a name, a title, typed columns, rows, and notes/warnings
that travel with it (`reachtui/table_formats.py`: the value, `select`, and the formats it is written in).

Entry points: `build_table(store, name, run_ids)` (TABLES), `summary_rows(store, run_id)` (the
closing summary's numbers as dicts (the audit's closing table); with `intervals=True` also
the chance control, excess, robust reachability, answer scatter and 95% intervals), `summary_lines(rows)`
(those as one line per probe, for the audit's closing note and the app's header), `compare_runs(store,
a, b)` (a `Comparison`: the wide `compare` table, `compare_views` for people, `list_table` for one
transition cell).

Intervals are columns `X_lo`, `X_hi` beside `X` (Wilson and bootstrap, `reachtui.stats`); the chance
control comes from `reachtui.control`. Data formats keep both columns; the formats for people fold each
pair into one "X CI" column (`table_formats.fold_intervals`).

Pure Python plus sqlite3: importing this module must never import torch, transformers or
textual (rich is imported only by `to_rich`/`to_text`).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Iterable, Sequence

from reachtui import stats
from reachtui.seeds import derive_seed
from reachtui.errors import ReachError
from reachtui.tables.formats import (Column, Table, _is_missing, human_header, human_value,
                                    select)
from reachtui import curves
from reachtui.outcomes import FAILURE_CANDIDATES_SQL, PER_PROBE_CTE, REALIZED_CTE
from reachtui.probes import registry
from reachtui.probes.registry import reach_where, realized_where
# --------------------------------------------------------------------------------------------------
# Statistics (small, exact, tested against hand-computed values)
# --------------------------------------------------------------------------------------------------


pass_at_k = curves.pass_at_k


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar test: binomial test of the discordant pairs against p = 1/2.

    p = min(1, 2 * sum_{i <= min(b, c)} C(b + c, i) / 2^(b + c)); 1.0 when there are no discordant pairs.
    """
    if gained < 0 or lost < 0:
        raise ValueError("counts must be non-negative")
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1))
    p = Fraction(2 * tail, 2**n)
    return float(min(Fraction(1), p))


def ratio(num: float | None, den: float | None) -> float:
    """num / den, NaN when either is missing or den is 0."""
    if _is_missing(num) or _is_missing(den) or den == 0:
        return math.nan
    return num / den


# --------------------------------------------------------------------------------------------------
# Reading the store
# --------------------------------------------------------------------------------------------------

TABLES = ("summary", "questions", "attempts", "passk", "hits", "mlp-scan", "compare")



def _conn(source: Any) -> sqlite3.Connection:
    """A sqlite3 connection from a Store, a sqlite_utils Database or a connection."""
    if isinstance(source, sqlite3.Connection):
        return source
    conn = getattr(source, "conn", None)  # Store.conn (plain sqlite3), sqlite_utils Database.conn
    if conn is None and hasattr(source, "db"):
        conn = source.db.conn
    if conn is None:
        raise TypeError(f"not a store or a connection: {source!r}")
    return conn


_probe_sort_key = registry.sort_key
is_reach_probe = registry.is_reach


def column_suffix(probe: str) -> str:
    """A probe name as a column-name suffix: "mcts-blind" -> "mcts_blind"."""
    return re.sub(r"\W", "_", probe)


def resolve_run(source: Any, spec: str | int | None) -> int:
    """A run id from `spec`: an id, or None/"latest" for the most recently created run."""
    con = _conn(source)
    if spec is None or str(spec).strip().lower() == "latest":
        row = con.execute("SELECT max(id) FROM runs").fetchone()
        if row[0] is None:
            raise ReachError("the audit store has no runs yet")
        return int(row[0])
    text = str(spec).strip()
    if not text.isdigit():
        raise ReachError(f"run must be a run id or 'latest', not {text!r}")
    run_id = int(text)
    if con.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
        have = con.execute("SELECT min(id), max(id), count(*) FROM runs").fetchone()
        known = f"runs {have[0]}–{have[1]}" if have[2] else "no runs"
        raise ReachError(f"no run {run_id} in the audit store (it has {known})")
    return run_id


def run_info(source: Any, run_id: int) -> dict[str, Any]:
    con = _conn(source)
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


def _budgets(info: dict[str, Any]) -> dict[str, int]:
    out = {}
    for p in info["protocol"].get("probes") or []:
        try:
            out[str(p["name"])] = int(p["budget"])
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _chance(info: dict[str, Any], budget: int | None) -> float | None:
    """Multiple choice with m options: 1 - (1 - 1/m)^K, the chance that K blind guesses hit."""
    proto = info["protocol"]
    m = proto.get("choices") if proto.get("answer_format") == "choice" else None
    if not m or not budget:
        return None
    return 1.0 - (1.0 - 1.0 / int(m)) ** budget


def run_probes(source: Any, run_id: int) -> list[str]:
    """The reachability probes with attempts in the run, in display order."""
    con = _conn(source)
    rows = con.execute(
        """WITH RECURSIVE p(probe) AS (
             SELECT min(probe) FROM attempts WHERE run_id = :run
             UNION ALL
             SELECT (SELECT min(probe) FROM attempts WHERE run_id = :run AND probe > p.probe)
             FROM p WHERE p.probe IS NOT NULL)
           SELECT probe FROM p WHERE probe IS NOT NULL""",
        {"run": run_id},
    ).fetchall()
    return sorted((r[0] for r in rows if is_reach_probe(r[0])), key=_probe_sort_key)


# The run's questions: its question set, plus any question that has attempts (belt and braces).
_RUN_QUESTIONS = """
  rq AS (SELECT question_id FROM run_questions WHERE run_id = :run
         UNION SELECT DISTINCT question_id FROM attempts WHERE run_id = :run)"""

_REALIZED = REALIZED_CTE
_PER_PROBE = PER_PROBE_CTE

# Answer-blind selection in SQL, exactly as reachtui.probes.blind does it:
#   logprob: the highest mean log-prob candidate (NULL lowest), earliest attempt on ties;
#   vote: the most frequent extracted answer (no answer: no vote), ties to the answer whose best
#         candidate has the highest log-prob, then to the earliest first appearance; the chosen
#         candidate is that answer's highest-log-prob (earliest) candidate. Nothing chosen = wrong.
#         When all candidates with the winning answer agree on correctness (always, for graded
#         attempts: correctness is a function of the answer), that is the pick's correctness; else the
#         chosen candidate is looked up. GROUP BYs and one small window, no self-joins.
_CANDIDATES = f"run_id = :run AND {reach_where()}"
_BLIND = f"""
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


def _pivot(probes: Sequence[str], params: dict[str, Any]) -> str:
    """SQL: one row per question of the run with, per probe i, hit{i} (some attempt correct; NULL when the
    probe has no attempt) and first{i} (its first hit, 1-based k). One pass over the attempts index."""
    cols = []
    for i, p in enumerate(probes):
        params[f"p{i}"] = p
        cols.append(f"max(CASE WHEN probe = :p{i} THEN coalesce(correct, 0) END) AS hit{i}, "
                    f"min(CASE WHEN probe = :p{i} AND correct = 1 THEN attempt END) + 1 AS first{i}")
    marks = ", ".join(f":p{i}" for i in range(len(probes))) or "NULL"
    return (f"SELECT question_id{''.join(', ' + c for c in cols)} FROM attempts "
            f"WHERE run_id = :run AND probe IN ({marks}) GROUP BY question_id")


def _frac(num: Any, den: Any) -> float:
    if num is None or not den:
        return math.nan
    return num / den


def _diff(a: float, b: float) -> float:
    if _is_missing(a) or _is_missing(b):
        return math.nan
    return a - b


def _run_notes(info: dict[str, Any], probes_done: dict[str, int] | None, n: int) -> list[str]:
    notes = []
    if info["status"] != "complete":
        notes.append(f"run {info['run']} is {info['status']}: its numbers cover what has run so far")
        for probe, done in (probes_done or {}).items():
            if done < n:
                notes.append(f"run {info['run']}: {probe} has attempts for {done} of {n} questions")
    return notes


def _ci_columns(name: str, label: str | None = None, signed: bool = False) -> list[Column]:
    """`name_lo`, `name_hi`: the 95% interval of column `name` (people see them folded into one)."""
    label = label or name
    return [Column(f"{name}_lo", "frac", label=f"{label} lo", signed=signed),
            Column(f"{name}_hi", "frac", label=f"{label} hi", signed=signed)]


SUMMARY_COLUMNS = [
    Column("run", "int"),
    Column("model"),
    Column("task"),
    Column("protocol_hash", label="protocol"),
    Column("probe"),
    Column("budget", "int", label="K"),
    Column("n", "int"),
    Column("realized", "frac"),
    *_ci_columns("realized"),
    Column("reachable", "frac"),
    *_ci_columns("reachable"),
    Column("control", "frac"),
    *_ci_columns("control"),
    Column("excess", "frac", signed=True),
    *_ci_columns("excess", signed=True),
    Column("gap", "frac", signed=True),
    *_ci_columns("gap", signed=True),
    Column("robust", "frac", label="robust (2+ hits)"),
    *_ci_columns("robust", "robust"),
    Column("blind_vote", "frac", label="blind vote"),
    Column("blind_logprob", "frac", label="blind logprob"),
    Column("retained", "frac", label="retained (vote)", signed=True),
    *_ci_columns("retained", "retained (vote)", signed=True),
    Column("retained_logprob", "frac", label="retained (logprob)", signed=True),
    *_ci_columns("retained_logprob", "retained (logprob)", signed=True),
    Column("failure_set_size", "int", label="failure set"),
    Column("chance", "frac"),
    Column("answers", "float", label="answers/question"),
    Column("no_answer", "frac", label="no answer"),
]

#: What the intervals and the chance control mean, said under the summary (and the audit's closing table).
SUMMARY_NOTE = (
    "95% intervals: Wilson for single proportions (realized, reachable, control, robust), a seeded "
    "bootstrap over questions for gap, excess and retained (none for retained when the gap's interval "
    "holds 0: the ratio is unbounded); control = the probe's answers scored against "
    "another question's gold of the same answer stratum (chance control); excess = reachable - control; "
    "robust = at least 2 correct attempts; answers/question = distinct extracted answers; no answer = "
    "share of attempts with no extracted answer; chance = 1-(1-1/m)^K for m-way multiple choice")


def _per_question_outcomes(con: sqlite3.Connection, run_id: int) -> tuple[
        set[int], dict[str, dict[int, tuple[int, int, int | None]]], dict[str, set[int]], dict[str, set[int]]]:
    """(realized-correct question ids, {probe: {question: (n, c, first_hit)}}, {probe: question ids whose
    majority-vote pick is correct}, {probe: ... highest-log-prob pick correct}) for the reach probes."""
    params = {"run": run_id}
    realized_ok = {q for (q,) in con.execute(
        f"SELECT question_id FROM attempts WHERE run_id = :run AND {realized_where()} AND correct = 1", params)}
    per: dict[str, dict[int, tuple[int, int, int | None]]] = {}
    for probe, q, n, c, first in con.execute(f"WITH {_PER_PROBE} SELECT probe, question_id, n, c, first_hit FROM pq",
                                             params):
        per.setdefault(probe, {})[q] = (n, c, first)
    vote: dict[str, set[int]] = {}
    for probe, q in con.execute(f"WITH {_BLIND} SELECT probe, question_id FROM vote_pick WHERE correct = 1", params):
        vote.setdefault(probe, set()).add(q)
    lp: dict[str, set[int]] = {}
    for probe, q in con.execute(f"WITH {_BLIND} SELECT probe, question_id FROM lp_pick WHERE correct = 1", params):
        lp.setdefault(probe, set()).add(q)
    return realized_ok, per, vote, lp


def _groups_of(per: dict[str, dict[int, tuple[int, int, int | None]]],
               ) -> dict[str, list[tuple[int, int, int | None, int]]]:
    """`_probe_groups`'s shape from per-question outcomes: {probe: [(n, c, first_hit, questions)]}."""
    out = {}
    for probe in sorted(per, key=_probe_sort_key):
        out[probe] = [(n, c, f, cnt) for (n, c, f), cnt in Counter(per[probe].values()).items()]
    return out


def _wilson_keys(row: dict[str, Any], key: str, x: float | None, n: int) -> None:
    lo, hi = stats.wilson(x, n) if x is not None and n else stats.NAN_PAIR
    row[f"{key}_lo"], row[f"{key}_hi"] = lo, hi


def _add_honest_numbers(con: sqlite3.Connection, run_id: int, info: dict[str, Any], rows: list[dict[str, Any]],
                        outcomes: tuple, *, bootstrap: int, seed: int) -> None:
    """Add to summary rows the chance control, robust reachability, answer scatter and 95% intervals
    (the keys `summary_rows(..., intervals=True)` documents)."""
    from reachtui.control import run_control

    rc = run_control(con, run_id, info["protocol"])
    realized_ok, per, vote, lp = outcomes
    qids = rc.question_ids
    n = len(qids)
    real_ctrl = {q for q, s in rc.probe(registry.REALIZED.name).items() if s.control_hits > 0}
    for row in rows:
        probe = row["probe"]
        scatter = rc.probe(probe)
        attempts = sum(s.n for s in scatter.values())
        row["no_answer"] = _frac(sum(s.no_answer for s in scatter.values()), attempts)
        row["answers"] = _frac(sum(s.distinct for s in scatter.values()), len(scatter))
        ctrl = {q for q, s in scatter.items() if s.control_hits > 0}
        row["control"] = _frac(len(ctrl), n)
        row["control_robust"] = _frac(sum(1 for s in scatter.values() if s.control_hits >= 2), n)
        _wilson_keys(row, "realized", len(realized_ok), n)
        _wilson_keys(row, "control", len(ctrl), n)
        row["excess"] = _diff(row["reachable"], row["control"])
        if n < 2:  # no partner to score against: no control
            row.update(control=math.nan, control_lo=math.nan, control_hi=math.nan, control_robust=math.nan,
                       excess=math.nan)
        b_seed = derive_seed("summary", seed, probe)
        if probe == "realized":
            _wilson_keys(row, "reachable", len(realized_ok), n)
            row.update(robust=math.nan, robust_lo=math.nan, robust_hi=math.nan, hits=None, control_at_k=None,
                       gap_lo=math.nan, gap_hi=math.nan, retained_vote_lo=math.nan, retained_vote_hi=math.nan,
                       retained_logprob_lo=math.nan, retained_logprob_hi=math.nan)
            vectors = Counter((q in realized_ok, q in real_ctrl) for q in qids)
            row["excess_lo"], row["excess_hi"] = stats.bootstrap_means(
                vectors, [lambda m: m[0] - m[1]], B=bootstrap, seed=b_seed)[0]
            continue
        outcomes = per.get(probe, {})
        hit_q = {q for q, (_n, c, _f) in outcomes.items() if c > 0}
        robust = sum(1 for _n, c, _f in outcomes.values() if c >= 2)
        row["robust"] = _frac(robust, n)
        _wilson_keys(row, "reachable", len(hit_q), n)
        _wilson_keys(row, "robust", robust, n)
        counts = Counter(c for _n, c, _f in outcomes.values())
        row["hits"] = [counts.get(i, 0) for i in range(max(counts, default=-1) + 1)]
        v, l_ = vote.get(probe, set()), lp.get(probe, set())
        vectors = Counter((q in realized_ok, q in hit_q, q in v, q in l_, q in ctrl) for q in qids)
        intervals = stats.bootstrap_means(vectors, [
            lambda m: m[1] - m[0],
            lambda m: stats.ratio_or_nan(m[2] - m[0], m[1] - m[0]),
            lambda m: stats.ratio_or_nan(m[3] - m[0], m[1] - m[0]),
            lambda m: m[1] - m[4],
        ], B=bootstrap, seed=b_seed)
        gap_lo, gap_hi = intervals[0]
        for key, (lo, hi) in zip(("gap", "retained_vote", "retained_logprob", "excess"), intervals):
            point = row[key]
            if _is_missing(point):  # an undefined estimate gets no interval
                lo = hi = math.nan
            if key.startswith("retained") and not (gap_lo > 0 or gap_hi < 0):
                lo = hi = math.nan  # the gap's interval holds 0: the ratio is unbounded, no honest interval
            row[f"{key}_lo"], row[f"{key}_hi"] = lo, hi
        curve = _control_points(probe, [(s.n, s.control_hits, s.control_first) for s in scatter.values()])
        row["control_at_k"] = None
        if row["n_attempted"] == n and curve:
            budget = row["budget"]
            row["control_at_k"] = curves.budget_curve(curve, registry.is_ordered(probe), row["budget"], n)


def summary_rows(source: Any, run_id: int, *, intervals: bool = False, bootstrap: int = stats.DEFAULT_BOOTSTRAP,
                 seed: int = 0) -> list[dict[str, Any]]:
    """The run's numbers per probe, as plain dicts (fractions in 0..1): a "realized" row first, then one
    row per reachability probe with attempts, in display order (the audit's closing table). Keys:

        probe, budget, n, n_attempted, realized, reachable, gap, blind_vote, blind_logprob,
        retained_vote, retained_logprob, failure, chance, pass_at_k, reachable_at_k

    n is the run's question count; realized is attempt 0 of the "realized" probe; reachable: some
    attempt of the probe correct; blind_*: the answer-blind selectors of reachtui.probes.blind (in SQL);
    retained = (blind - realized) / (reachable - realized); failure: the frozen set failure:<probe>,
    else the live count (reachable, realized known wrong); chance: 1 - (1 - 1/m)^K for m-way multiple
    choice; pass_at_k (sample) / reachable_at_k (routes, mcts, mcts-blind): the curve for k = 1..K
    when every question has attempts, else None.

    With `intervals=True` (what the audit's closing table and the app's header show), also, per row:

        control, control_lo, control_hi   chance control: share of questions whose attempts hit the
                                          gold of their partner question (reachtui.control), Wilson
        control_robust                    ... with at least 2 attempts hitting it
        excess, excess_lo, excess_hi      reachable - control, bootstrap over questions (paired)
        robust, robust_lo, robust_hi      at least 2 correct attempts, Wilson (NaN for realized)
        hits                              [questions with 0, 1, 2, ... correct attempts] (None for realized)
        answers                           mean distinct extracted answers per question with attempts
        no_answer                         share of the probe's attempts with no extracted answer
        realized_lo/_hi, reachable_lo/_hi Wilson
        gap_lo/_hi, retained_vote_lo/_hi, retained_logprob_lo/_hi   bootstrap over questions (retained:
                                          NaN when the gap's interval holds 0, the ratio being unbounded)
        control_at_k                      the control's budget curve (as pass_at_k / reachable_at_k)

    Bootstrap intervals use `bootstrap` replicates (0: none, NaN) seeded from `seed` and the probe name.
    For the realized row, control is the default answer scored against the partner's gold and excess
    realized - control.
    """
    con = _conn(source)
    info = run_info(con, run_id)
    budgets = _budgets(info)
    params = {"run": run_id}
    n, n_real_done, n_realized = con.execute(
        f"WITH {_RUN_QUESTIONS}, {_REALIZED} SELECT (SELECT count(*) FROM rq), "
        "(SELECT count(*) FROM real), (SELECT coalesce(sum(ok = 1), 0) FROM real)",
        params,
    ).fetchone()
    realized = _frac(n_realized, n)
    rows: list[dict[str, Any]] = [dict(
        probe="realized", budget=1, n=n, n_attempted=n_real_done, realized=realized, reachable=realized,
        gap=0.0, blind_vote=realized, blind_logprob=realized, retained_vote=math.nan,
        retained_logprob=math.nan, failure=0, chance=_chance(info, 1), pass_at_k=None, reachable_at_k=None)]
    outcomes = _per_question_outcomes(con, run_id)  # one pass each; the intervals reuse them
    _realized_ok, per_q, vote_q, lp_q = outcomes
    groups = _groups_of(per_q)
    budget_curves = _curves(con, run_id, groups)
    vote = {p: len(qs) for p, qs in vote_q.items()}
    lp_best = {p: len(qs) for p, qs in lp_q.items()}
    frozen = dict(con.execute("SELECT probe, max(size) FROM failure_sets WHERE run_id = :run "
                              "AND name = 'failure:' || probe GROUP BY probe", params).fetchall())
    per_probe = []
    for p, g in groups.items():
        live = None
        if p not in frozen:  # an unfinished run: count what would be frozen
            live = con.execute(f"SELECT count(*) FROM ({FAILURE_CANDIDATES_SQL})",
                               {"run": run_id, "probe": p}).fetchone()[0]
        per_probe.append((p, sum(cnt for *_x, cnt in g), sum(cnt for _n, c, _f, cnt in g if c > 0),
                          vote.get(p) or 0, lp_best.get(p) or 0, frozen.get(p), live, max(n for n, *_x in g)))
    for probe, done, reach, n_vote, n_lp, n_frozen, live, max_n in sorted(per_probe,
                                                                          key=lambda r: _probe_sort_key(r[0])):
        reachable = _frac(reach, n)
        b_vote, b_lp = _frac(n_vote, n), _frac(n_lp, n)
        budget = budgets.get(probe, max_n)
        curve = None
        if done == n and probe in budget_curves:
            curve = curves.budget_curve(budget_curves[probe][1], registry.is_ordered(probe), budget, n)
        rows.append(dict(
            probe=probe, budget=budget, n=n, n_attempted=done, realized=realized, reachable=reachable,
            gap=reachable - realized, blind_vote=b_vote, blind_logprob=b_lp,
            retained_vote=ratio(_diff(b_vote, realized), reachable - realized),
            retained_logprob=ratio(_diff(b_lp, realized), reachable - realized),
            failure=n_frozen if n_frozen is not None else (live or 0), chance=_chance(info, budget),
            pass_at_k=None if registry.is_ordered(probe) else curve,
            reachable_at_k=curve if registry.is_ordered(probe) else None))
    if intervals:
        _add_honest_numbers(con, run_id, info, rows, outcomes, bootstrap=bootstrap, seed=seed)
    return rows


def _pct_ci(v: Any, lo: Any, hi: Any, *, signed: bool = False, digits: int = 1) -> str:
    if _is_missing(v):
        return "–"
    sign = "+" if signed else ""
    text = f"{100 * v:{sign}.{digits}f}"
    if not (_is_missing(lo) or _is_missing(hi)):
        text += f" [{100 * lo:{sign}.{digits}f}, {100 * hi:{sign}.{digits}f}]"
    return text


def summary_lines(rows: Sequence[dict[str, Any]], *, short: bool = False) -> list[str]:
    """One line per reachability probe from `summary_rows(..., intervals=True)`, for the audit's
    closing note and the app's header: reachable, the chance control and the excess with their 95%
    intervals, robust reachability, the answer scatter, and whether the probe beats chance (the lower
    end of the excess interval above 0). `short` gives a compact form (percent, no scatter).

        routes K=16: reachable 80.5% [76.3, 84.1], control 10.5% [7.9, 13.8], excess +70.0 [65.2, 74.6]
          (beats chance); robust (>=2 hits) 61.0% [56.1, 65.7]; 17.2 distinct answers/question,
          3.1% of attempts no answer
    """
    out = []
    for r in rows:
        if r.get("probe") == "realized" or "control" not in r:
            continue
        lo = r.get("excess_lo")
        verdict = ("beats chance" if not _is_missing(lo) and lo > 0 else
                   "not above chance" if not _is_missing(lo) else "no interval")
        if short:
            out.append(f"{r['probe']} {_pct_ci(r['reachable'], r.get('reachable_lo'), r.get('reachable_hi'), digits=0)}"
                       f" ctl {_pct_ci(r['control'], r.get('control_lo'), r.get('control_hi'), digits=0)}"
                       f" exc {_pct_ci(r['excess'], r.get('excess_lo'), r.get('excess_hi'), signed=True, digits=0)}")
            continue
        line = (f"{r['probe']} K={r['budget']}: reachable "
                f"{_pct_ci(r['reachable'], r.get('reachable_lo'), r.get('reachable_hi'))}%, control "
                f"{_pct_ci(r['control'], r.get('control_lo'), r.get('control_hi'))}%, excess "
                f"{_pct_ci(r['excess'], r.get('excess_lo'), r.get('excess_hi'), signed=True)} ({verdict}); "
                f"robust (>=2 hits) {_pct_ci(r.get('robust'), r.get('robust_lo'), r.get('robust_hi'))}%")
        if r.get("chance") is not None:
            line += f"; closed-form chance {100 * r['chance']:.1f}%"
        if not _is_missing(r.get("answers")):
            line += (f"; {r['answers']:.1f} distinct answers/question, "
                     f"{100 * r['no_answer']:.1f}% of attempts no answer")
        out.append(line)
    return out


def summary_table(source: Any, run_ids: Sequence[int], *, bootstrap: int = stats.DEFAULT_BOOTSTRAP,
                  seed: int = 0) -> Table:
    """One row per (run, reachability probe): realized, reachable, the chance control and excess
    reachability, gap, robust reachability, answer-blind accuracies, retained = (blind - realized) /
    (reachable - realized), the failure set's size, the closed-form chance baseline for multiple choice,
    the answer scatter, and 95% intervals as `<column>_lo` / `<column>_hi` (see `summary_rows` with
    intervals=True and `SUMMARY_NOTE`). A run without any probe gets one realized row (its control and
    excess are the default answer's: realized - control)."""
    con = _conn(source)
    rows: list[tuple] = []
    notes: list[str] = []
    names = [c.name for c in SUMMARY_COLUMNS]
    for run_id in run_ids:
        info = run_info(con, run_id)
        got = summary_rows(con, run_id, intervals=True, bootstrap=bootstrap, seed=seed)
        realized_row, probe_rows = got[0], got[1:] or got[:1]
        n = realized_row["n"]
        has_realized = bool(realized_row["n_attempted"])
        realized = realized_row["realized"] if has_realized else math.nan
        for r in probe_rows:
            is_probe = r["probe"] != "realized"
            only = (lambda key: r[key] if is_probe else math.nan)  # noqa: E731
            values = dict(
                run=run_id, model=info["model"], task=info["task"], protocol_hash=info["protocol_hash"],
                probe=r["probe"], budget=r["budget"], n=n, realized=realized,
                realized_lo=r["realized_lo"] if has_realized else math.nan,
                realized_hi=r["realized_hi"] if has_realized else math.nan,
                reachable=only("reachable"), reachable_lo=only("reachable_lo"), reachable_hi=only("reachable_hi"),
                control=r["control"], control_lo=r["control_lo"], control_hi=r["control_hi"],
                excess=r["excess"], excess_lo=r["excess_lo"], excess_hi=r["excess_hi"],
                gap=_diff(r["reachable"], realized) if is_probe else math.nan,
                gap_lo=only("gap_lo"), gap_hi=only("gap_hi"),
                robust=only("robust"), robust_lo=only("robust_lo"), robust_hi=only("robust_hi"),
                blind_vote=only("blind_vote"), blind_logprob=only("blind_logprob"),
                retained=only("retained_vote"), retained_lo=only("retained_vote_lo"),
                retained_hi=only("retained_vote_hi"), retained_logprob=only("retained_logprob"),
                retained_logprob_lo=only("retained_logprob_lo"), retained_logprob_hi=only("retained_logprob_hi"),
                failure_set_size=r["failure"] if is_probe else None, chance=r["chance"],
                answers=r["answers"], no_answer=r["no_answer"],
            )
            rows.append(tuple(values[c] for c in names))
        done = {r["probe"]: r["n_attempted"] for r in got}
        notes += _run_notes(info, done, n)
    notes.append(SUMMARY_NOTE + (f" ({bootstrap} bootstrap replicates, seed {seed})" if bootstrap > 0 else
                                 " (bootstrap off: no gap/excess/retained intervals)"))
    title = "Realized vs reachable per probe" + _runs_label(run_ids)
    return Table("summary", title, list(SUMMARY_COLUMNS), rows, notes=notes)


def merge_intervals(table: Table) -> Table:
    """A narrower table for people: each column X that has `X_lo` and `X_hi` becomes one text column
    "X" holding "87.5 [73.9, 94.5]" (X in its units, then its interval); the `_lo`/`_hi` columns go."""
    names = table.column_names
    has_ci = {n for n in names if f"{n}_lo" in names and f"{n}_hi" in names}
    drop = {f"{n}_{e}" for n in has_ci for e in ("lo", "hi")}
    cols: list[Column] = []
    plan: list[tuple] = []
    for i, c in enumerate(table.columns):
        if c.name in drop:
            continue
        if c.name in has_ci:
            cols.append(Column(c.name, "text", label=human_header(c)))
            plan.append((i, names.index(f"{c.name}_lo"), names.index(f"{c.name}_hi"), c.kind, c.signed))
        else:
            cols.append(c)
            plan.append((i,))

    def cell(row: tuple, step: tuple) -> Any:
        if len(step) == 1:
            return row[step[0]]
        v, lo, hi = row[step[0]], row[step[1]], row[step[2]]
        if _is_missing(v):
            return None
        text = human_value(v, step[3], step[4])
        if not (_is_missing(lo) or _is_missing(hi)):
            text += f" [{human_value(lo, step[3], step[4])}, {human_value(hi, step[3], step[4])}]"
        return text

    return replace(table, columns=cols, rows=[tuple(cell(r, st) for st in plan) for r in table.rows])


def summary_views(table: Table) -> list[Table]:
    """The summary for a terminal: (1) reachability beside its chance control, each figure with its
    95% interval ("87.5 [73.9, 94.5]"); (2) answer-blind selection, failure set and answer scatter.
    The run/model/task/protocol columns move into the titles when every row shares them."""
    t = merge_intervals(table)
    names = t.column_names
    common = [c for c in ("run", "model", "task", "protocol_hash") if c in names]
    shared = len({tuple(r[names.index(c)] for c in common) for r in t.rows}) <= 1 and t.rows
    head = [] if shared else common
    label = ""
    if shared and common:
        first = dict(zip(names, t.rows[0]))
        label = (f" — run {first.get('run')}: {first.get('model')} on {first.get('task')}, "
                 f"protocol {first.get('protocol_hash')}")
    first_cols = head + [c for c in ("probe", "budget", "n", "realized", "reachable", "control", "excess", "gap",
                                     "robust") if c in names]
    second_cols = head + [c for c in ("probe", "blind_vote", "blind_logprob", "retained", "retained_logprob",
                                      "failure_set_size", "chance", "answers", "no_answer") if c in names]
    a = select(t, columns=first_cols)
    a.title = "Reachable vs chance control, 95% intervals" + label
    a.notes = []
    b = select(t, columns=second_cols)
    b.title = "Answer-blind selection and answer scatter" + label
    return [a, b]


def _runs_label(run_ids: Sequence[int]) -> str:
    if len(run_ids) == 1:
        return f" (run {run_ids[0]})"
    return f" (runs {', '.join(map(str, run_ids))})"


def questions_table(source: Any, run_ids: Sequence[int]) -> Table:
    """One row per (run, question), in task order: gold, the realized (default) extracted answer,
    realized, and for each probe: reachable and the first-hit attempt index (empty: never). Then the
    chance control's partner (the question whose gold this one's attempts are also scored against) and,
    per probe, hits (correct attempts), answers (distinct extracted answers) and control (some attempt
    hits the partner's gold); empty where the probe has no attempt of the question."""
    from reachtui.control import run_control

    con = _conn(source)
    probes: list[str] = []
    for run_id in run_ids:
        probes += [p for p in run_probes(con, run_id) if p not in probes]
    probes.sort(key=_probe_sort_key)
    columns = [
        Column("run", "int"), Column("question_id", label="question"), Column("gold"),
        Column("answer", label="default answer"), Column("realized", "bool"),
    ]
    for p in probes:
        s = column_suffix(p)
        columns += [Column(f"reachable_{s}", "bool", label=f"reachable {p}"),
                    Column(f"first_hit_{s}", "int", label=f"first hit {p}")]
    columns.append(Column("partner", label="control partner"))
    for p in probes:
        s = column_suffix(p)
        columns += [Column(f"hits_{s}", "int", label=f"hits {p}"),
                    Column(f"answers_{s}", "int", label=f"answers {p}"),
                    Column(f"control_{s}", "bool", label=f"control {p}")]
    rows: list[tuple] = []
    for run_id in run_ids:
        rc = run_control(con, run_id, run_info(con, run_id)["protocol"])
        qid_of = dict(con.execute(
            f"WITH {_RUN_QUESTIONS} SELECT q.id, q.qid FROM rq JOIN questions q ON q.id = rq.question_id",
            {"run": run_id}).fetchall())
        params: dict[str, Any] = {"run": run_id}
        piv = _pivot(probes, params)
        select_probes = [f"piv.hit{i}, piv.first{i}" for i in range(len(probes))]
        sql = (
            f"WITH {_RUN_QUESTIONS}, piv AS MATERIALIZED ({piv}) "
            "SELECT :run, q.qid, q.gold, real.answer, real.correct"
            + "".join(", " + s for s in select_probes)
            + ", q.id FROM rq JOIN questions q ON q.id = rq.question_id"
            f" LEFT JOIN attempts real ON real.run_id = :run AND {realized_where('real')}"
            " AND real.question_id = q.id"
            " LEFT JOIN piv ON piv.question_id = q.id ORDER BY q.idx"
        )
        scatters = [rc.probe(p) for p in probes]
        for r in con.execute(sql, params):
            q = r[-1]
            out = list(r[:4]) + [None if r[4] is None else bool(r[4])]
            for i in range(len(probes)):
                hit, first = r[5 + 2 * i], r[6 + 2 * i]
                out += [None if hit is None else bool(hit), first]
            out.append(qid_of.get(rc.partner.get(q)))
            for sc in scatters:
                cell = sc.get(q)
                out += [None, None, None] if cell is None else \
                    [cell.hits, cell.distinct, cell.control_hits > 0 if rc.partner.get(q) is not None else None]
            rows.append(tuple(out))
    title = "Questions: realized, reachable and first hit per probe, chance control" + _runs_label(run_ids)
    return Table("questions", title, columns, rows)


HITS_COLUMNS = [
    Column("run", "int"), Column("probe"), Column("hits", "int"), Column("questions", "int"),
    Column("share", "frac"), Column("control_questions", "int", label="control questions"),
    Column("control_share", "frac", label="control share"),
]


def hits_table(source: Any, run_ids: Sequence[int]) -> Table:
    """The hit-count distribution per probe: how many questions have 0, 1, 2, ... correct attempts (of
    the questions with attempts of the probe), beside the same count for the chance control (attempts
    hitting the partner question's gold). Luck rarely gives two hits: compare the tails."""
    from reachtui.control import run_control

    con = _conn(source)
    rows: list[tuple] = []
    notes: list[str] = []
    for run_id in run_ids:
        info = run_info(con, run_id)
        rc = run_control(con, run_id, info["protocol"])
        for probe in run_probes(con, run_id):
            cells = list(rc.probe(probe).values())
            if not cells:
                continue
            hits = Counter(c.hits for c in cells)
            ctrl = Counter(c.control_hits for c in cells)
            top = max(c.n for c in cells)
            m = len(cells)
            for h in range(top + 1):
                rows.append((run_id, probe, h, hits.get(h, 0), hits.get(h, 0) / m, ctrl.get(h, 0),
                             ctrl.get(h, 0) / m if len(rc.question_ids) >= 2 else math.nan))
            if m < len(rc.question_ids):
                notes.append(f"run {run_id}, {probe}: {len(rc.question_ids) - m} question(s) have no attempts "
                             "yet: left out")
    title = "Hit counts per question: correct attempts vs chance-control hits" + _runs_label(run_ids)
    return Table("hits", title, list(HITS_COLUMNS), rows, notes=notes)


ATTEMPT_COLUMNS = [
    Column("run", "int"), Column("question_id", label="question"), Column("probe"),
    Column("attempt", "int"), Column("route"), Column("silenced"), Column("temperature", "float"),
    Column("seed", "int"), Column("text"), Column("answer"), Column("rule"), Column("correct", "bool"),
    Column("mean_logprob", "float"), Column("new_tokens", "int"), Column("layers_executed", "int"),
    Column("compute", "int"),
]


def attempts_table(source: Any, run_ids: Sequence[int]) -> Table:
    """The raw attempts, by question (task order), probe, attempt."""
    con = _conn(source)
    rows: list[tuple] = []
    for run_id in run_ids:
        cur = con.execute(
            """SELECT a.run_id, q.qid, a.probe, a.attempt, a.route, a.silenced, a.temperature, a.seed,
                      a.text, a.answer, a.rule, a.correct, a.mean_logprob, a.new_tokens,
                      a.layers_executed, a.compute
               FROM attempts a JOIN questions q ON q.id = a.question_id
               WHERE a.run_id = ? ORDER BY q.idx, a.probe, a.attempt""",
            (run_id,),
        )
        rows += [r[:11] + (None if r[11] is None else bool(r[11]),) + r[12:] for r in cur]
    title = "Attempts" + _runs_label(run_ids)
    return Table("attempts", title, list(ATTEMPT_COLUMNS), rows)


PASSK_COLUMNS = [
    Column("run", "int"), Column("probe"), Column("estimator"), Column("k", "int"),
    Column("value", "frac"), Column("questions", "int"),
    *_ci_columns("value"),
    Column("control", "frac"), *_ci_columns("control"),
    Column("excess", "frac", signed=True),
]


def _probe_groups(con: sqlite3.Connection, run_id: int) -> dict[str, list[tuple[int, int, int | None, int]]]:
    """{probe: [(n attempts, c correct, first hit, number of questions), ...]}: the distinct per-question
    outcomes of each reachability probe, counted by SQL (one pass over the attempts index)."""
    by_probe: dict[str, list[tuple[int, int, int | None, int]]] = {}
    for probe, n, c, first, count in con.execute(
        f"WITH {_PER_PROBE} SELECT probe, n, c, first_hit, count(*) FROM pq GROUP BY probe, n, c, first_hit",
        {"run": run_id},
    ):
        by_probe.setdefault(probe, []).append((n, c, first, count))
    return dict(sorted(by_probe.items(), key=lambda kv: _probe_sort_key(kv[0])))


_curve_points = curves.curve_points


def _curves(con: sqlite3.Connection, run_id: int,
            groups: dict[str, list[tuple[int, int, int | None, int]]] | None = None,
            ) -> dict[str, tuple[str, list[tuple[int, float, int]]]]:
    """{probe: (estimator, [(k, value, questions counted), ...])} for k = 1..max attempts.

    pass@k (unordered probes): the mean over questions with at least k attempts of the unbiased
    estimator. reachable@k (routes, mcts, mcts-blind): the share of questions whose first hit is < k,
    over the questions that have a hit before k or at least k attempts. Python only loops over the
    distinct (n, c, first_hit) groups that SQL returns, never over attempts."""
    by_probe = _probe_groups(con, run_id) if groups is None else groups
    out = {}
    for probe in sorted(by_probe, key=_probe_sort_key):
        ordered = registry.is_ordered(probe)
        out[probe] = ("reachable@k" if ordered else "pass@k", _curve_points(ordered, by_probe[probe]))
    return out


def _control_points(probe: str, items: Iterable[tuple[int, int, int | None]]) -> list[tuple[int, float, int]]:
    """The chance control's budget curve from per-question (attempts, control hits, first control hit):
    the same estimator and counting rule as the probe's own curve, with hits of the partner's gold."""
    groups = [(n, c, f, cnt) for (n, c, f), cnt in Counter(items).items()]
    return _curve_points(registry.is_ordered(probe), groups) if groups else []


def passk_table(source: Any, run_ids: Sequence[int]) -> Table:
    """Budget curves for k = 1..K per probe: unbiased pass@k for `sample` (and other unordered probes),
    reachable@k (first hit < k) for routes and mcts. A question counts at k only when it has at least
    k attempts or a hit before k; `questions` says how many counted. Beside each point: its Wilson 95%
    interval over the questions counted (`value_lo`, `value_hi`; for pass@k, a mean of per-question
    probabilities, this is conservative), the chance control's curve `control` (the probe's attempts
    scored against the partner question's gold, same estimator; `control_lo`, `control_hi`), and
    `excess` = value - control: where excess reaches 0, the probe stops beating chance."""
    from reachtui.control import run_control

    con = _conn(source)
    rows: list[tuple] = []
    notes: list[str] = []
    for run_id in run_ids:
        info = run_info(con, run_id)
        rc = run_control(con, run_id, info["protocol"])
        n_run = con.execute(f"WITH {_RUN_QUESTIONS} SELECT count(*) FROM rq", {"run": run_id}).fetchone()[0]
        for probe, (estimator, points) in _curves(con, run_id).items():
            ctrl = {k: (v, c) for k, v, c in _control_points(
                probe, [(s.n, s.control_hits, s.control_first) for s in rc.probe(probe).values()])}
            for k, value, counted in points:
                c_value, c_counted = ctrl.get(k, (math.nan, 0))
                if n_run < 2:
                    c_value = math.nan
                lo, hi = stats.wilson(value * counted, counted) if counted else stats.NAN_PAIR
                c_lo, c_hi = stats.wilson(c_value * c_counted, c_counted) if c_counted and not \
                    _is_missing(c_value) else stats.NAN_PAIR
                rows.append((run_id, probe, estimator, k, value, counted, lo, hi, c_value, c_lo, c_hi,
                             _diff(value, c_value)))
            big_k = len(points)
            short = n_run - points[-1][2]
            if short > 0:
                notes.append(f"run {run_id}, {probe}: {short} question(s) have fewer than {big_k} attempts "
                             "(or none yet): left out where k is beyond them")
    notes.append("95% intervals: Wilson over the questions counted; control = the same curve with each "
                 "question's attempts scored against its partner question's gold (chance control)")
    title = "Budget curves: pass@k (sample), reachable@k (routes, mcts), chance control" + _runs_label(run_ids)
    return Table("passk", title, list(PASSK_COLUMNS), rows, notes=notes)


MLP_COLUMNS = [
    Column("run", "int"), Column("set", label="failure set"), Column("layer", "int"),
    Column("failure_n", "int", label="set n"), Column("repaired", "int"),
    Column("repair_rate", "frac", label="repair"), Column("realized_n", "int", label="realized n"),
    Column("broken", "int"), Column("break_rate", "frac", label="break"), Column("best", "bool"),
]


def mlp_scan_table(source: Any, run_ids: Sequence[int]) -> Table:
    """The one-MLP silencing scan as stored: per set and layer, repaired/|F| and broken/|R|; `best`
    marks each set's best block (highest repair rate, then lowest break rate, then lowest layer)."""
    con = _conn(source)
    rows: list[tuple] = []
    notes: list[str] = []
    for run_id in run_ids:
        cur = con.execute(
            """SELECT s.run_id, f.name, s.layer, s.failure_n, s.repaired, s.repair_rate, s.realized_n,
                      s.broken, s.break_rate,
                      row_number() OVER (PARTITION BY s.set_id ORDER BY s.repair_rate IS NULL,
                        s.repair_rate DESC, s.break_rate IS NULL, s.break_rate, s.layer) = 1
               FROM mlp_scan s JOIN failure_sets f ON f.id = s.set_id
               WHERE s.run_id = ? ORDER BY s.set_id, s.layer""",
            (run_id,),
        )
        got = [r[:9] + (bool(r[9]),) for r in cur]
        if not got:
            notes.append(f"run {run_id} has no MLP scan (audit with --mlp-scan)")
        rows += got
    title = "MLP silencing scan: repair rate on the failure set, break rate on the realized set"
    return Table("mlp-scan", title + _runs_label(run_ids), list(MLP_COLUMNS), rows, notes=notes)


def mlp_best(source: Any, run_id: int) -> list[dict[str, Any]]:
    """The best block of each scanned failure set (the `best` rows of `mlp_scan_table`), as dicts."""
    table = mlp_scan_table(source, [run_id])
    names = [c.name for c in table.columns]
    return [row for row in (dict(zip(names, r)) for r in table.rows) if row["best"]]


# --------------------------------------------------------------------------------------------------
# Matched comparison of two runs
# --------------------------------------------------------------------------------------------------

CELLS = ("gained", "lost", "kept", "never")  # B vs A: gained = not in A, in B; lost = in A, not in B


def transition(a: bool, b: bool) -> str:
    if a and b:
        return "kept"
    if a:
        return "lost"
    if b:
        return "gained"
    return "never"


COMPARE_COLUMNS = [
    Column("probe"),
    Column("n", "int"),
    Column("realized_a", "frac", label="realized A"),
    Column("realized_b", "frac", label="realized B"),
    Column("realized_delta", "frac", label="Δ realized", signed=True),
    *_ci_columns("realized_delta", "Δ realized", signed=True),
    Column("reachable_a", "frac", label="reachable A"),
    Column("reachable_b", "frac", label="reachable B"),
    Column("reachable_delta", "frac", label="Δ reachable", signed=True),
    *_ci_columns("reachable_delta", "Δ reachable", signed=True),
    Column("realized_gained", "int", label="realized gained"),
    Column("realized_lost", "int", label="realized lost"),
    Column("realized_kept", "int", label="realized kept"),
    Column("realized_never", "int", label="realized never"),
    Column("realized_p", "pvalue", label="p realized"),
    Column("reachable_gained", "int", label="reachable gained"),
    Column("reachable_lost", "int", label="reachable lost"),
    Column("reachable_kept", "int", label="reachable kept"),
    Column("reachable_never", "int", label="reachable never"),
    Column("reachable_p", "pvalue", label="p reachable"),
    Column("matched", "bool"),
]


@dataclass
class Comparison:
    """Two runs compared question by question on the questions both have."""

    run_a: dict[str, Any]
    run_b: dict[str, Any]
    matched: bool  # same protocol hash
    probes: list[str]  # reachability probes both runs have
    n_common: int
    table: Table
    # (measure, probe) -> cell -> question ids in task order; measure "realized" (probe None) or
    # "reachable" (probe = the probe)
    cells: dict[tuple[str, str | None], dict[str, list[str]]]

    def ids(self, measure: str, cell: str, probe: str | None = None) -> list[tuple[str | None, str]]:
        """[(probe, question id)] in a transition cell; `probe` None with "reachable" = every probe."""
        if cell not in CELLS:
            raise ReachError(f"unknown transition {cell!r}; choose one of {', '.join(CELLS)}")
        if measure == "realized":
            return [(None, q) for q in self.cells[("realized", None)][cell]]
        if measure != "reachable":
            raise ReachError(f"unknown measure {measure!r}; use realized, reachable or a probe name")
        probes = self.probes if probe is None else [probe]
        for p in probes:
            if p not in self.probes:
                raise ReachError(
                    f"probe {p!r} is not in both runs; common probes: {', '.join(self.probes) or 'none'}"
                )
        return [(p, q) for p in probes for q in self.cells[("reachable", p)][cell]]

    def list_table(self, spec: str) -> Table:
        """The question ids of one transition cell, `spec` = MEASURE:CELL with MEASURE realized,
        reachable (every common probe) or a probe name (reachable under it); e.g. reachable:lost."""
        measure, sep, cell = spec.strip().rpartition(":")
        if not sep or not measure:
            raise ReachError(
                f"--list wants MEASURE:CELL (e.g. reachable:lost, realized:gained, routes:kept), not {spec!r}"
            )
        probe = None
        if measure not in ("realized", "reachable"):
            measure, probe = "reachable", measure
        found = self.ids(measure, cell, probe)
        a, b = self.run_a["run"], self.run_b["run"]
        what = {"gained": f"not in run {a}, in run {b}", "lost": f"in run {a}, not in run {b}",
                "kept": "in both runs", "never": "in neither run"}[cell]
        label = "realized" if measure == "realized" else f"reachable under {probe or 'each probe'}"
        table = Table(
            "compare-list",
            f"Questions {label} {what} ({spec})",
            [Column("measure"), Column("probe"), Column("question_id", label="question")],
            [(measure, p, q) for p, q in found],
            notes=list(self.table.notes),
            warnings=list(self.table.warnings),
        )
        return table


def _marginal(vectors: Counter, dims: tuple[int, ...]) -> Counter:
    """{vector restricted to dims: count}."""
    out: Counter = Counter()
    for key, cnt in vectors.items():
        out[tuple(key[d] for d in dims)] += cnt
    return out


def _status_by_qid(con: sqlite3.Connection, run_id: int, probes: list[str]) -> dict[str, list]:
    """{qid: [idx, realized, hit(probe 0), hit(probe 1), ...]} for the run's questions (None unknown)."""
    params: dict[str, Any] = {"run": run_id}
    piv = _pivot(probes, params)
    sql = (
        f"WITH {_RUN_QUESTIONS}, piv AS MATERIALIZED ({piv}) SELECT q.qid, q.idx, real.correct"
        + "".join(f", piv.hit{i}" for i in range(len(probes)))
        + " FROM rq JOIN questions q ON q.id = rq.question_id"
        f" LEFT JOIN attempts real ON real.run_id = :run AND {realized_where('real')}"
        " AND real.question_id = q.id"
        " LEFT JOIN piv ON piv.question_id = q.id"
    )
    return {r[0]: list(r[1:]) for r in con.execute(sql, params)}


def compare_runs(source: Any, run_a: int, run_b: int, *, allow_unmatched: bool = False,
                 bootstrap: int = stats.DEFAULT_BOOTSTRAP, seed: int = 0) -> Comparison:
    """Run B against run A (B - A), per reachability probe both have, on the questions both have
    (matched by the task's question id). Refuses differing protocol hashes unless `allow_unmatched`,
    in which case every row is marked matched = false and the table carries a warning.

    Every Δ has a 95% paired-bootstrap interval (`*_delta_lo`, `*_delta_hi`): the compared questions are
    resampled with replacement, each keeping both runs' outcomes (`bootstrap` replicates, seeded from
    `seed` and the probe), beside the exact McNemar p-value of the same transitions."""
    con = _conn(source)
    info_a, info_b = run_info(con, run_a), run_info(con, run_b)
    matched = info_a["protocol_hash"] == info_b["protocol_hash"]
    warnings: list[str] = []
    if not matched:
        what = (f"runs {run_a} and {run_b} have different protocols "
                f"({info_a['protocol_hash']} vs {info_b['protocol_hash']})")
        if not allow_unmatched:
            raise ReachError(f"{what}: not a matched comparison (--allow-unmatched to compare anyway)")
        warnings.append(f"UNMATCHED PROTOCOLS: {what}; differences may come from the protocol, not the model")
    probes_a, probes_b = run_probes(con, run_a), run_probes(con, run_b)
    probes = [p for p in probes_a if p in probes_b]
    notes: list[str] = []
    for run, own, other in ((run_a, probes_a, probes_b), (run_b, probes_b, probes_a)):
        only = [p for p in own if p not in other]
        if only:
            notes.append(f"probe(s) only in run {run}, not compared: {', '.join(only)}")
    sa, sb = _status_by_qid(con, run_a, probes), _status_by_qid(con, run_b, probes)
    common = sorted((q for q in sa if q in sb), key=lambda q: (sa[q][0], q))
    if info_a["task_sha256"] != info_b["task_sha256"]:
        notes.append(f"the runs are on different task files ({info_a['task']} vs {info_b['task']}): "
                     "questions matched by id")
    notes.insert(0, f"compared on the {len(common)} question(s) both runs have "
                    f"(run {run_a}: {len(sa)}, run {run_b}: {len(sb)})"
                 + ("" if len(common) == len(sa) == len(sb) else "; the others are left out"))
    if info_a["status"] != "complete" or info_b["status"] != "complete":
        notes.append(f"run status: {run_a} {info_a['status']}, {run_b} {info_b['status']}")

    cells: dict[tuple[str, str | None], dict[str, list[str]]] = {
        ("realized", None): {c: [] for c in CELLS}}
    unknown_real = 0
    for q in common:
        ra, rb = sa[q][1], sb[q][1]
        if ra is None or rb is None:
            unknown_real += 1
            continue
        cells[("realized", None)][transition(bool(ra), bool(rb))].append(q)
    if unknown_real:
        notes.append(f"{unknown_real} common question(s) lack a realized attempt in a run: "
                     "left out of the realized transitions")
    rows: list[tuple] = []
    for i, p in enumerate(probes):
        cell = {c: [] for c in CELLS}
        real_cell = {c: 0 for c in CELLS}
        vectors: Counter = Counter()  # (realized A, realized B, reachable A, reachable B) per question
        for q in common:
            ra, rb, ha, hb = sa[q][1], sb[q][1], sa[q][2 + i], sb[q][2 + i]
            if None in (ra, rb, ha, hb):
                continue
            cell[transition(bool(ha), bool(hb))].append(q)
            real_cell[transition(bool(ra), bool(rb))] += 1
            vectors[(bool(ra), bool(rb), bool(ha), bool(hb))] += 1
        # realized Δ with one seed for every probe row: the same questions give the same interval
        real_lo, real_hi = stats.bootstrap_means(
            _marginal(vectors, (0, 1)),
            [lambda m: m[1] - m[0]], B=bootstrap, seed=derive_seed("compare", seed, "realized"))[0]
        reach_lo, reach_hi = stats.bootstrap_means(
            _marginal(vectors, (2, 3)), [lambda m: m[1] - m[0]], B=bootstrap,
            seed=derive_seed("compare", seed, p))[0]
        cells[("reachable", p)] = cell
        n = sum(len(v) for v in cell.values())
        if n < len(common):
            notes.append(f"{p}: {len(common) - n} common question(s) lack attempts in a run: left out")
        real_a = _frac(real_cell["kept"] + real_cell["lost"], n)
        real_b = _frac(real_cell["kept"] + real_cell["gained"], n)
        reach_a = _frac(len(cell["kept"]) + len(cell["lost"]), n)
        reach_b = _frac(len(cell["kept"]) + len(cell["gained"]), n)
        rows.append((
            p, n, real_a, real_b, _diff(real_b, real_a), real_lo, real_hi,
            reach_a, reach_b, _diff(reach_b, reach_a), reach_lo, reach_hi,
            real_cell["gained"], real_cell["lost"], real_cell["kept"], real_cell["never"],
            mcnemar_exact(real_cell["gained"], real_cell["lost"]),
            len(cell["gained"]), len(cell["lost"]), len(cell["kept"]), len(cell["never"]),
            mcnemar_exact(len(cell["gained"]), len(cell["lost"])),
            matched,
        ))
    if not probes:
        rc = cells[("realized", None)]
        n = sum(len(v) for v in rc.values())
        real_a = _frac(len(rc["kept"]) + len(rc["lost"]), n)
        real_b = _frac(len(rc["kept"]) + len(rc["gained"]), n)
        vectors = Counter({(True, True): len(rc["kept"]), (True, False): len(rc["lost"]),
                           (False, True): len(rc["gained"]), (False, False): len(rc["never"])})
        real_lo, real_hi = stats.bootstrap_means(+vectors, [lambda m: m[1] - m[0]], B=bootstrap,
                                                 seed=derive_seed("compare", seed, "realized"))[0]
        rows.append((None, n, real_a, real_b, _diff(real_b, real_a), real_lo, real_hi,
                     math.nan, math.nan, math.nan, math.nan, math.nan,
                     len(rc["gained"]), len(rc["lost"]), len(rc["kept"]), len(rc["never"]),
                     mcnemar_exact(len(rc["gained"]), len(rc["lost"])), None, None, None, None,
                     math.nan, matched))
        notes.append("the runs share no reachability probe: realized only")
    notes.append("Δ intervals: 95% paired bootstrap over the compared questions"
                 + (f" ({bootstrap} replicates, seed {seed})" if bootstrap > 0 else " (off)"))
    title = (f"Run {run_b} ({info_b['model']}) vs run {run_a} ({info_a['model']}) on {info_a['task']}: "
             f"Δ = B − A (95% paired bootstrap); transitions A→B; exact McNemar p")
    table = Table("compare", title, list(COMPARE_COLUMNS), rows, notes=notes, warnings=warnings)
    return Comparison(info_a, info_b, matched, probes, len(common), table, cells)


def compare_table(source: Any, run_a: int, run_b: int, *, allow_unmatched: bool = False,
                  bootstrap: int = stats.DEFAULT_BOOTSTRAP, seed: int = 0) -> Table:
    return compare_runs(source, run_a, run_b, allow_unmatched=allow_unmatched, bootstrap=bootstrap,
                        seed=seed).table


# --------------------------------------------------------------------------------------------------
# One entry point
# --------------------------------------------------------------------------------------------------


def build_table(source: Any, name: str, run_ids: Sequence[int], *, allow_unmatched: bool = False,
                bootstrap: int = stats.DEFAULT_BOOTSTRAP, seed: int = 0) -> Table:
    """Build table `name` (one of TABLES) for `run_ids` (compare takes exactly two: A then B).
    `bootstrap` replicates (0: none) and their `seed` decide the bootstrap intervals of summary/compare."""
    if name == "summary":
        return summary_table(source, run_ids, bootstrap=bootstrap, seed=seed)
    if name == "questions":
        return questions_table(source, run_ids)
    if name == "attempts":
        return attempts_table(source, run_ids)
    if name == "passk":
        return passk_table(source, run_ids)
    if name == "hits":
        return hits_table(source, run_ids)
    if name == "mlp-scan":
        return mlp_scan_table(source, run_ids)
    if name == "compare":
        if len(run_ids) != 2:
            raise ReachError("the compare table needs two runs: --run A --run B")
        return compare_table(source, run_ids[0], run_ids[1], allow_unmatched=allow_unmatched,
                             bootstrap=bootstrap, seed=seed)
    raise ReachError(f"unknown table {name!r}; choose one of {', '.join(TABLES)}")


def compare_views(comparison: Comparison) -> list[Table]:
    """The comparison for people (terminal, md, latex): scores per probe, then the transitions.
    Data formats use `comparison.table` itself (one wide row per probe)."""
    t = comparison.table
    d = t.dicts()
    a, b = comparison.run_a["run"], comparison.run_b["run"]
    scores = Table(
        "compare-scores",
        t.title,
        [Column("probe"), Column("n", "int"),
         Column("realized_a", "frac", label=f"realized {a}"), Column("realized_b", "frac", label=f"realized {b}"),
         Column("realized_delta", "frac", label="Δ", signed=True), *_ci_columns("realized_delta", "Δ", True),
         Column("realized_p", "pvalue", label="p"),
         Column("reachable_a", "frac", label=f"reachable {a}"),
         Column("reachable_b", "frac", label=f"reachable {b}"),
         Column("reachable_delta", "frac", label="Δ", signed=True), *_ci_columns("reachable_delta", "Δ", True),
         Column("reachable_p", "pvalue", label="p")],
        [],
        notes=[],
        warnings=list(t.warnings),
    )
    scores.rows = [tuple(r[c.name] for c in scores.columns) for r in d]
    trans = Table(
        "compare-transitions",
        f"Question transitions, run {a} to run {b}",
        [Column("measure"), Column("n", "int"), Column("gained", "int"), Column("lost", "int"),
         Column("kept", "int"), Column("never", "int"), Column("p", "pvalue")],
        [],
        notes=list(t.notes),
        warnings=list(t.warnings),
    )
    seen_realized = set()
    for r in d:
        key = (r["n"], r["realized_gained"], r["realized_lost"], r["realized_kept"], r["realized_never"])
        if key not in seen_realized:
            seen_realized.add(key)
            label = "realized" if len(d) == 1 or len({x["n"] for x in d}) == 1 else f"realized ({r['probe']})"
            trans.rows.append((label, r["n"]) + key[1:] + (r["realized_p"],))
    for r in d:
        if r["probe"] is not None:
            trans.rows.append((f"reachable {r['probe']}", r["n"], r["reachable_gained"], r["reachable_lost"],
                               r["reachable_kept"], r["reachable_never"], r["reachable_p"]))
    return [scores, trans]
