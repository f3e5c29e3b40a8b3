"""reachtui's Python API: an audit store's runs and tables as rows (or pandas DataFrames), for notebooks.

    from reachtui import api

    with api.open_store("store/reachtui.sqlite") as audit:     # read-only; checked as `reachtui export` checks it
        audit.runs()                          # every run: id, model, task, protocol_hash, status, counts
        audit.summary("base")                 # realized, reachable, chance control, gap, ... per probe
        audit.questions("base")               # one row per question
        audit.attempts("base").to_pandas()    # every attempt, as a DataFrame (needs pandas)
        audit.table("passk", "base", "tuned") # any table `reachtui export` writes, by its name
        audit.compare("base", "tuned")        # Δ = B - A per probe, with paired-bootstrap intervals

Runs are what the CLI takes: an id, "latest", or a model name (its latest complete run). Every table is
built by the same function as `reachtui export TABLE` (`reachtui.tables.build_table`) and its rows are the
records `export --json` writes (fractions in 0..1, intervals as `X_lo`/`X_hi`, missing values None), so a
number here is the number in the exported file. Imports neither torch nor textual (pandas only in
`Rows.to_pandas`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from reachtui import stats
from reachtui.errors import ReachError

__all__ = ["open_store", "AuditStore", "Rows", "TABLES"]

#: The tables `reachtui export` writes (`AuditStore.table`).
from reachtui.tables import TABLES  # noqa: E402

#: How a column kind becomes a pandas dtype (the one mapping; parquet exports carry it too).
from reachtui.tables.table import PANDAS_DTYPES as _PANDAS_DTYPES  # noqa: E402


class Rows(list):
    """A table's rows as a list of dicts (as `reachtui export --json` writes them), with the table's
    `name`, `columns` ({name: kind}), `notes` and `warnings`; `to_pandas()` makes a DataFrame."""

    def __init__(self, rows: list[dict[str, Any]], *, name: str, columns: dict[str, str] | None = None,
                 notes: Sequence[str] = (), warnings: Sequence[str] = ()) -> None:
        super().__init__(rows)
        self.name = name
        self.columns = dict(columns) if columns is not None else {k: "" for r in rows[:1] for k in r}
        self.notes = list(notes)
        self.warnings = list(warnings)

    def to_pandas(self):
        """The rows as a pandas DataFrame, one column per table column, typed by its kind
        (`reachtui.tables.table.PANDAS_DTYPES`: nullable integers, booleans and strings, missing as <NA>;
        float64 numbers, missing as NaN): the frame `pandas.read_parquet` gives of the same table exported."""
        try:
            import pandas as pd
        except ImportError:
            raise ReachError("DataFrames need pandas: pip install 'reachtui[pandas]'") from None
        # each column made at its dtype from the values themselves (never through float64: a seed above 2**53
        # keeps every digit)
        frame = pd.DataFrame({name: pd.array([r.get(name) for r in self], dtype=_PANDAS_DTYPES[kind])
                              if kind in _PANDAS_DTYPES else [r.get(name) for r in self]
                              for name, kind in self.columns.items()}, columns=list(self.columns))
        frame.attrs.update(table=self.name, notes=self.notes, warnings=self.warnings)
        return frame


def _rows_of(table) -> Rows:
    from reachtui.tables.formats import to_records

    return Rows(to_records(table), name=table.name, columns={c.name: c.kind for c in table.columns},
                notes=table.notes, warnings=table.warnings)


class AuditStore(contextlib.AbstractContextManager):
    """A read-only audit store (open it with `open_store`); close it, or use it in a `with` block."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        from reachtui.store import Store, default_store_path

        self.store = Store(path if path is not None else default_store_path(), readonly=True, check=True)

    @property
    def path(self):
        return self.store.path

    def close(self) -> None:
        self.store.close()

    def __exit__(self, *exc: object) -> None:    # __enter__ (self) comes from AbstractContextManager
        self.close()

    def run_id(self, run: str | int | None = None) -> int:
        """The id of `run` (an id, "latest" or None, a model name: its latest complete run)."""
        return self.store.resolve_run(run)

    def runs(self) -> Rows:
        """Every run, oldest first: id, model, task, status, source, protocol_hash, n_questions, the attempts
        stored and the realized count, its times (what `reachtui runs --json` lists)."""
        rows = self.store.list_runs()
        return Rows(rows, name="runs")

    def table(self, name: str, *runs: str | int, where: str | None = None, columns: Sequence[str] | None = None,
              order: str | None = None, limit: int | None = None, params: dict[str, Any] | None = None,
              allow_unmatched: bool = False, bootstrap: int = stats.DEFAULT_BOOTSTRAP, seed: int = 0) -> Rows:
        """Table `name` (one of TABLES) of `runs` (the latest run when none; compare takes two), filtered as
        `reachtui export --where/--columns/--order/--limit` filter it: the rows `export NAME --json` writes."""
        from reachtui.tables import build_table, registry
        from reachtui.tables.table import select

        registry.get(name)          # an unknown name is one line before any run is resolved
        run_ids = [self.run_id(r) for r in (runs or (None,))]
        built = build_table(self.store, name, run_ids, allow_unmatched=allow_unmatched, bootstrap=bootstrap, seed=seed)
        return _rows_of(select(built, columns=columns, where=where, params=params, order=order, limit=limit))

    def summary(self, *runs: str | int, **options: Any) -> Rows:
        """Per run and probe: realized, reachable, chance control, excess, gap, blind accuracy, retained,
        the failure set's size, with 95% intervals (`reachtui export summary`)."""
        return self.table("summary", *runs, **options)

    def questions(self, *runs: str | int, **options: Any) -> Rows:
        """One row per question: gold, default answer, realized, per probe reachable, first hit, hits, and the
        task's metadata as `meta_<column>` (`reachtui export questions`)."""
        return self.table("questions", *runs, **options)

    def attempts(self, *runs: str | int, **options: Any) -> Rows:
        """Every stored attempt: question, probe, attempt, route, text, extracted answer, correct, mean
        log-prob, compute (`reachtui export attempts`)."""
        return self.table("attempts", *runs, **options)

    def passk(self, *runs: str | int, **options: Any) -> Rows:
        """pass@k / reachable@k per probe and k, beside the chance control (`reachtui export passk`)."""
        return self.table("passk", *runs, **options)

    def compare(self, run_a: str | int, run_b: str | int, **options: Any) -> Rows:
        """Run B against run A per probe: realized and reachable in each, Δ with paired-bootstrap intervals,
        transitions and McNemar p (`reachtui export compare`, `reachtui compare`)."""
        return self.table("compare", run_a, run_b, **options)


def open_store(path: str | os.PathLike | None = None) -> AuditStore:
    """The audit store at `path` (default: $REACHTUI_STORE or ./store/reachtui.sqlite), read-only and
    checked first (a damaged store raises, as `reachtui export` refuses it)."""
    return AuditStore(path)
