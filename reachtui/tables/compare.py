"""Two runs compared question by question (B against A) on the questions both have: per probe realized
and reachable in each, their Δ with a 95% paired-bootstrap interval, the transitions of every question
(gained, lost, kept, never) and the exact McNemar p-value of each (`compare_runs`, a `Comparison`); the
wide `compare` table for data formats, `compare_views` for people, `Comparison.list_table` for one cell.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from reachtui import stats
from reachtui.errors import ReachError
from reachtui.probes import registry
from reachtui.seeds import derive_seed
from reachtui.stats import diff, frac, mcnemar_exact
from reachtui.tables.source import ci_columns, left_out_notes, probe_hits, run_info, run_probes
from reachtui.tables.table import Column, Table

CELLS = ("gained", "lost", "kept", "never")  # B vs A: gained = not in A, in B; lost = in A, not in B
#: What the reachability transitions are called in the literature on RL training (the Invisible Leash
#: paper, arXiv 2507.14843): a question reachable in both runs is preserved, only after training expanded,
#: only before shrunk, in neither out of reach.
CATEGORIES = {"kept": "preserved", "gained": "expanded", "lost": "shrunk", "never": "out-of-reach"}
CELL_OF = {v: k for k, v in CATEGORIES.items()}


def transition(a: bool, b: bool) -> str:
    if a and b:
        return "kept"
    if a:
        return "lost"
    if b:
        return "gained"
    return "never"


COMPARE_COLUMNS = [
    Column("run_a", "int", label="run A"),
    Column("model_a", label="model A"),
    Column("run_b", "int", label="run B"),
    Column("model_b", label="model B"),
    Column("probe"),
    Column("n", "int"),
    Column("realized_a", "frac", label="realized A"),
    Column("realized_b", "frac", label="realized B"),
    Column("realized_delta", "frac", label="Δ realized", signed=True),
    *ci_columns("realized_delta", "Δ realized", signed=True),
    Column("reachable_a", "frac", label="reachable A"),
    Column("reachable_b", "frac", label="reachable B"),
    Column("reachable_delta", "frac", label="Δ reachable", signed=True),
    *ci_columns("reachable_delta", "Δ reachable", signed=True),
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
    matched: bool  # every compared figure is matched (realized, and each compared probe)
    probes: list[str]  # reachability probes compared (both runs have them; matched, or --allow-unmatched)
    n_common: int
    table: Table
    # (measure, probe) -> cell -> question ids in task order; measure "realized" (probe None) or
    # "reachable" (probe = the probe)
    cells: dict[tuple[str, str | None], dict[str, list[str]]]
    # per compared question (task order): (realized A, realized B, (reachable A per probe), (... B per probe))
    status: dict[str, tuple] | None = None
    #: probes both runs have but not matched: probe -> the settings that differ (compared only when allowed)
    unmatched: dict[str, str] = field(default_factory=dict)
    _cell_by_qid: dict[tuple[str, str | None], dict[str, str]] | None = field(default=None, repr=False, compare=False)

    def cell_of(self, qid: str, measure: str = "realized", probe: str | None = None) -> str | None:
        """The transition cell a question is in (None: not compared, or not known in a run)."""
        key = (measure, None if measure == "realized" else probe)
        if self._cell_by_qid is None:  # {(measure, probe): {qid: cell}}, built once
            self._cell_by_qid = {k: {q: c for c, ids in cells.items() for q in ids} for k, cells in self.cells.items()}
        return self._cell_by_qid.get(key, {}).get(qid)

    def questions_table(self) -> Table:
        """One row per compared question: realized in A and B and its transition, then per probe reachable in
        A and B and the category (preserved, expanded, shrunk, out-of-reach)."""
        cols = [Column("question_id", label="question"), Column("realized_a", "bool", label="realized A"),
                Column("realized_b", "bool", label="realized B"), Column("realized", label="realized A→B")]
        for p in self.probes:
            cols += [Column(f"reachable_{p}_a", "bool", label=f"{p} A"), Column(f"reachable_{p}_b", "bool",
                                                                               label=f"{p} B"),
                     Column(f"category_{p}", label=f"{p} category")]
        rows = []
        for qid, (ra, rb, ha, hb) in (self.status or {}).items():
            row = [qid, ra, rb, self.cell_of(qid)]
            for i, p in enumerate(self.probes):
                cell = self.cell_of(qid, "reachable", p)
                row += [ha[i], hb[i], CATEGORIES.get(cell)]
            rows.append(tuple(row))
        a, b = self.run_a["run"], self.run_b["run"]
        return Table("compare-questions", f"Questions, run {a} ({self.run_a['model']}) and run {b} "
                     f"({self.run_b['model']})", cols, rows, notes=list(self.table.notes),
                     warnings=list(self.table.warnings))

    def ids(self, measure: str, cell: str, probe: str | None = None) -> list[tuple[str | None, str]]:
        """[(probe, question id)] in a transition cell; `probe` None with "reachable" = every probe."""
        if cell not in CELLS:
            raise ReachError(f"unknown transition {cell!r}; choose one of {', '.join(CELLS)} (reachable: "
                             f"{', '.join(CATEGORIES.values())})")
        if measure == "realized":
            return [(None, q) for q in self.cells[("realized", None)][cell]]
        if measure != "reachable":
            raise ReachError(f"unknown measure {measure!r}; use realized, reachable or a probe name")
        probes = self.probes if probe is None else [probe]
        for p in probes:
            if p in self.unmatched and p not in self.probes:
                raise ReachError(f"probe {p!r} is not matched in runs {self.run_a['run']} and {self.run_b['run']} "
                                 f"({self.unmatched[p]}); --allow-unmatched compares it anyway")
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
                f"--list wants MEASURE:CELL (e.g. reachable:lost, realized:gained, routes:kept, sample:shrunk), "
                f"not {spec!r}"
            )
        if cell in CELL_OF and measure != "realized":     # a category: preserved, expanded, shrunk, ...
            cell = CELL_OF[cell]
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


def _shares(counts: dict[str, int], n: int) -> tuple[float, float]:
    """The share of n questions in run A (kept + lost) and in run B (kept + gained)."""
    return frac(counts["kept"] + counts["lost"], n), frac(counts["kept"] + counts["gained"], n)


def _delta_interval(pairs: Counter, bootstrap: int, seed: int, part: str) -> tuple[float, float]:
    """The 95% paired-bootstrap interval of B - A over {(in A, in B): questions}, seeded from (seed, part)."""
    return stats.paired_bootstrap_delta(pairs, B=bootstrap, seed=derive_seed("compare", seed, part))


def _status_by_qid(store, run_id: int, probes: list[str]) -> dict[str, list]:
    """{qid: [idx, realized, hit(probe 0), hit(probe 1), ...]} for the run's questions (None unknown)."""
    hits = probe_hits(store, run_id, probes)
    none = [None] * len(probes)
    return {qid: [idx, real, *hits.get(q, none)] for q, qid, idx, _gold, _answer, real in store.question_rows(run_id)}


