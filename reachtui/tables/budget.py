"""Budgets: how reachability grows with the number of attempts. The `passk` table (pass@k or reachable@k
for k = 1..K per probe, beside the chance control's curve), the `hits` table (questions with 0, 1, 2, ...
correct attempts, beside the control's hits) and the curve lines under the audit's closing table.

The estimators are `reachtui.curves`' (pass@k for exchangeable attempts, reachable@k for ordered ones, as
`registry.is_ordered` says); they run over the distinct per-question outcomes (n, c, first hit), counted from
the run's one pass (`reachtui.control.run_control`) or by SQL (`probe_groups`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from reachtui import curves, stats
from reachtui.probes import registry
from reachtui.tables.formats import percent
from reachtui.control import RunControl
from reachtui.tables.source import ci_columns, controls, left_out_notes, run_probes, runs_label
from reachtui.tables.table import Column, Table

#: {probe: [(n attempts, c correct, first hit k or None, number of questions), ...]}
Groups = dict[str, list[curves.Group]]
Points = list[tuple[int, float, int]]

PASSK_COLUMNS = [
    Column("run", "int"), Column("probe"), Column("estimator"), Column("k", "int"),
    Column("value", "frac"), Column("questions", "int"),
    *ci_columns("value"),
    Column("control", "frac"), *ci_columns("control"),
    Column("excess", "frac", signed=True),
]

HITS_COLUMNS = [
    Column("run", "int"), Column("probe"), Column("hits", "int"), Column("questions", "int"),
    Column("share", "frac"), Column("control_questions", "int", label="control questions"),
    Column("control_share", "frac", label="control share"),
]


def probe_groups(store, run_id: int) -> Groups:
    """The distinct per-question outcomes of each reachability probe, counted by the store (one pass over the
    attempts index), in display order."""
    by_probe: Groups = {}
    for probe, n, c, first, count in store.probe_groups(run_id):
        by_probe.setdefault(probe, []).append((n, c, first, count))
    return dict(sorted(by_probe.items(), key=lambda kv: registry.sort_key(kv[0])))


def _group_order(item: tuple[tuple[int, int, int | None], int]) -> tuple:
    (n, c, f), _count = item
    return (n, c, f is not None, f or 0)


def groups_of(rc: RunControl) -> Groups:
    """`probe_groups`' {probe: [(n, c, first_hit, questions)]} for the reachability probes, from the
    per-question outcomes `reachtui.control.run_control` already read (no second pass over the attempts)."""
    out = {}
    for probe in sorted((p for p in rc.per if registry.is_reach(p)), key=registry.sort_key):
        counts = Counter((s.n, s.hits, s.first_hit) for s in rc.per[probe].values())
        # in probe_groups' order (SQL's, NULL first): the curves sum their groups in the same order
        out[probe] = [(n, c, f, cnt) for (n, c, f), cnt in sorted(counts.items(), key=_group_order)]
    return out


def estimator(probe: str) -> str:
    return "reachable@k" if registry.is_ordered(probe) else "pass@k"


def probe_curves(store, run_id: int, groups: Groups | None = None) -> dict[str, tuple[str, Points]]:
    """{probe: (estimator, [(k, value, questions counted), ...])} for k = 1..max attempts
    (`curves.curve_points`). Python only loops over the distinct (n, c, first_hit) groups that SQL
    returns, never over attempts."""
    by_probe = probe_groups(store, run_id) if groups is None else groups
    out = {}
    for probe in sorted(by_probe, key=registry.sort_key):
        out[probe] = (estimator(probe), curves.curve_points(registry.is_ordered(probe), by_probe[probe]))
    return out


def control_points(probe: str, items: Iterable[tuple[int, int, int | None]]) -> Points:
    """The chance control's budget curve from per-question (attempts, control hits, first control hit):
    the same estimator and counting rule as the probe's own curve, with hits of the partner's gold."""
    groups = [(n, c, f, cnt) for (n, c, f), cnt in Counter(items).items()]
    return curves.curve_points(registry.is_ordered(probe), groups) if groups else []


def passk_table(store, run_ids: Sequence[int]) -> Table:
    """Budget curves for k = 1..K per probe: unbiased pass@k for `sample` (and other unordered probes),
    reachable@k (first hit at or before k) for routes and mcts. A question counts at k only when it has
    at least k attempts or a hit by k; `questions` says how many counted. Beside each point: its Wilson
    95% interval over the questions counted (`value_lo`, `value_hi`; for pass@k, a mean of per-question
    probabilities, this is conservative), the chance control's curve `control` (the probe's attempts
    scored against the partner question's gold, same estimator; `control_lo`, `control_hi`), and
    `excess` = value - control: where excess reaches 0, the probe stops beating chance."""
    rows: list[tuple] = []
    notes: list[str] = []
    for run_id, _info, rc in controls(store, run_ids):
        n_run = len(rc.question_ids)     # the run's questions, read with the control's golds
        for probe, (est, points) in probe_curves(store, run_id, groups_of(rc)).items():
            ctrl = {k: (v, c) for k, v, c in control_points(
                probe, [(s.n, s.control_hits, s.control_first) for s in rc.probe(probe).values()])}
            for k, value, counted in points:
                c_value, c_counted = ctrl.get(k, (math.nan, 0))
                if n_run < 2:
                    c_value = math.nan
                lo, hi = stats.wilson(value * counted, counted) if counted else stats.NAN_PAIR
                c_lo, c_hi = stats.wilson(c_value * c_counted, c_counted) if c_counted and not \
                    stats.is_missing(c_value) else stats.NAN_PAIR
                rows.append((run_id, probe, est, k, value, counted, lo, hi, c_value, c_lo, c_hi,
                             stats.diff(value, c_value)))
            big_k = len(points)
            short = n_run - points[-1][2]
            if short > 0:
                notes.append(f"run {run_id}, {probe}: {short} question(s) have fewer than {big_k} attempts "
                             "(or none yet): left out where k is beyond them")
    notes += left_out_notes(store, run_ids)
    notes.append("95% intervals: Wilson over the questions counted; control = the same curve with each "
                 "question's attempts scored against its partner question's gold (chance control)")
    title = (f"Budget curves: pass@k ({registry.SAMPLE.name}), reachable@k ({registry.ROUTES.name}, "
             f"{registry.MCTS.name}), chance control" + runs_label(run_ids))
    return Table("passk", title, list(PASSK_COLUMNS), rows, notes=notes)


def hits_table(store, run_ids: Sequence[int]) -> Table:
    """The hit-count distribution per probe: how many questions have 0, 1, 2, ... correct attempts (of
    the questions with attempts of the probe), beside the same count for the chance control (attempts
    hitting the partner question's gold). Luck rarely gives two hits: compare the tails."""
    rows: list[tuple] = []
    notes: list[str] = []
    for run_id, _info, rc in controls(store, run_ids):
        for probe in run_probes(store, run_id):
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
    notes += left_out_notes(store, run_ids)
    title = "Hit counts per question: correct attempts vs chance-control hits" + runs_label(run_ids)
    return Table("hits", title, list(HITS_COLUMNS), rows, notes=notes)


def curve_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per probe of `summary_rows` with a budget curve: its value at k = 1, 2, 4, ... and K."""
    out = []
    for r in rows:
        curve = r.get("pass_at_k") or r.get("reachable_at_k")
        if not curve:
            continue
        name = "pass@k" if r.get("pass_at_k") else "reachable@k"
        big_k = len(curve)
        ks = sorted({1, 2, 4, 8, 16, 32, 64, big_k} & set(range(1, big_k + 1)))
        out.append(f"{r['probe']} {name}: " + "  ".join(f"k={k} {percent(curve[k - 1])}" for k in ks))
    return out
