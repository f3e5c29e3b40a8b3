"""The chance control: how much of "reachable" luck alone would give (pure Python + SQL).

Each question's stored attempts are re-scored against the gold answer of *another* question of the run
(its partner: `derangement`, within answer-format strata: `stratum`), through the one grader's
`equivalent`. Nothing is generated again: the control is computed at table time from the store, so it
works for imported runs too. `run_control` also gathers each (probe, question)'s answer scatter.
"""
from __future__ import annotations

import math
import random
import sqlite3
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

from reachtui.grading import FORMATS, equivalent, normalize_number
from reachtui.probes import registry
from reachtui.seeds import derive_seed

STRATA_SCHEMES = ("format", "none")
ALL = "all"


def stratum(gold: str, fmt: str = "number") -> str:
    """The answer-format stratum of a gold answer (`strata = "format"`, the default):

    - number (and math answers that are plain numbers): sign, integer or not, and the number of digits of
      the integer part: "14" -> "+int:2", "-3" -> "-int:1", "0.75" -> "+dec:1", "1/3" -> "+dec:1",
      "1200" -> "+int:4". A model that writes some two-digit number hits a two-digit gold by luck far more
      often than a four-digit one, so luck is measured against golds of the same magnitude.
    - math answers that are not plain numbers: "expr"; golds the number format cannot read: "text".
    - choice: one stratum (every letter is a possible gold); exact: one stratum.
    """
    if fmt in ("choice", "exact"):
        return fmt
    num = normalize_number(str(gold))
    if num is None:
        return "expr" if fmt == "math" else "text"
    value = Fraction(num)
    sign = "-" if value < 0 else "+"
    kind = "int" if value.denominator == 1 else "dec"
    return f"{sign}{kind}:{len(str(abs(math.trunc(value))))}"


def _stratum_order(name: str) -> tuple:
    """Numbers by sign (negative first, largest magnitude first), kind and magnitude; then the rest."""
    head = name.split("|", 1)[0]
    if len(head) > 1 and head[0] in "+-" and ":" in head:
        kind, _, digits = head[1:].partition(":")
        d = int(digits) if digits.isdigit() else 0
        return (0, 0 if head[0] == "-" else 1, -d if head[0] == "-" else d, kind)
    return (1, head)


def assign_strata(golds: Sequence[str], fmt: str = "number", scheme: str = "format") -> list[str]:
    """The stratum of each gold (in the given order). `scheme = "none"` puts every question in one stratum.
    A stratum with a single question cannot be deranged: it joins its neighbour in stratum order (numbers
    by sign, kind and magnitude; "expr" and "text" last), the previous one, or the next when it is first."""
    if scheme == "none" or fmt not in FORMATS:
        return [ALL] * len(golds)
    raw = [stratum(g, fmt) for g in golds]
    members: dict[str, list[int]] = {}
    for i, s in enumerate(raw):
        members.setdefault(s, []).append(i)
    order = sorted(members, key=_stratum_order)
    groups: list[tuple[str, list[int]]] = [(s, list(members[s])) for s in order]
    merged: list[tuple[str, list[int]]] = []
    carry: tuple[str, list[int]] | None = None  # a leading singleton waiting for the next stratum
    for name, idx in groups:
        if carry is not None:
            name, idx = f"{carry[0]}|{name}", carry[1] + idx
            carry = None
        if len(idx) >= 2:
            merged.append((name, idx))
        elif merged:  # join the previous stratum
            prev_name, prev_idx = merged[-1]
            merged[-1] = (f"{prev_name}|{name}", prev_idx + idx)
        else:
            carry = (name, idx)
    if carry is not None:  # one question in all: nothing to pair it with
        merged.append(carry)
    out = [""] * len(golds)
    for name, idx in merged:
        for i in idx:
            out[i] = name
    return out


def derangement(golds: Sequence[str], fmt: str = "number", *, seed: int = 0,
                scheme: str = "format") -> list[int | None]:
    """partner[i]: the position of question i's partner (golds in task order); never i, always in i's
    stratum; None only for a question alone in the run.

    Within each stratum the questions in task order are shuffled by a `random.Random` seeded from (control
    seed, stratum name), and each question's partner is the next one in the shuffled cycle: one cycle per
    stratum, so no question is its own partner and every question is the partner of exactly one other (a
    bijection). Partners may share a gold (two questions whose answer is 14): scoring against such a
    partner is what luck would give, so it is kept; and a probe that always answers the same constant c
    is control-reachable on exactly as many questions as have c as their gold."""
    names = assign_strata(golds, fmt, scheme)
    by_stratum: dict[str, list[int]] = {}
    for i, s in enumerate(names):
        by_stratum.setdefault(s, []).append(i)
    partner: list[int | None] = [None] * len(golds)
    for name, idx in by_stratum.items():
        if len(idx) < 2:
            continue
        cycle = list(idx)
        random.Random(derive_seed("control", seed, name)).shuffle(cycle)
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            partner[a] = b
    return partner


