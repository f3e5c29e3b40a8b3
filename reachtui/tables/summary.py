"""The summary: per run and reachability probe, realized against reachable and what makes reachable
honest (the chance control and excess, robust reachability, the answer-blind selectors and retained,
the failure set, the answer scatter, 95% intervals). `summary_rows` gives the numbers as dicts,
`summary_table` the exported table, `summary_views` its two narrower tables for people, `summary_lines`
one line per probe (the audit's closing note), `header_lines` the app's intervals line; `closing_table`
and `closing_lines` are what `reachtui audit` prints when it ends.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from reachtui import curves, outcomes, stats
from reachtui.control import Graded, RunControl, run_control
from reachtui.probes import registry
from reachtui.seeds import derive_seed
from reachtui.stats import diff, frac, is_missing
from reachtui.tables.budget import control_points, curve_lines, groups_of, probe_curves
from reachtui.tables.formats import fold_intervals, human_cells, percent
from reachtui.tables.mlp import mlp_lines
from reachtui.tables.source import (budgets, chance, ci_columns, left_out_note, left_out_notes, run_info,
                                    run_notes, runs_label)
from reachtui.tables.table import Column, Table, select

REALIZED = registry.REALIZED.name

SUMMARY_COLUMNS = [
    Column("run", "int"),
    Column("model"),
    Column("task"),
    Column("protocol_hash", label="protocol"),
    Column("probe"),
    Column("budget", "int", label="K"),
    Column("n", "int"),
    Column("realized", "frac"),
    *ci_columns("realized"),
    Column("reachable", "frac"),
    *ci_columns("reachable"),
    Column("control", "frac"),
    *ci_columns("control"),
    Column("excess", "frac", signed=True),
    *ci_columns("excess", signed=True),
    Column("gap", "frac", signed=True),
    *ci_columns("gap", signed=True),
    Column("robust", "frac", label="robust (2+ hits)"),
    *ci_columns("robust", "robust"),
    Column("blind_vote", "frac", label="blind vote"),
    Column("blind_logprob", "frac", label="blind logprob"),
    Column("retained", "frac", label="retained (vote)", signed=True),
    *ci_columns("retained", "retained (vote)", signed=True),
    Column("retained_logprob", "frac", label="retained (logprob)", signed=True),
    *ci_columns("retained_logprob", "retained (logprob)", signed=True),
    Column("failure_set_size", "int", label="failure set"),
    Column("chance", "frac"),
    Column("answers", "float", label="answers/question"),
    Column("no_answer", "frac", label="no answer"),
]

#: What the intervals and the chance control mean, said under the summary (and the audit's closing table).
SUMMARY_NOTE = (
    "95% intervals: Wilson for single proportions (realized, reachable, control, robust), a seeded "
    "bootstrap over questions for gap, excess and retained; retained = (blind - realized) / (reachable - "
    "realized) only where the gap is positive (no gain to retain otherwise), its interval only where the "
    "gap's interval lies above 0 (the ratio is unbounded otherwise); control = the probe's answers scored "
    "against another question's gold of the same answer stratum (chance control); excess = reachable - control; "
    "robust = at least 2 correct attempts; answers/question = distinct extracted answers; no answer = "
    "share of attempts with no extracted answer; chance = 1-(1-1/m)^K for m-way multiple choice")


#: The columns the retained notes explain, and those SUMMARY_NOTE explains (a summary selected to other columns,
#: as `reachtui import` prints it, goes without them).
RETAINED_COLUMNS = ("retained", "retained_lo", "retained_hi", "retained_logprob", "retained_logprob_lo",
                    "retained_logprob_hi")
LEGEND_COLUMNS = tuple(c.name for c in SUMMARY_COLUMNS if c.name.endswith(("_lo", "_hi"))) + RETAINED_COLUMNS + (
    "control", "excess", "robust", "answers", "no_answer", "chance")


def _wilson_keys(row: dict[str, Any], key: str, x: float | None, n: int) -> None:
    lo, hi = stats.wilson(x, n) if x is not None and n else stats.NAN_PAIR
    row[f"{key}_lo"], row[f"{key}_hi"] = lo, hi


def _add_honest_numbers(rc: RunControl, realized_ok: set[int], rows: list[dict[str, Any]], *, bootstrap: int,
                        seed: int) -> None:
    """Add to summary rows the chance control, robust reachability, answer scatter and 95% intervals
    (the keys `summary_rows(..., intervals=True)` documents), from the run's one pass `rc`."""
    qids = rc.question_ids
    n = len(qids)
    real_ctrl = {q for q, s in rc.probe(REALIZED).items() if s.control_hits > 0}
    for row in rows:
        probe = row["probe"]
        scatter = rc.probe(probe)
        attempts = sum(s.n for s in scatter.values())
        row["no_answer"] = frac(sum(s.no_answer for s in scatter.values()), attempts)
        row["answers"] = frac(sum(s.distinct for s in scatter.values()), len(scatter))
        ctrl = {q for q, s in scatter.items() if s.control_hits > 0}
        row["control"] = frac(len(ctrl), n)
        row["control_robust"] = frac(sum(1 for s in scatter.values() if s.control_hits >= 2), n)
        _wilson_keys(row, "realized", len(realized_ok), n)
        _wilson_keys(row, "control", len(ctrl), n)
        row["excess"] = diff(row["reachable"], row["control"])
        if n < 2:  # no partner to score against: no control
            row.update(control=math.nan, control_lo=math.nan, control_hi=math.nan, control_robust=math.nan,
                       excess=math.nan)
        b_seed = derive_seed("summary", seed, probe)
        if probe == REALIZED:
            _wilson_keys(row, "reachable", len(realized_ok), n)
            row.update(robust=math.nan, robust_lo=math.nan, robust_hi=math.nan, hits=None, control_at_k=None,
                       gap_lo=math.nan, gap_hi=math.nan, retained_vote_lo=math.nan, retained_vote_hi=math.nan,
                       retained_logprob_lo=math.nan, retained_logprob_hi=math.nan)
            vectors = Counter((q in realized_ok, q in real_ctrl) for q in qids)
            row["excess_lo"], row["excess_hi"] = stats.bootstrap_means(
                vectors, [lambda m: m[0] - m[1]], B=bootstrap, seed=b_seed)[0]
            continue
        counts = Counter(s.hits for s in scatter.values())
        reach = sum(k for c, k in counts.items() if c > 0)
        robust = sum(k for c, k in counts.items() if c >= 2)
        row["robust"] = frac(robust, n)
        _wilson_keys(row, "reachable", reach, n)
        _wilson_keys(row, "robust", robust, n)
        row["hits"] = [counts.get(i, 0) for i in range(max(counts, default=-1) + 1)]
        # per question (realized, reachable, vote pick correct, logprob pick correct, control reachable)
        vectors = Counter((q in realized_ok, s.hits > 0, s.vote is True, s.logprob is True, s.control_hits > 0)
                          if s is not None else (q in realized_ok, False, False, False, False)
                          for q, s in ((q, scatter.get(q)) for q in qids))
        intervals = stats.bootstrap_means(vectors, [
            lambda m: m[1] - m[0],
            lambda m: stats.ratio_or_nan(m[2] - m[0], m[1] - m[0]),
            lambda m: stats.ratio_or_nan(m[3] - m[0], m[1] - m[0]),
            lambda m: m[1] - m[4],
        ], B=bootstrap, seed=b_seed)
        gap_lo = intervals[0][0]
        for key, (lo, hi) in zip(("gap", "retained_vote", "retained_logprob", "excess"), intervals):
            if is_missing(row[key]) or (key.startswith("retained") and
                                        not outcomes.retained_has_interval(row[key], gap_lo)):
                lo = hi = math.nan   # an undefined estimate, or a ratio the gap's interval leaves unbounded
            row[f"{key}_lo"], row[f"{key}_hi"] = lo, hi
        curve = control_points(probe, [(s.n, s.control_hits, s.control_first) for s in scatter.values()])
        row["control_at_k"] = None
        if row["n_attempted"] == n and curve:
            row["control_at_k"] = curves.budget_curve(curve, registry.is_ordered(probe), row["budget"], n)


