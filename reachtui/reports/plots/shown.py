"""What a figure shows: the tables `reachtui export` writes for its runs (`build_table`, the same call), kept
as they are (rows restricted to `--probe` when given, nothing recomputed), and the one-line refusals when a
run has nothing to draw. Pure Python: no matplotlib.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from reachtui.errors import ReachError
from reachtui.probes import registry

#: The figures, in the order `reachtui plot all` writes them: the seed's four findings, then pass@k.
KINDS = ("reach", "blind", "mlp-scan", "compare", "passk")
#: The tables each figure is drawn from (export names).
TABLES = {"reach": ("passk", "summary"), "blind": ("passk", "summary"), "mlp-scan": ("mlp-scan",),
          "compare": ("compare",), "passk": ("passk",)}
#: The probes the blind figure shows when --probe names none: the route probes (random routes vs the search).
ROUTE_PROBES = tuple(p.name for p in registry.PROBES if p.routed)


class NothingToDraw(ReachError):
    """The runs have none of what a figure shows (no scan, no sample attempts, ...): `reachtui plot all`
    skips that figure and says why."""


@dataclass
class Shown:
    """What a figure shows: its kind, the runs (`run_info` dicts, in the order given) and the tables by
    export name."""

    kind: str
    runs: list[dict[str, Any]]
    tables: dict[str, Any]
    bootstrap: int = 0      # the replicates and seed of the tables' bootstrap intervals (said in captions)
    seed: int = 0

    def rows(self, table: str) -> list[dict[str, Any]]:
        return self.tables[table].dicts()

    @property
    def warnings(self) -> list[str]:
        return list(dict.fromkeys(w for t in self.tables.values() for w in t.warnings))


def check_kind(kind: str, runs: Sequence[Any]) -> str:
    """The figure `kind` names (case and spaces aside), and the runs it needs: compare takes two."""
    name = kind.strip().lower()
    if name not in KINDS:
        raise ReachError(f"unknown figure {kind!r}; choose one of {', '.join(KINDS)} (or all)")
    if name == "compare" and len(runs) != 2:
        raise ReachError("plot compare needs two runs: RUN_A RUN_B (Δ = B − A)")
    if not runs:
        raise ReachError(f"plot {name} needs a run")
    return name


def figure_tables(store, kind: str, run_ids: Sequence[int], *, probes: Sequence[str] = (),
                  allow_unmatched: bool = False, bootstrap: int = 1000, seed: int = 0) -> Shown:
    """The tables figure `kind` is drawn from, for `run_ids` (compare: A then B), restricted to `probes`."""
    from reachtui import tables as T

    kind = check_kind(kind, run_ids)
    run_ids = list(run_ids)
    if kind == "compare" and len(set(run_ids)) != 2:
        raise ReachError("plot compare needs two different runs")
    _check_probes(store, run_ids, probes)
    tables = {}
    for name in TABLES[kind]:
        table = T.build_table(store, name, run_ids, allow_unmatched=allow_unmatched,
                              bootstrap=0 if name == "summary" and kind == "reach" else bootstrap, seed=seed)
        tables[name] = _only(table, _probes_of(kind, probes))
    shown = Shown(kind, [T.run_info(store, r) for r in run_ids], tables, bootstrap, seed)
    _check_not_empty(shown, probes)
    return shown


def _probes_of(kind: str, probes: Sequence[str]) -> Sequence[str]:
    return probes or (ROUTE_PROBES if kind == "blind" else ())


def _check_probes(store, run_ids: Sequence[int], probes: Sequence[str]) -> None:
    """--probe names a reachability probe some of the runs have."""
    from reachtui.tables import run_probes

    if not probes:
        return
    have = {p for r in run_ids for p in run_probes(store, r)}
    for p in probes:
        if p not in have:
            runs = ", ".join(str(r) for r in run_ids)
            known = ", ".join(registry.ordered_names(have)) or "none"
            raise ReachError(f"--probe {p}: run {runs} has no probe {p!r} (its probes: {known})")


def _only(table, probes: Sequence[str]):
    """The table's rows of `probes` (all when none given); rows without a probe (compare's realized-only row)
    stay."""
    if not probes or "probe" not in table.column_names:
        return table
    i = table.column_names.index("probe")
    return replace(table, rows=[r for r in table.rows if r[i] is None or r[i] in probes])


def _check_not_empty(shown: Shown, probes: Sequence[str]) -> None:
    runs = ", ".join(str(r["run"]) for r in shown.runs)
    asked = f" of probe {', '.join(probes)}" if probes else ""
    if shown.kind == "passk" and not pass_at_k_rows(shown):
        raise NothingToDraw(f"run {runs} has no pass@k curve{asked} (no sample attempts); `reachtui plot reach` draws "
                         "reachable@k of the route probes")
    if shown.kind == "reach" and not shown.tables["passk"].rows:
        raise NothingToDraw(f"run {runs} has no reachability attempts{asked}: no curve to draw")
    if shown.kind == "blind" and not shown.tables["passk"].rows:
        which = f"probe {', '.join(probes)}" if probes else f"route probes ({', '.join(ROUTE_PROBES)})"
        raise NothingToDraw(f"run {runs} has no attempts of the {which}: no answer-blind pick to draw "
                         "(--probe sample draws the sampling probe's)")
    if shown.kind == "mlp-scan" and not shown.tables["mlp-scan"].rows:
        raise NothingToDraw(f"run {runs} has no MLP scan (audit with --mlp-scan)")
    if shown.kind == "compare" and not shown.tables["compare"].rows:
        raise NothingToDraw(f"runs {runs} have no compared question{asked}")


# --------------------------------------------------------------------------------------------------
# The rows each figure reads
# --------------------------------------------------------------------------------------------------


def pass_at_k_rows(shown: Shown) -> list[dict[str, Any]]:
    return [r for r in shown.rows("passk") if r["estimator"] == "pass@k"]


def curves_by(rows: Sequence[dict[str, Any]]) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """The passk rows of each (run, probe): one budget curve, k = 1..K."""
    out: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["run"], r["probe"]), []).append(r)
    return out


def summary_of(shown: Shown, run: int) -> dict[str, dict[str, Any]]:
    """The run's summary rows by probe (the realized row, when the run has no probe, under "realized")."""
    return {r["probe"]: r for r in shown.rows("summary") if r["run"] == run}


def run_n(shown: Shown, run: int) -> int | None:
    """The run's question count, as the summary says it (or the passk table's count at k = 1)."""
    if "summary" in shown.tables:
        for r in shown.rows("summary"):
            if r["run"] == run:
                return r["n"]
    counted = [r["questions"] for r in shown.rows("passk") if r["run"] == run and r["k"] == 1] \
        if "passk" in shown.tables else []
    info = next(r for r in shown.runs if r["run"] == run)
    return max(counted, default=info.get("n_questions"))


def side_names(shown: Shown) -> list[str]:
    """What a figure calls each run: its model, or "run N" where two runs share a model."""
    models = [r["model"] for r in shown.runs]
    return [str(r["model"]) if models.count(r["model"]) == 1 else f"run {r['run']}" for r in shown.runs]


def budgets(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """{probe: K} of passk rows (the largest k of each probe's curve)."""
    out: dict[str, int] = {}
    for r in rows:
        out[r["probe"]] = max(out.get(r["probe"], 0), r["k"])
    return out


def is_number(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))
