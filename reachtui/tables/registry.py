"""The tables, one record each, as the probes have theirs: name, builder, the runs it takes, its help and the
formats the app's palette offers. `build_table`, `reachtui export`'s help and list of tables, and the app's
`export: …` commands are all derived from here: a new table is one record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reachtui import stats
from reachtui.errors import ReachError
from reachtui.tables.budget import hits_table, passk_table
from reachtui.tables.compare import compare_runs
from reachtui.tables.mlp import mlp_scan_table
from reachtui.tables.questions import attempts_table, questions_table
from reachtui.tables.summary import summary_table
from reachtui.tables.table import Table


@dataclass(frozen=True)
class TableSpec:
    name: str                   # what `reachtui export` calls it
    build: Callable[..., Table]  # (store, run_ids, *, allow_unmatched, bootstrap, seed) -> Table
    help: str                   # one line, for people
    pair: bool = False          # takes two runs (A, then B); else one or more
    bootstrap: bool = False     # has bootstrap intervals (--bootstrap, --bootstrap-seed act on it)
    app_formats: tuple[str, ...] = ()   # the formats the app's palette exports the open run's table in


def _compare(store, run_ids, *, allow_unmatched, bootstrap, seed):
    return compare_runs(store, run_ids[0], run_ids[1], allow_unmatched=allow_unmatched, bootstrap=bootstrap,
                        seed=seed)


TABLE_SPECS: tuple[TableSpec, ...] = (
    TableSpec("summary", lambda store, runs, bootstrap, seed, **_: summary_table(store, runs, bootstrap=bootstrap,
                                                                                 seed=seed),
              "one row per probe: realized vs reachable, chance control, 95% intervals",
              bootstrap=True, app_formats=("csv", "md", "latex")),
    TableSpec("questions", lambda store, runs, **_: questions_table(store, runs),
              "one row per question: realized, and per probe reachable and its first hit",
              app_formats=("csv", "json", "md", "latex")),
    TableSpec("attempts", lambda store, runs, **_: attempts_table(store, runs),
              "every attempt, with the temperature and seed it decoded with"),
    TableSpec("passk", lambda store, runs, **_: passk_table(store, runs),
              "the budget curves (pass@k, reachable@k) beside their chance control", app_formats=("csv", "md")),
    TableSpec("hits", lambda store, runs, **_: hits_table(store, runs),
              "the hit-count distribution per probe beside the chance control's"),
    TableSpec("mlp-scan", lambda store, runs, **_: mlp_scan_table(store, runs),
              "the MLP scan: repair and break rates per silenced layer", app_formats=("csv", "md", "latex")),
    TableSpec("compare", lambda store, runs, **kw: _compare(store, runs, **kw).table,
              "two runs: realized and reachable in each per probe, Δ, transitions, McNemar p", pair=True,
              bootstrap=True),
    TableSpec("compare-questions", lambda store, runs, **kw: _compare(store, runs, **kw).questions_table(),
              "one row per question of two runs: realized in each, reach categories", pair=True),
)
BY_NAME = {t.name: t for t in TABLE_SPECS}
TABLES = tuple(BY_NAME)


def get(name: str) -> TableSpec:
    """The table called `name`; ReachError (one line, the known names) for anything else."""
    spec = BY_NAME.get(name)
    if spec is None:
        raise ReachError(f"unknown table {name!r}; choose one of {', '.join(TABLES)}")
    return spec


def build_table(store, name: str, run_ids: Sequence[int], *, allow_unmatched: bool = False,
                bootstrap: int = stats.DEFAULT_BOOTSTRAP, seed: int = 0) -> Table:
    """Build table `name` (one of TABLES) for `run_ids` (a pair table takes exactly two: A then B).
    `bootstrap` replicates (0: none) and their `seed` decide the bootstrap intervals of summary/compare."""
    spec = get(name)
    if spec.pair and len(run_ids) != 2:
        raise ReachError(f"the {name} table needs two runs: --run A --run B")
    return spec.build(store, run_ids, allow_unmatched=allow_unmatched, bootstrap=bootstrap, seed=seed)


def tables_help() -> list[str]:
    """Each table and what it holds, one line each (`reachtui export --help`)."""
    return [f"{t.name:<18} {t.help}" + (" (--run A --run B)" if t.pair else "") for t in TABLE_SPECS]