def summary_rows(store, run_id: int, *, intervals: bool = False, bootstrap: int = stats.DEFAULT_BOOTSTRAP,
                 seed: int = 0, graded: Graded | None = None) -> list[dict[str, Any]]:
    """The run's numbers per probe, as plain dicts (fractions in 0..1): a "realized" row first, then one
    row per reachability probe with attempts, in display order (the audit's closing table). Keys:

        probe, budget, n, n_attempted, realized, reachable, gap, blind_vote, blind_logprob,
        retained_vote, retained_logprob, failure, chance, pass_at_k, reachable_at_k

    n is the run's question count; realized is attempt 0 of the "realized" probe; reachable: some
    attempt of the probe correct; gap and retained as `reachtui.outcomes` defines them (retained NaN
    where the gap is not positive); blind_*: the answer-blind picks of reachtui.outcomes (vote, logprob);
    failure: the frozen set failure:<probe>, else the live count (reachable, realized known wrong);
    chance: 1 - (1 - 1/m)^K for m-way multiple choice; pass_at_k (sample) / reachable_at_k (routes, mcts,
    mcts-blind): the curve for k = 1..K when every question has attempts, else None.

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
                                          NaN unless the gap's interval lies above 0: the ratio is unbounded)
        control_at_k                      the control's budget curve (as pass_at_k / reachable_at_k)

    Bootstrap intervals use `bootstrap` replicates (0: none, NaN) seeded from `seed` and the probe name.
    For the realized row, control is the default answer scored against the partner's gold and excess
    realized - control. `graded`: shared by the runs of one build (`reachtui.control.Graded`).
    """
    info = run_info(store, run_id)
    ks = budgets(info)
    n, n_real_done, n_realized = store.realized_counts(run_id)
    realized = frac(n_realized, n)
    rows: list[dict[str, Any]] = [dict(
        probe=REALIZED, budget=1, n=n, n_attempted=n_real_done, realized=realized, reachable=realized,
        gap=0.0, blind_vote=realized, blind_logprob=realized, retained_vote=math.nan,
        retained_logprob=math.nan, failure=0, chance=chance(info, 1), pass_at_k=None, reachable_at_k=None)]
    rc = run_control(store, run_id, info["protocol"], graded)  # the one pass over the attempts; the intervals reuse it
    groups = groups_of(rc)
    budget_curves = probe_curves(store, run_id, groups)
    vote = {p: sum(1 for s in rc.per[p].values() if s.vote) for p in groups}
    lp_best = {p: sum(1 for s in rc.per[p].values() if s.logprob) for p in groups}
    with_logprobs = rc.logprobs  # imported generations may carry no log-probs
    frozen = store.frozen_sizes(run_id)
    per_probe = []
    for p, g in groups.items():
        live = None
        if p not in frozen:  # an unfinished run: count what would be frozen
            live = len(store.failure_candidates(run_id, p))
        per_probe.append((p, sum(cnt for *_x, cnt in g), sum(cnt for _n, c, _f, cnt in g if c > 0),
                          vote.get(p) or 0, lp_best.get(p) or 0, frozen.get(p), live, max(n for n, *_x in g)))
    for probe, done, reach, n_vote, n_lp, n_frozen, live, max_n in sorted(per_probe,
                                                                          key=lambda r: registry.sort_key(r[0])):
        reachable = frac(reach, n)
        b_vote = frac(n_vote, n)
        b_lp = frac(n_lp, n) if probe in with_logprobs else math.nan
        budget = ks.get(probe, max_n)
        curve = None
        if done == n and probe in budget_curves:
            curve = curves.budget_curve(budget_curves[probe][1], registry.is_ordered(probe), budget, n)
        rows.append(dict(
            probe=probe, budget=budget, n=n, n_attempted=done, realized=realized, reachable=reachable,
            gap=outcomes.gap(reachable, realized), blind_vote=b_vote, blind_logprob=b_lp,
            retained_vote=outcomes.retained(b_vote, realized, reachable),
            retained_logprob=outcomes.retained(b_lp, realized, reachable),
            failure=n_frozen if n_frozen is not None else (live or 0), chance=chance(info, budget),
            pass_at_k=None if registry.is_ordered(probe) else curve,
            reachable_at_k=curve if registry.is_ordered(probe) else None))
    if intervals:
        realized_ok = set(store.realized_ids(run_id))
        _add_honest_numbers(rc, realized_ok, rows, bootstrap=bootstrap, seed=seed)
    return rows


