"""reachtui's Python API: an audit store's runs and tables as rows (or pandas DataFrames), for notebooks
(imported as `reachtui.api`, which hands these names on).

    from reachtui import api

    with api.open_store("store/reachtui.sqlite") as audit:     # read-only; checked as `reachtui export` checks it
        audit.runs()                          # every run: id, model, task, protocol_hash, status, counts
        audit.summary("base")                 # realized, reachable, chance control, gap, ... per probe
        audit.questions("base")               # one row per question
        audit.attempts("base").to_pandas()    # every attempt, as a DataFrame (needs pandas)
        audit.table("passk", "base", "tuned") # any table `reachtui export` writes, by its name
        audit.compare("base", "tuned")        # Δ = B - A per probe, with paired-bootstrap intervals

Runs are what the CLI takes: an id, "latest", a model name (its latest complete run), or "all" (every run,
given alone). Every table is built by the same function as `reachtui export TABLE`
(`reachtui.tables.build_table`) and its rows are the records `export --json` writes (fractions in 0..1,
intervals as `X_lo`/`X_hi`, missing values None), so a number here is the number in the exported file.
`columns` is a list of names or one string of comma-separated names (as --columns takes them). Imports
neither torch nor textual (pandas only in `Rows.to_pandas`).

Every bad argument (an unknown table or run, a `limit` that is not an integer >= 0, a path that is not a
store, a store used after `close()`) raises `reachtui.errors.ReachError` with the one line the CLI prints;
a damaged store raises its subclass `EnvironmentFault`. Reading a store leaves the files beside it as they
were (no -wal or -shm is left behind).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from reachtui import stats
from reachtui.errors import ReachError
from reachtui.stats import MAX_BOOTSTRAP

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
        def column(name: str, kind: str):
            """A column at its dtype, made from the values themselves (never through float64: a seed above
            2**53 keeps every digit); an integer past int64 (older metadata) kept exact, as a Python object."""
            values = [r.get(name) for r in self]
            if kind not in _PANDAS_DTYPES:
                return values
            try:
                return pd.array(values, dtype=_PANDAS_DTYPES[kind])
            except (OverflowError, TypeError, ValueError):
                return pd.array(values, dtype=object)

        frame = pd.DataFrame({name: column(name, kind) for name, kind in self.columns.items()},
                             columns=list(self.columns))
        frame.attrs.update(table=self.name, notes=self.notes, warnings=self.warnings)
        return frame


def _rows_of(table) -> Rows:
    from reachtui.tables.formats import to_records

    return Rows(to_records(table), name=table.name, columns={c.name: c.kind for c in table.columns},
                notes=table.notes, warnings=table.warnings)


class AuditStore(contextlib.AbstractContextManager):
    """A read-only audit store (open it with `open_store`); close it, or use it in a `with` block."""

    def __init__(self, path: str | bytes | os.PathLike | None = None) -> None:
        from reachtui.store import Store, default_store_path

        if path is None:
            path = default_store_path()
        if isinstance(path, (bytes, os.PathLike)):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            raise ReachError(f"open_store takes a path (str, bytes or os.PathLike), not {type(path).__name__}")
        self._store = Store(path, readonly=True, check=True)
        self._closed = False

    @property
    def store(self):
        """The open `reachtui.store.Store` (ReachError once closed)."""
        if self._closed:
            raise ReachError(f"the audit store {self._store.path} is closed: open it again with open_store")
        return self._store

    @property
    def path(self):
        return self._store.path

    def close(self) -> None:
        """Close the store (again: nothing happens); using it afterwards raises ReachError."""
        if not self._closed:
            self._closed = True
            self._store.close()

    def __exit__(self, *exc: object) -> None:    # __enter__ (self) comes from AbstractContextManager
        self.close()

    def run_id(self, run: str | int | None = None) -> int:
        """The id of `run` (an id, "latest" or None, a model name: its latest complete run)."""
        return self.store.resolve_run(_run_spec(run))

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

        if not isinstance(name, str):
            raise ReachError(f"a table is named by a string (one of {', '.join(TABLES)}), not {type(name).__name__}")
        registry.get(name)          # an unknown name is one line before any run is resolved
        columns, limit = _columns(columns), _count("limit", limit, 2**62)
        _text("where", where), _text("order", order), _count("bootstrap", bootstrap, MAX_BOOTSTRAP)
        _count("seed", seed, 2**63 - 1)
        if params is not None and not isinstance(params, (dict, list, tuple)):
            raise ReachError(f"params is a dict of :name values (or a list of ? values), not {type(params).__name__}")
        if not isinstance(allow_unmatched, bool):
            raise ReachError(f"allow_unmatched is True or False, not {allow_unmatched!r}")
        store = self.store
        run_ids = store.resolve_runs([_run_spec(r) for r in runs])
        built = build_table(store, name, run_ids, allow_unmatched=allow_unmatched, bootstrap=bootstrap, seed=seed)
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


def _run_spec(run: Any) -> str | int | None:
    """A run as the CLI takes it: an id (an int), a string ("latest", "all", a model name, an id) or None."""
    if run is None or isinstance(run, str) or (isinstance(run, int) and not isinstance(run, bool)):
        return run
    raise ReachError(f"a run is an id, 'latest', 'all' or a model name, not {run!r}")


def _columns(columns: Any) -> list[str] | None:
    """`columns` as names: a list (or tuple) of strings, or one string of comma-separated names (--columns)."""
    if columns is None:
        return None
    if isinstance(columns, str):
        columns = columns.split(",")
    if not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns):
        raise ReachError(f"columns is a list of column names or one string 'a,b', not {columns!r}")
    return [c.strip() for c in columns if c.strip()] or None


def _count(name: str, value: Any, most: int) -> int | None:
    """An integer option as the CLI checks it: 0 <= value <= most (None: not given)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReachError(f"{name} must be an integer, not {value!r}")
    if not 0 <= value <= most:
        raise ReachError(f"{name} must be 0 or more" + (f" and at most {most}" if value > most else "")
                         + f", not {value}")
    return value


def _text(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise ReachError(f"{name} is SQL text, not {type(value).__name__}")


def open_store(path: str | bytes | os.PathLike | None = None) -> AuditStore:
    """The audit store at `path` (default: $REACHTUI_STORE or ./store/reachtui.sqlite), read-only and
    checked first (a damaged store raises, as `reachtui export` refuses it)."""
    return AuditStore(path)