@dataclass
class Scatter:
    """One (probe, question): attempts, correct attempts, attempts without an extracted answer, distinct
    extracted answers, attempts whose answer equals the partner's gold (control hits) and the first such
    attempt index."""

    n: int = 0
    hits: int = 0  # correct attempts (against the question's own gold, as stored)
    no_answer: int = 0
    distinct: int = 0
    control_hits: int = 0
    control_first: int | None = None  # the k (1-based) of the first attempt hitting the partner's gold


@dataclass
class RunControl:
    fmt: str
    seed: int
    scheme: str
    question_ids: list[int]  # the run's questions in task order
    partner: dict[int, int | None]  # question_id -> partner question_id
    stratum: dict[int, str]
    per: dict[str, dict[int, Scatter]] = field(default_factory=dict)  # probe -> question_id -> Scatter

    def probe(self, probe: str) -> dict[int, Scatter]:
        return self.per.get(probe, {})


def control_params(protocol: dict[str, Any]) -> tuple[str, int, str]:
    """(answer format, control seed, strata scheme) from a stored protocol dict; defaults for runs
    recorded before the protocol had a `control` table (or lenient values for hand-written JSON)."""
    fmt = protocol.get("answer_format") or "number"
    params = protocol.get("control") if isinstance(protocol.get("control"), dict) else {}
    try:
        seed = int(params.get("seed", 0))
    except (TypeError, ValueError):
        seed = 0
    scheme = params.get("strata", "format")
    return (fmt if fmt in FORMATS else "number", seed, scheme if scheme in STRATA_SCHEMES else "format")


_RUN_QUESTIONS = """
  WITH rq AS (SELECT question_id FROM run_questions WHERE run_id = :run
              UNION SELECT DISTINCT question_id FROM attempts WHERE run_id = :run)
  SELECT q.id, q.gold FROM rq JOIN questions q ON q.id = rq.question_id ORDER BY q.idx, q.qid"""

_ANSWER_GROUPS = f"""
  SELECT probe, question_id, answer, count(*), min(attempt) + 1, coalesce(sum(correct = 1), 0) FROM attempts
  WHERE run_id = :run AND probe IN {registry.sql_list(p.name for p in registry.PROBES)}
  GROUP BY probe, question_id, answer"""


def run_control(con: sqlite3.Connection, run_id: int, protocol: dict[str, Any]) -> RunControl:
    """The run's derangement and every (probe, question)'s scatter and control hits (realized included),
    from one GROUP BY over the attempts; Python only sees distinct (probe, question, answer) groups."""
    fmt, seed, scheme = control_params(protocol)
    questions = con.execute(_RUN_QUESTIONS, {"run": run_id}).fetchall()
    ids = [q for q, _g in questions]
    golds = [g for _q, g in questions]
    partner_pos = derangement(golds, fmt, seed=seed, scheme=scheme)
    names = assign_strata(golds, fmt, scheme)
    partner = {q: (None if p is None else ids[p]) for q, p in zip(ids, partner_pos)}
    partner_gold = {q: (None if p is None else golds[p]) for q, p in zip(ids, partner_pos)}
    rc = RunControl(fmt, seed, scheme, ids, partner, dict(zip(ids, names)))
    cache: dict[tuple[str, str], bool] = {}
    per = rc.per
    key = cell = gold = None
    for probe, q, answer, count, first, correct in con.execute(_ANSWER_GROUPS, {"run": run_id}):
        if (probe, q) != key:  # groups come ordered by (probe, question): one lookup per question
            key = (probe, q)
            cells = per.get(probe)
            if cells is None:
                cells = per[probe] = {}
            cell = cells.get(q)
            if cell is None:
                cell = cells[q] = Scatter()
            gold = partner_gold.get(q)
        cell.n += count
        cell.hits += correct
        if answer is None:
            cell.no_answer += count
            continue
        cell.distinct += 1
        if gold is None:
            continue
        hit = cache.get((answer, gold))
        if hit is None:
            hit = cache[(answer, gold)] = equivalent(answer, gold, fmt)
        if hit:
            cell.control_hits += count
            if cell.control_first is None or first < cell.control_first:
                cell.control_first = first
    return rc