def summary_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per reachability probe from `summary_rows(..., intervals=True)`, for the audit's
    closing note: reachable, the chance control and the excess with their 95% intervals, robust
    reachability, the answer scatter, and whether the probe beats chance (the lower end of the excess
    interval above 0).

        routes K=16: reachable 80.5% [76.3, 84.1], control 10.5% [7.9, 13.8], excess +70.0 [65.2, 74.6]
          (beats chance); robust (>=2 hits) 61.0% [56.1, 65.7]; 17.2 distinct answers/question,
          3.1% of attempts no answer
    """
    out = []
    for r in rows:
        if r.get("probe") == REALIZED or "control" not in r:
            continue
        lo = r.get("excess_lo")
        verdict = ("beats chance" if not is_missing(lo) and lo > 0 else
                   "not above chance" if not is_missing(lo) else "no interval")
        line = (f"{r['probe']} K={r['budget']}: reachable "
                f"{percent(r['reachable'], r.get('reachable_lo'), r.get('reachable_hi'))}%, control "
                f"{percent(r['control'], r.get('control_lo'), r.get('control_hi'))}%, excess "
                f"{percent(r['excess'], r.get('excess_lo'), r.get('excess_hi'), signed=True)} ({verdict}); "
                f"robust (>=2 hits) {percent(r.get('robust'), r.get('robust_lo'), r.get('robust_hi'))}%")
        if r.get("chance") is not None:
            line += f"; closed-form chance {100 * r['chance']:.1f}%"
        if not is_missing(r.get("answers")):
            line += (f"; {r['answers']:.1f} distinct answers/question, "
                     f"{100 * r['no_answer']:.1f}% of attempts no answer")
        out.append(line)
    return out


#: The summary table's columns the app's intervals line shows for each probe.
HEADER_COLUMNS = ("reachable", "gap", "retained", "control", "excess")


def header_grid(table: Table) -> tuple[dict[str, str], list[dict[str, str]], list[str]]:
    """The app's intervals (key `i`) of a one-run `summary_table`: the headings of HEADER_COLUMNS, per probe
    row its cells exactly as the terminal table writes them (value and 95% interval, "–" where there is
    none), and the table's notes on its gap and retained cells (`reachtui.outcomes.gap_retained_notes`)."""
    labels = {c.name: c.header for c in table.columns if c.name in HEADER_COLUMNS}
    rows = [cells for cells in human_cells(table) if cells["probe"] != REALIZED]
    return {c: labels[c] for c in HEADER_COLUMNS}, rows, [n for n in table.notes if not n.startswith(SUMMARY_NOTE)]