def match(info_a: dict[str, Any], info_b: dict[str, Any], probes: list[str]) -> tuple[str | None, dict[str, str]]:
    """How two stored runs match (`reachtui.protocol.Protocol.match_keys`): (why realized is not matched, or
    None; {probe: why it is not matched} for those of `probes` whose own settings differ). Runs with the same
    protocol hash match on everything; a protocol this reachtui cannot read matches only by its hash."""
    from reachtui.protocol import match_differences

    if info_a["protocol_hash"] == info_b["protocol_hash"]:
        return None, {}
    pa, pb = info_a["protocol"], info_b["protocol"]
    if pa is None or pb is None:
        return (f"different protocols ({info_a['protocol_hash']} vs {info_b['protocol_hash']}), one of which this "
                f"reachtui cannot read"), {}
    ka, kb = pa.match_keys(), pb.match_keys()
    realized = registry.REALIZED.name
    if ka[realized] != kb[realized]:
        return "different default deployments (" + ", ".join(match_differences(pa, pb)) + ")", {}
    out = {}
    for p in probes:
        if p not in ka or p not in kb:      # attempts of a probe the protocol does not list: nothing to match by
            out[p] = f"not in the protocol of run {(info_a if p not in ka else info_b)['run']}"
        elif ka[p] != kb[p]:
            out[p] = ", ".join(match_differences(pa, pb, p))
    return None, out


