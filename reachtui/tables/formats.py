"""The `Table` value (a name, a title, typed columns, rows, notes that travel with it), row selection
over a built table, and every way of writing one out: csv, tsv, json, ndjson, GitHub markdown, a LaTeX
booktabs tabular, a rich Table for the terminal. The builders are in `reachtui/tables.py`.

Column kinds decide how a value is written:
    text, int         as is
    frac              a fraction in 0..1 in data formats (csv/tsv/json/ndjson); a percentage with one
                      decimal in md/latex/table (header gets "%")
    float             full precision in data formats, 3 decimals for people
    pvalue            full precision in data formats, 3 significant digits for people
    bool              true/false in json, 1/0 in csv/tsv, "yes"/"no" for people
None and NaN are empty in csv/tsv, null in json, "–" for people.

`select` applies --where/--columns/--order/--limit to a built table in a private in-memory SQLite;
`render`/`render_many` give text in a format; `fold_intervals` turns `X`, `X_lo`, `X_hi` into one
"X CI" column for people. Pure Python plus sqlite3 (rich only inside `to_rich`/`to_text`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from reachtui.errors import ReachError

KINDS = ("text", "int", "frac", "float", "pvalue", "bool")
DATA_FORMATS = ("csv", "tsv", "json", "ndjson")
HUMAN_FORMATS = ("md", "latex", "table")
FORMATS = DATA_FORMATS + HUMAN_FORMATS


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


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))



# --------------------------------------------------------------------------------------------------
# Row filtering: --where / --columns / --order / --limit, applied in SQL over the built table
# --------------------------------------------------------------------------------------------------


def _sql_value(v: Any) -> Any:
    if _is_missing(v):
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
) -> Table:
    """A new Table with only the rows matching `where` (SQL over the table's columns), only `columns`.

    The SQL runs against a private in-memory copy of the table's rows, never against the store, and
    only one statement is accepted. Unknown columns or bad SQL raise ReachError.
    """
    names = table.column_names
    if columns:
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise ReachError(
                f"unknown column {unknown[0]!r} in table {table.name}; columns: {', '.join(names)}"
            )
        cols = [table.column(c) for c in columns]
    else:
        cols = list(table.columns)
    if not where and not order and limit is None:
        if cols == list(table.columns):
            return replace(table, rows=list(table.rows))
        idx = [names.index(c.name) for c in cols]
        return replace(table, columns=cols, rows=[tuple(r[i] for i in idx) for r in table.rows])
    con = sqlite3.connect(":memory:")
    try:
        con.execute(
            "CREATE TABLE t (" + ", ".join(_quote(n) for n in names) + ", __rowid INTEGER)"
        )
        con.executemany(
            "INSERT INTO t VALUES (" + ", ".join("?" * (len(names) + 1)) + ")",
            [tuple(_sql_value(v) for v in row) + (i,) for i, row in enumerate(table.rows)],
        )
        sql = "SELECT " + ", ".join(_quote(c.name) for c in cols) + " FROM t"
        if where:
            sql += f" WHERE ({where})"
        sql += f" ORDER BY {order}, __rowid" if order else " ORDER BY __rowid"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        try:
            fetched = con.execute(sql, params or ()).fetchall()
        except (sqlite3.Error, sqlite3.Warning) as exc:
            what = "--where" if where else "--order"
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ReachError(f"bad {what} for table {table.name}: {msg}") from None
    finally:
        con.close()
    rows = [tuple(_from_sql(v, c.kind) for v, c in zip(r, cols)) for r in fetched]
    return replace(table, columns=cols, rows=rows)


# --------------------------------------------------------------------------------------------------
# Formatters
# --------------------------------------------------------------------------------------------------


def _data_value(v: Any, kind: str) -> Any:
    """A value for json/ndjson (None for missing)."""
    if _is_missing(v):
        return None
    if kind == "bool":
        return bool(v)
    if kind == "int" and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _csv_value(v: Any, kind: str) -> Any:
    if _is_missing(v):
        return ""
    if kind == "bool" or isinstance(v, bool):
        return 1 if v else 0
    return v


def human_value(v: Any, kind: str, signed: bool = False) -> str:
    """A value as people read it (md, latex before escaping, terminal)."""
    if _is_missing(v):
        return "–"
    if kind == "frac":
        pct = round(100.0 * float(v), 1)
        return "0.0" if pct == 0 else f"{pct:{'+' if signed else ''}.1f}"
    if kind == "float":
        return f"{float(v):{'+' if signed else ''}.3f}"
    if kind == "pvalue":
        p = float(v)
        return "<0.001" if 0 < p < 0.001 else f"{p:.3g}"
    if kind == "bool":
        return "yes" if v else "no"
    return str(v)


def human_header(col: Column) -> str:
    return f"{col.header} (%)" if col.kind == "frac" else col.header


def _numeric(col: Column) -> bool:
    return col.kind in ("int", "frac", "float", "pvalue")


def to_csv(table: Table, *, delimiter: str = ",", headers: bool = True) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    if headers:
        w.writerow(table.column_names)
    kinds = [c.kind for c in table.columns]
    for row in table.rows:
        w.writerow([_csv_value(v, k) for v, k in zip(row, kinds)])
    return buf.getvalue()


def to_records(table: Table) -> list[dict[str, Any]]:
    kinds = [c.kind for c in table.columns]
    names = table.column_names
    return [{n: _data_value(v, k) for n, v, k in zip(names, row, kinds)} for row in table.rows]


def to_json(table: Table) -> str:
    # A JSON array of objects, as `sqlite-utils rows` writes; strict JSON (NaN becomes null).
    return json.dumps(to_records(table), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def to_ndjson(table: Table) -> str:
    return "".join(
        json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in to_records(table)
    )


def fold_intervals(table: Table) -> Table:
    """The table for people: every pair of columns `X_lo`, `X_hi` becomes one text column `X_ci`
    ("X CI", in X's units: "[75.1, 85.0]" for fractions), where `X_lo` stood. Data formats keep the two
    columns (csv/json readers want numbers)."""
    names = table.column_names
    if not any(n.endswith("_lo") and n[:-3] + "_hi" in names for n in names):
        return table
    cols: list[Column] = []
    plan: list[tuple] = []
    for i, c in enumerate(table.columns):
        base = c.name[:-3]
        if c.name.endswith("_lo") and base + "_hi" in names:
            head = table.column(base).header if base in names else (c.label or c.name)[:-3].rstrip()
            cols.append(Column(base + "_ci", "text", label=f"{head} CI"))
            plan.append((i, names.index(base + "_hi"), c.kind, c.signed))
        elif c.name.endswith("_hi") and base + "_lo" in names:
            continue
        else:
            cols.append(c)
            plan.append((i,))

    def cell(row: tuple, step: tuple) -> Any:
        if len(step) == 1:
            return row[step[0]]
        lo, hi = row[step[0]], row[step[1]]
        if _is_missing(lo) or _is_missing(hi):
            return None
        return f"[{human_value(lo, step[2], step[3])}, {human_value(hi, step[2], step[3])}]"

    rows = [tuple(cell(r, st) for st in plan) for r in table.rows]
    return replace(table, columns=cols, rows=rows)


def _md_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def to_markdown(table: Table, *, headers: bool = True) -> str:
    table = fold_intervals(table)
    lines: list[str] = []
    for w in table.warnings:
        lines.append(f"> **WARNING: {_md_escape(w)}**")
    if table.warnings:
        lines.append("")
    cols = table.columns
    if headers:
        lines.append("| " + " | ".join(_md_escape(human_header(c)) for c in cols) + " |")
        lines.append("|" + "|".join("---:" if _numeric(c) else ":---" for c in cols) + "|")
    for row in table.rows:
        lines.append(
            "| " + " | ".join(_md_escape(human_value(v, c.kind, c.signed)) for v, c in zip(row, cols)) + " |"
        )
    if table.notes:
        lines.append("")
        lines.extend(f"_{_md_escape(n)}_  " for n in table.notes)
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "–": "--",
    "Δ": r"$\Delta$",
    "<": r"$<$",
    ">": r"$>$",
}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIAL))


def latex_escape(s: str) -> str:
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group(0)], s)


def _latex_cell(v: Any, col: Column) -> str:
    text = human_value(v, col.kind, col.signed)
    if _numeric(col) and text.startswith("-"):
        return "$-$" + latex_escape(text[1:])
    return latex_escape(text)


def to_latex(table: Table, *, headers: bool = True) -> str:
    """A booktabs tabular (needs \\usepackage{booktabs}); notes as comments, warnings as a visible row."""
    table = fold_intervals(table)
    cols = table.columns
    spec = "".join("r" if _numeric(c) else "l" for c in cols)
    out = [f"% {latex_escape(table.title)}"]
    out += [f"% {latex_escape(n)}" for n in table.notes]
    out.append(f"\\begin{{tabular}}{{{spec}}}")
    out.append("\\toprule")
    for w in table.warnings:
        out.append(
            f"\\multicolumn{{{len(cols)}}}{{l}}{{\\textbf{{WARNING: {latex_escape(w)}}}}} \\\\"
        )
    if table.warnings:
        out.append("\\midrule")
    if headers:
        out.append(" & ".join(latex_escape(human_header(c)) for c in cols) + " \\\\")
        out.append("\\midrule")
    for row in table.rows:
        out.append(" & ".join(_latex_cell(v, c) for v, c in zip(row, cols)) + " \\\\")
    out.append("\\bottomrule")
    out.append("\\end{tabular}")
    return "\n".join(out) + "\n"


def to_rich(table: Table):
    """A rich Table for the terminal (percentages for fractions; warnings in the title, in red). Notes
    are not part of it: print `table.notes` after it (as `to_text` and `reachtui export` do)."""
    from rich.table import Table as RichTable

    table = fold_intervals(table)
    title = table.title
    if table.warnings:
        title = "[bold red]" + " ".join(f"WARNING: {w}" for w in table.warnings) + "[/]\n" + title
    rt = RichTable(title=title)
    for c in table.columns:
        rt.add_column(human_header(c), justify="right" if _numeric(c) else "left")
    for row in table.rows:
        rt.add_row(*[human_value(v, c.kind, c.signed) for v, c in zip(row, table.columns)])
    return rt


def to_text(table: Table, *, width: int = 160) -> str:
    """The rich rendering as plain text, notes below it (what `--format table` prints to a file or pipe)."""
    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(to_rich(table))
    for n in table.notes:
        console.print(n, markup=False, highlight=False)
    return console.export_text()


def render(table: Table, fmt: str, *, headers: bool = True) -> str:
    """The table as text in `fmt` (one of FORMATS)."""
    if fmt == "csv":
        return to_csv(table, headers=headers)
    if fmt == "tsv":
        return to_csv(table, delimiter="\t", headers=headers)
    if fmt == "json":
        return to_json(table)
    if fmt == "ndjson":
        return to_ndjson(table)
    if fmt == "md":
        return to_markdown(table, headers=headers)
    if fmt == "latex":
        return to_latex(table, headers=headers)
    if fmt == "table":
        return to_text(table)
    raise ReachError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def render_many(tables: Iterable[Table], fmt: str, *, headers: bool = True) -> str:
    """Several tables in one text: blank-line separated for people, one JSON object per table name
    for json, concatenated records (with a `table` field) for ndjson, blank-line separated csv/tsv."""
    tables = list(tables)
    if len(tables) == 1:
        return render(tables[0], fmt, headers=headers)
    if fmt == "json":
        obj = {t.name: to_records(t) for t in tables}
        return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "ndjson":
        return "".join(
            json.dumps({"table": t.name, **r}, ensure_ascii=False, allow_nan=False) + "\n"
            for t in tables
            for r in to_records(t)
        )
    return "\n".join(render(t, fmt, headers=headers) for t in tables)