def header_lines(table: Table) -> list[str]:
    """`header_grid` as lines: one per probe, then the notes."""
    labels, rows, notes = header_grid(table)
    return [f"{cells['probe']}  " + "  ".join(f"{labels[c]} {cells[c]}" for c in HEADER_COLUMNS)
            for cells in rows] + notes


def _table_values(r: dict[str, Any], realized_row: dict[str, Any]) -> dict[str, Any]:
    """A row of `summary_rows(..., intervals=True)` under the names of SUMMARY_COLUMNS (less run, model,
    task and protocol): the realized row keeps only its own figures, its chance control and the chance
    (no reachable, gap, excess or selection figures: it has no probe)."""
    has_realized = bool(realized_row["n_attempted"])
    realized = realized_row["realized"] if has_realized else math.nan
    is_probe = r["probe"] != REALIZED
    only = (lambda key: r[key] if is_probe else math.nan)  # noqa: E731
    return dict(
        probe=r["probe"], budget=r["budget"], n=realized_row["n"], realized=realized,
        realized_lo=r["realized_lo"] if has_realized else math.nan,
        realized_hi=r["realized_hi"] if has_realized else math.nan,
        reachable=only("reachable"), reachable_lo=only("reachable_lo"), reachable_hi=only("reachable_hi"),
        control=r["control"], control_lo=r["control_lo"], control_hi=r["control_hi"],
        excess=only("excess"), excess_lo=only("excess_lo"), excess_hi=only("excess_hi"),
        gap=outcomes.gap(r["reachable"], realized) if is_probe else math.nan,
        gap_lo=only("gap_lo"), gap_hi=only("gap_hi"),
        robust=only("robust"), robust_lo=only("robust_lo"), robust_hi=only("robust_hi"),
        blind_vote=only("blind_vote"), blind_logprob=only("blind_logprob"),
        retained=only("retained_vote"), retained_lo=only("retained_vote_lo"),
        retained_hi=only("retained_vote_hi"), retained_logprob=only("retained_logprob"),
        retained_logprob_lo=only("retained_logprob_lo"), retained_logprob_hi=only("retained_logprob_hi"),
        failure_set_size=r["failure"] if is_probe else None, chance=r["chance"],
        answers=r["answers"], no_answer=r["no_answer"],
    )