def compare_runs(store, run_a: int, run_b: int, *, allow_unmatched: bool = False,
                 bootstrap: int = stats.DEFAULT_BOOTSTRAP, seed: int = 0) -> Comparison:
    """Run B against run A (B - A), per reachability probe both have, on the questions both have
    (matched by the task's question id).

    Matched per probe (`match`): realized needs the runs' default deployments to agree, a probe also its own
    settings; probes in one run only never block the others. Differing deployments are refused, and a
    probe whose own settings differ is left out and named; `allow_unmatched` compares them anyway, marking
    their rows matched = false under a warning.

    Every Δ has a 95% paired-bootstrap interval (`*_delta_lo`, `*_delta_hi`): the compared questions are
    resampled with replacement, each keeping both runs' outcomes (`bootstrap` replicates, seeded from
    `seed` and the probe), beside the exact McNemar p-value of the same transitions."""
    info_a, info_b = run_info(store, run_a), run_info(store, run_b)
    probes_a, probes_b = run_probes(store, run_a), run_probes(store, run_b)
    shared = [p for p in probes_a if p in probes_b]
    deployment, unmatched = match(info_a, info_b, shared)
    warnings: list[str] = []
    notes: list[str] = []
    if deployment is not None:
        what = f"runs {run_a} and {run_b} have {deployment}"
        if not allow_unmatched:
            raise ReachError(f"{what}: not a matched comparison (--allow-unmatched to compare anyway)")
        warnings.append(f"UNMATCHED PROTOCOLS: {what}; differences may come from the protocol, not the model")
    elif unmatched and allow_unmatched:
        warnings.append("UNMATCHED PROBES: " + "; ".join(f"{p} ({why})" for p, why in unmatched.items())
                        + "; their differences may come from the protocol, not the model")
    elif unmatched:
        notes += [f"{p}: not matched ({why}): not compared (--allow-unmatched to compare it anyway)"
                  for p, why in unmatched.items()]
    probes = [p for p in shared if allow_unmatched or p not in unmatched]
    for run, own, other in ((run_a, probes_a, probes_b), (run_b, probes_b, probes_a)):
        only = [p for p in own if p not in other]
        if only:
            notes.append(f"probe(s) only in run {run}, not compared: {', '.join(only)}")
    sa, sb = _status_by_qid(store, run_a, probes), _status_by_qid(store, run_b, probes)
    common = sorted((q for q in sa if q in sb), key=lambda q: (sa[q][0], q))
    if info_a["task_sha256"] != info_b["task_sha256"]:
        notes.append(f"the runs are on different task files ({info_a['task']} vs {info_b['task']}): "
                     "questions matched by id")
    notes.insert(0, f"compared on the {len(common)} question(s) both runs have "
                    f"(run {run_a}: {len(sa)}, run {run_b}: {len(sb)})"
                 + ("" if len(common) == len(sa) == len(sb) else "; the others are left out"))
    notes[1:1] = left_out_notes(store, [run_a, run_b] if run_a != run_b else [run_a])
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
    sides = (run_a, info_a["model"], run_b, info_b["model"])     # which run is A and which B, in every row
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
        real_lo, real_hi = _delta_interval(_marginal(vectors, (0, 1)), bootstrap, seed, registry.REALIZED.name)
        reach_lo, reach_hi = _delta_interval(_marginal(vectors, (2, 3)), bootstrap, seed, p)
        cells[("reachable", p)] = cell
        n = sum(len(v) for v in cell.values())
        if n < len(common):
            notes.append(f"{p}: {len(common) - n} common question(s) lack attempts in a run: left out")
        real_a, real_b = _shares(real_cell, n)
        reach_a, reach_b = _shares({c: len(v) for c, v in cell.items()}, n)
        rows.append(sides + (
            p, n, real_a, real_b, diff(real_b, real_a), real_lo, real_hi,
            reach_a, reach_b, diff(reach_b, reach_a), reach_lo, reach_hi,
            real_cell["gained"], real_cell["lost"], real_cell["kept"], real_cell["never"],
            mcnemar_exact(real_cell["gained"], real_cell["lost"]),
            len(cell["gained"]), len(cell["lost"]), len(cell["kept"]), len(cell["never"]),
            mcnemar_exact(len(cell["gained"]), len(cell["lost"])),
            deployment is None and p not in unmatched,
        ))
    if not probes:
        rc = cells[("realized", None)]
        n = sum(len(v) for v in rc.values())
        real_a, real_b = _shares({c: len(v) for c, v in rc.items()}, n)
        vectors = Counter({(True, True): len(rc["kept"]), (True, False): len(rc["lost"]),
                           (False, True): len(rc["gained"]), (False, False): len(rc["never"])})
        real_lo, real_hi = _delta_interval(+vectors, bootstrap, seed, registry.REALIZED.name)
        rows.append(sides + (None, n, real_a, real_b, diff(real_b, real_a), real_lo, real_hi,
                     math.nan, math.nan, math.nan, math.nan, math.nan,
                     len(rc["gained"]), len(rc["lost"]), len(rc["kept"]), len(rc["never"]),
                     mcnemar_exact(len(rc["gained"]), len(rc["lost"])), None, None, None, None,
                     math.nan, deployment is None))
        notes.append("the runs share no matched reachability probe: realized only" if shared else
                     "the runs share no reachability probe: realized only")
    notes.append("Δ intervals: 95% paired bootstrap over the compared questions"
                 + (f" ({bootstrap} replicates, seed {seed})" if bootstrap > 0 else " (off)"))
    title = (f"Run {run_b} ({info_b['model']}) vs run {run_a} ({info_a['model']}) on {info_a['task']}: "
             f"Δ = B − A (95% paired bootstrap); transitions A→B; exact McNemar p")
    table = Table("compare", title, list(COMPARE_COLUMNS), rows, notes=notes, warnings=warnings)
    status = {q: (None if sa[q][1] is None else bool(sa[q][1]), None if sb[q][1] is None else bool(sb[q][1]),
                  tuple(None if h is None else bool(h) for h in sa[q][2:]),
                  tuple(None if h is None else bool(h) for h in sb[q][2:])) for q in common}
    matched = deployment is None and not any(p in unmatched for p in probes)
    return Comparison(info_a, info_b, matched, probes, len(common), table, cells, status, unmatched)


