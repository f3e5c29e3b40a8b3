"""The `Table` value every builder returns and every format writes: a name, a title, typed columns, rows,
and the notes and warnings that travel with it; and `select`, which applies --where/--columns/--order/
--limit to a built table in a private in-memory SQLite (never against the store).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from reachtui.errors import ReachError, first_line
from reachtui.stats import is_missing

#: How a column's values are written (see `reachtui.tables.formats`).
KINDS = ("text", "int", "frac", "float", "pvalue", "bool", "interval")   # interval: "[75.1, 85.0]" for people

#: A column kind's pandas dtype, the same whether the frame comes from `Rows.to_pandas` (reachtui.api) or from
#: `pandas.read_parquet` of an export (reachtui.tables.parquet writes it into the file): integers, booleans and
#: text nullable (a missing value is <NA>, an integer column stays integer), numbers float64 (missing: NaN).
PANDAS_DTYPES = {"text": "string", "interval": "string", "int": "Int64", "bool": "boolean", "frac": "float64",
                 "float": "float64", "pvalue": "float64"}


# --------------------------------------------------------------------------------------------------
# The table value
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    kind: str = "text"
    label: str | None = None  # header for people (md/latex/table); defaults to the name
    signed: bool = False  # a difference: people see "+1.5" (data formats are unchanged)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown column kind {self.kind!r}")

    @property
    def header(self) -> str:
        return self.label or self.name


@dataclass
class Table:
    name: str  # "summary", "questions", ... (what `reachtui export` calls it)
    title: str  # one line for people
    columns: list[Column]
    rows: list[tuple]  # each aligned with `columns`
    notes: list[str] = field(default_factory=list)  # said beside the table (stderr for data formats)
    warnings: list[str] = field(default_factory=list)  # said loudly, and marked in every format
    #: every value is None, an int, a float or a str as SQLite returned it (no NaN, no bool: a bool column
    #: holds 0/1), so csv writes the rows as they are; the raw attempts of a large run are millions of rows
    plain: bool = False
    #: note -> the columns it explains: `select` keeps such a note only while one of them is in the table
    #: (a note not in it is about the table as a whole, and stays)
    explains: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def quiet(self) -> Table:
        """The table without its notes (`--quiet`); its warnings stay."""
        return replace(self, notes=[])

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def dicts(self) -> list[dict[str, Any]]:
        names = self.column_names
        return [dict(zip(names, row)) for row in self.rows]

    def __len__(self) -> int:
        return len(self.rows)


# --------------------------------------------------------------------------------------------------
# Row filtering: --where / --columns / --order / --limit, applied in SQL over the built table
# --------------------------------------------------------------------------------------------------


def _sql_value(v: Any) -> Any:
    if is_missing(v):
        return None
    if isinstance(v, bool):
        return int(v)
    return v


def _from_sql(v: Any, kind: str) -> Any:
    if v is None:
        return None
    if kind == "bool":
        return bool(v)
    if kind in ("frac", "float", "pvalue"):
        return float(v)
    return v


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def select(
    table: Table,
    *,
    columns: Sequence[str] | None = None,
    where: str | None = None,
    params: dict[str, Any] | Sequence[Any] | None = None,
    order: str | None = None,
    limit: int | None = None,
    timeout: float = 10.0,
) -> Table:
    """A new Table with only the rows matching `where` (SQL over the table's columns), only `columns`.

    The SQL runs against a private in-memory copy of the table's rows, never against the store, and
    only one statement is accepted. With `columns`, a note that explains only columns left out goes too
    (`Table.explains`). Unknown columns or bad SQL raise ReachError; so does SQL that runs
    longer than `timeout` seconds (an endless recursive CTE) or makes a value over 16 MB (randomblob).
    """
    names = table.column_names
    if columns:
        twice = [c for i, c in enumerate(columns) if c in columns[:i]]
        if twice:      # a record (json, a DataFrame) holds a name once: the second would vanish
            raise ReachError(f"column {twice[0]!r} is asked for twice; name each column once")
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise ReachError(
                f"unknown column {unknown[0]!r} in table {table.name}; columns: {', '.join(names)}"
            )
        cols = [table.column(c) for c in columns]
        kept = set(columns)       # a note stays where it explains a column still shown
        notes = [n for n in table.notes if n not in table.explains or kept & set(table.explains[n])]
        table = replace(table, notes=notes)
    else:
        cols = list(table.columns)
    if not where and not order and limit is None:
        if cols == list(table.columns):
            return replace(table, rows=list(table.rows))
        idx = [names.index(c.name) for c in cols]
        return replace(table, columns=cols, rows=[tuple(r[i] for i in idx) for r in table.rows])
    con = sqlite3.connect(":memory:")
    deadline = float("inf")
    con.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)   # true: interrupt the query
    try:
        con.execute(
            "CREATE TABLE t (" + ", ".join(_quote(n) for n in names) + ", __rowid INTEGER)"
        )
        con.executemany(
            "INSERT INTO t VALUES (" + ", ".join("?" * (len(names) + 1)) + ")",
            [tuple(_sql_value(v) for v in row) + (i,) for i, row in enumerate(table.rows)],
        )
        # a value the user's SQL makes is at most 16 MB (set after the copy: a row of many values may be larger)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 16 << 20)
        sql = "SELECT " + ", ".join(_quote(c.name) for c in cols) + " FROM t"
        if where:
            sql += f" WHERE ({where})"
        sql += f" ORDER BY {order}, __rowid" if order else " ORDER BY __rowid"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        try:
            deadline = time.monotonic() + timeout     # the user's SQL, not the copy, has the time limit
            fetched = con.execute(sql, params or ()).fetchall()
        except (sqlite3.Error, sqlite3.Warning) as exc:
            what = "--where" if where else "--order"
            if time.monotonic() > deadline:
                raise ReachError(f"{what} for table {table.name} ran past its time limit of {timeout:g} s and "
                                 f"was stopped (--where-timeout)") from None
            raise ReachError(f"bad {what} for table {table.name}: {first_line(exc)}") from None
    finally:
        con.close()
    rows = [tuple(_from_sql(v, c.kind) for v, c in zip(r, cols)) for r in fetched]
    return replace(table, columns=cols, rows=rows, plain=False)