def summary_table(store, run_ids: Sequence[int], *, bootstrap: int = stats.DEFAULT_BOOTSTRAP,
                  seed: int = 0) -> Table:
    """One row per (run, reachability probe): realized, reachable, the chance control and excess
    reachability, gap, robust reachability, answer-blind accuracies, retained = (blind - realized) /
    (reachable - realized), the failure set's size, the closed-form chance baseline for multiple choice,
    the answer scatter, and 95% intervals as `<column>_lo` / `<column>_hi` (see `summary_rows` with
    intervals=True and `SUMMARY_NOTE`). A run without any probe gets one realized row (its control is the
    default answer's)."""
    rows: list[tuple] = []
    notes: list[str] = []
    names = [c.name for c in SUMMARY_COLUMNS]
    graded: Graded = {}
    cells: list[dict[str, Any]] = []    # what the gap and retained notes read
    for run_id in run_ids:
        info = run_info(store, run_id)
        got = summary_rows(store, run_id, intervals=True, bootstrap=bootstrap, seed=seed, graded=graded)
        for r in got[1:] or got[:1]:
            values = dict(run=run_id, model=info["model"], task=info["task"], protocol_hash=info["protocol_hash"],
                          **_table_values(r, got[0]))
            rows.append(tuple(values[c] for c in names))
            cells.append(dict(values, label=values["probe"] + (f", run {run_id}" if len(run_ids) > 1 else "")))
        done = {r["probe"]: r["n_attempted"] for r in got}
        notes += run_notes(info, done, got[0]["n"])
    notes += left_out_notes(store, run_ids)
    gap_notes = outcomes.gap_retained_notes(cells, ("retained", "retained_logprob"))
    legend = SUMMARY_NOTE + (f" ({bootstrap} bootstrap replicates, seed {seed})" if bootstrap > 0 else
                             " (bootstrap off: no gap/excess/retained intervals)")
    explains = {n: ("gap",) if n.endswith(outcomes.NEGATIVE_GAP) else RETAINED_COLUMNS for n in gap_notes}
    explains[legend] = LEGEND_COLUMNS
    title = "Realized vs reachable per probe" + runs_label(run_ids)
    return Table("summary", title, list(SUMMARY_COLUMNS), rows, notes=notes + gap_notes + [legend], explains=explains)