def compare_table(store, run_a: int, run_b: int, *, allow_unmatched: bool = False,
                  bootstrap: int = stats.DEFAULT_BOOTSTRAP, seed: int = 0) -> Table:
    return compare_runs(store, run_a, run_b, allow_unmatched=allow_unmatched, bootstrap=bootstrap,
                        seed=seed).table


def side_labels(run_a: dict[str, Any], run_b: dict[str, Any]) -> tuple[str, str]:
    """What a column names each side by: the model where the two differ, else the run."""
    if run_a["model"] != run_b["model"]:
        return str(run_a["model"]), str(run_b["model"])
    return f"run {run_a['run']}", f"run {run_b['run']}"


def compare_views(comparison: Comparison) -> list[Table]:
    """The comparison for people (terminal, md, latex): scores per probe, then the transitions.
    Data formats use `comparison.table` itself (one wide row per probe)."""
    t = comparison.table
    d = t.dicts()
    a, b = comparison.run_a["run"], comparison.run_b["run"]
    la, lb = side_labels(comparison.run_a, comparison.run_b)
    scores = Table(
        "compare-scores",
        t.title,
        [Column("probe"), Column("n", "int"),
         Column("realized_a", "frac", label=f"realized {la}"), Column("realized_b", "frac", label=f"realized {lb}"),
         Column("realized_delta", "frac", label="Δ realized", signed=True),
         *ci_columns("realized_delta", "Δ realized", True),
         Column("realized_p", "pvalue", label="p realized"),
         Column("reachable_a", "frac", label=f"reachable {la}"),
         Column("reachable_b", "frac", label=f"reachable {lb}"),
         Column("reachable_delta", "frac", label="Δ reachable", signed=True),
         *ci_columns("reachable_delta", "Δ reachable", True),
         Column("reachable_p", "pvalue", label="p reachable")],
        [],
        notes=[],
        warnings=list(t.warnings),
    )
    scores.rows = [tuple(r[c.name] for c in scores.columns) for r in d]
    trans = Table(
        "compare-transitions",
        f"Question transitions, run {a} ({comparison.run_a['model']}) to run {b} ({comparison.run_b['model']}): "
        f"gained = only in run {b}, lost = only in run {a}",
        [Column("measure"), Column("n", "int"), Column("gained", "int"), Column("lost", "int"),
         Column("kept", "int"), Column("never", "int"), Column("p", "pvalue", label="McNemar p")],
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
    views = [scores, trans]
    if any(r["probe"] is not None for r in d):
        cats = Table("compare-categories", f"Reach, run {a} ({comparison.run_a['model']}) to run {b} "
                     f"({comparison.run_b['model']}): preserved (both), expanded (only run {b}), shrunk (only run "
                     f"{a}), out-of-reach (neither)",
                     [Column("probe"), Column("n", "int")] + [Column(c, "int") for c in CATEGORIES.values()],
                     [(r["probe"], r["n"], r["reachable_kept"], r["reachable_gained"], r["reachable_lost"],
                       r["reachable_never"]) for r in d if r["probe"] is not None], warnings=list(t.warnings))
        views.append(cats)
    return views