def summary_views(table: Table) -> list[Table]:
    """The summary for a terminal: (1) reachability beside its chance control, each figure with its
    95% interval ("87.5 [73.9, 94.5]"); (2) answer-blind selection, failure set and answer scatter.
    The run/model/task/protocol columns move into the titles when every row shares them."""
    t = fold_intervals(table, with_value=True)
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
    b.notes = list(t.notes)        # under the second table: the notes of both
    return [a, b]


# --------------------------------------------------------------------------------------------------
# What `reachtui audit` prints when it ends
# --------------------------------------------------------------------------------------------------

#: The closing table's columns (SUMMARY_COLUMNS' own), chance only for multiple choice.
CLOSING_COLUMNS = ("probe", "budget", "realized", "reachable", "gap", "blind_vote", "blind_logprob", "retained",
                   "retained_logprob", "failure_set_size", "chance")


def closing_table(run_id: int, rows: Sequence[dict[str, Any]]) -> Table:
    """The audit's closing table: a view of `summary_rows(..., intervals=True)`, one row per probe
    (realized first), the columns CLOSING_COLUMNS as the summary table names and writes them."""
    has_chance = any(r["chance"] is not None for r in rows)
    by_name = {c.name: c for c in SUMMARY_COLUMNS}
    columns = [by_name[c] for c in CLOSING_COLUMNS if c != "chance" or has_chance]
    values = [_table_values(r, rows[0]) for r in rows]
    note = ("blind: answer-blind pick among the K attempts (vote = majority answer, logprob = highest mean "
            "log-prob); retained = (blind - realized) / (reachable - realized), only where the gap is positive; "
            "failure set = reachable, realized wrong" + ("; chance = 1-(1-1/m)^K" if has_chance else ""))
    notes = outcomes.gap_retained_notes([dict(v, label=v["probe"]) for v in values],
                                        ("retained", "retained_logprob"))
    return Table("closing", f"run {run_id}: realized vs reachable, % of {rows[0]['n']} questions", columns,
                 [tuple(v[c.name] for c in columns) for v in values], notes=[note, *notes])


def chance_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """`summary_lines` under a heading, with SUMMARY_NOTE (nothing when no probe has a control)."""
    lines = summary_lines(rows)
    return ["", "reachable beside chance (95% intervals):", *lines, SUMMARY_NOTE] if lines else []


def closing_lines(store, run_id: int, rows: Sequence[dict[str, Any]] | None = None) -> list[str]:
    """The lines under the closing table: the budget curves, the MLP scan's best blocks, reachable
    beside its chance control. `rows`: the run's `summary_rows(..., intervals=True)`, if already read."""
    if rows is None:
        rows = summary_rows(store, run_id, intervals=True)
    return curve_lines(rows) + mlp_lines(store, run_id) + chance_lines(rows)


def closing(store, run_id: int) -> tuple[Table, list[str]]:
    """What `reachtui audit` prints when it ends: the closing table, then the lines under it (its notes,
    then `closing_lines`)."""
    rows = summary_rows(store, run_id, intervals=True)
    table = closing_table(run_id, rows)
    skipped = store.skipped_questions(run_id)
    if skipped:       # --skip-long: the title and a note say how many questions are not in the figures
        table.title += f", {len(skipped)} left out (too long)"
        table.notes.insert(1, left_out_note(run_id, rows[0]["n"], skipped))
    return table, table.notes + closing_lines(store, run_id, rows)
