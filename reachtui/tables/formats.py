"""Every way of writing a `Table` (`reachtui.tables.table`) out: csv, tsv, json, ndjson, GitHub markdown,
a LaTeX booktabs tabular, a rich Table for the terminal, and the cells and lines people read.

Column kinds decide how a value is written:
    text, int         as is
    frac              a fraction in 0..1 in data formats (csv/tsv/json/ndjson); a percentage with one
                      decimal in md/latex/table (header gets "%")
    float             full precision in data formats, 3 decimals for people
    pvalue            full precision in data formats, 3 significant digits for people
    bool              true/false in json, 1/0 in csv/tsv, "yes"/"no" for people
    interval          a folded interval cell for people ("[75.1, 85.0]"), numbers in text
A missing value (None or NaN: `reachtui.stats.is_missing`) is empty in csv/tsv (as an empty text is: csv has
no null), null in json/ndjson and parquet, "–" for people (md, LaTeX, the terminal), and <NA> in pandas (NaN in
its float columns: `table.PANDAS_DTYPES`); an integer column's values are integers in every format. An infinite
float is inf/-inf in csv/tsv and parquet, null in json (which has no infinity: a note says so).

`render`/`render_many` give text in a format; `fold_intervals` turns each interval `X_lo`, `X_hi` into
one column for people ("X CI": "[75.1, 85.0]", or "X": "80.3 [75.1, 85.0]" with the value); `percent`
writes a share with its interval inside a line. Pure Python (rich only inside `to_rich`/`to_text`).

Cells come from model outputs, task files and names people chose, so no format lets one act on its reader:
csv/tsv text that a spreadsheet would run as a formula (starting with = + - @, a tab or a CR, and not a
plain number) gets a leading ' unless `formulas=True` (`--keep-formulas`); md and LaTeX cells, notes,
titles, the caption and the label are escaped, control characters written as spaces (a blank line or a
raw CR inside a LaTeX cell, a newline inside a Markdown row); the terminal shows control characters as
visible marks (an escape sequence in an output never reaches the terminal) and never reads markup in a
cell.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import replace
from typing import Any, Iterable

from reachtui.errors import ReachError
from reachtui.stats import is_missing
from reachtui.tables.table import Column, Table

DATA_FORMATS = ("csv", "tsv", "json", "ndjson")
HUMAN_FORMATS = ("md", "latex", "table")
FORMATS = DATA_FORMATS + HUMAN_FORMATS


# --------------------------------------------------------------------------------------------------
# Formatters
# --------------------------------------------------------------------------------------------------


def _data_value(v: Any, kind: str) -> Any:
    """A value for json/ndjson (None for missing)."""
    if is_missing(v):
        return None
    if kind == "bool":
        return bool(v)
    if kind == "int" and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _csv_value(v: Any, kind: str) -> Any:
    if is_missing(v):
        return ""
    if kind == "bool" or isinstance(v, bool):
        return 1 if v else 0
    if kind == "int" and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def human_value(v: Any, kind: str, signed: bool = False) -> str:
    """A value as people read it (md, latex before escaping, terminal)."""
    if is_missing(v):
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
    if kind == "int" and signed:
        return f"{int(v):+d}" if v else "0"
    if kind == "int" and isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def human_header(col: Column) -> str:
    return f"{col.header} (%)" if col.kind == "frac" else col.header


def _numeric(col: Column) -> bool:
    return col.kind in ("int", "frac", "float", "pvalue", "interval")


#: What a spreadsheet reads as the start of a formula (OWASP's CSV injection list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def neutral_cell(v: Any) -> Any:
    """A csv/tsv cell a spreadsheet will not run: text starting like a formula gets a leading ' (a plain
    number such as "-3" stays as it is: a spreadsheet reads it as the number)."""
    if isinstance(v, str) and v.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(v):
        return "'" + v
    return v


_FORMULA_FIRST = frozenset(FORMULA_STARTS)


class _CarriageReturnRows:
    """Writes a row holding a lone carriage return: Python's csv writer quotes a cell only for the characters
    of its line terminator, so with "\n" a CR went out bare and a reader split the row there. This writer's
    terminator is "\r\n" (both quoted), given back as "\n", the terminator of every other row."""

    def __init__(self, buf: io.StringIO, delimiter: str) -> None:
        self.buf = buf
        self.writer = csv.writer(self, delimiter=delimiter, lineterminator="\r\n")

    def write(self, line: str) -> None:      # csv calls it once per row, with the whole line
        self.buf.write(line[:-2] + "\n")


def _safe_rows(rows: Iterable[tuple], formulas: bool, cr: _CarriageReturnRows) -> Iterable[tuple]:
    """The rows with `neutral_cell` applied where some cell starts like a formula (unless `formulas`); a row
    with a carriage return in a cell is written by `cr` here, in its place, and not yielded (a plain loop: the
    attempts export passes a million rows through here)."""
    for row in rows:
        for v in row:
            if type(v) is str and (v[:1] in _FORMULA_FIRST or "\r" in v):
                if not formulas:
                    row = tuple(neutral_cell(x) for x in row)
                if any(type(x) is str and "\r" in x for x in row):
                    cr.writer.writerow(row)
                    row = None
                break
        if row is not None:
            yield row


def to_csv(table: Table, *, delimiter: str = ",", headers: bool = True, formulas: bool = False) -> str:
    """csv (or tsv with `delimiter`); `formulas`: write cells that start like a formula as they are. Every
    cell reads back as written: one holding the delimiter, a quote, a newline or a carriage return is quoted."""
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    if headers:
        w.writerow(table.column_names)
    rows = table.rows
    if not table.plain:   # plain: nothing to convert (None is written empty, a bool column's 0/1 as they are)
        kinds = [c.kind for c in table.columns]
        rows = ([_csv_value(v, k) for v, k in zip(row, kinds)] for row in rows)
    # writerows takes one row at a time from the generator, so a row `_safe_rows` writes itself lands in order
    w.writerows(_safe_rows(rows, formulas, _CarriageReturnRows(buf, delimiter)))
    return buf.getvalue()


def to_records(table: Table) -> list[dict[str, Any]]:
    kinds = [c.kind for c in table.columns]
    names = table.column_names
    return [{n: _data_value(v, k) for n, v, k in zip(names, row, kinds)} for row in table.rows]


def json_records(table: Table) -> list[dict[str, Any]]:
    """`to_records` for JSON, which has no infinity: an infinite float (a store written by an older version
    holds an infinite mean_logprob) is null, as NaN is (`nonfinite_note` says so beside the file)."""
    records = to_records(table)
    floats = [c.name for c in table.columns if c.kind in ("float", "frac", "pvalue")]
    for r in records:
        for name in floats:
            v = r[name]
            if isinstance(v, float) and math.isinf(v):
                r[name] = None
    return records


def nonfinite_note(table: Table) -> str | None:
    """The note a JSON export carries when `json_records` wrote infinite values as null, else None."""
    idx = [i for i, c in enumerate(table.columns) if c.kind in ("float", "frac", "pvalue")]
    counts: dict[str, int] = {}
    for row in table.rows:
        for i in idx:
            v = row[i]
            if isinstance(v, float) and math.isinf(v):
                name = table.columns[i].name
                counts[name] = counts.get(name, 0) + 1
    if not counts:
        return None
    what = ", ".join(f"{n} {name}" for name, n in counts.items())
    return f"JSON has no infinity: {what} value(s) that are infinite are written as null (csv, tsv and parquet " \
           f"keep them)"


def to_json(table: Table) -> str:
    # A JSON array of objects, as `sqlite-utils rows` writes; strict JSON (NaN and infinity become null).
    return json.dumps(json_records(table), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def to_ndjson(table: Table) -> str:
    return "".join(
        json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in json_records(table)
    )


def percent(v: Any, lo: Any = None, hi: Any = None, *, signed: bool = False, digits: int = 1) -> str:
    """A share as a percentage for a line of text, its interval after it when both ends are known:
    "80.5 [76.3, 84.1]"; "–" when missing."""
    if is_missing(v):
        return "–"
    sign = "+" if signed else ""
    text = f"{100 * v:{sign}.{digits}f}"
    if not (is_missing(lo) or is_missing(hi)):
        text += f" [{100 * lo:{sign}.{digits}f}, {100 * hi:{sign}.{digits}f}]"
    return text


def _interval_cell(v: Any, lo: Any, hi: Any, kind: str, signed: bool, with_value: bool) -> str | None:
    interval = None if is_missing(lo) or is_missing(hi) else \
        f"[{human_value(lo, kind, signed)}, {human_value(hi, kind, signed)}]"
    if not with_value:
        return interval
    if is_missing(v):
        return None
    text = human_value(v, kind, signed)
    return text if interval is None else f"{text} {interval}"


def fold_intervals(table: Table, *, with_value: bool = False) -> Table:
    """The table for people, each pair of columns `X_lo`, `X_hi` folded into one text column (data
    formats keep the two: csv/json readers want numbers), in X's units:

    - with_value=False: a column `X_ci` ("X CI": "[75.1, 85.0]") where `X_lo` stood, X left as it is;
    - with_value=True: X itself becomes "80.3 [75.1, 85.0]" (only pairs whose X is in the table)."""
    names = table.column_names
    bases = {n[:-3] for n in names if n.endswith("_lo") and n[:-3] + "_hi" in names}
    if with_value:
        bases &= set(names)
    if not bases:
        return table
    cols: list[Column] = []
    plan: list[tuple] = []  # (column index,) kept as it is, or (value index, lo, hi, kind, signed)
    for i, c in enumerate(table.columns):
        base = c.name[:-3]
        if with_value and c.name in bases:
            cols.append(Column(c.name, "interval", label=human_header(c)))
            plan.append((i, names.index(c.name + "_lo"), names.index(c.name + "_hi"), c.kind, c.signed))
        elif base in bases and c.name.endswith(("_lo", "_hi")):
            if with_value or c.name.endswith("_hi"):
                continue
            head = table.column(base).header if base in names else (c.label or c.name)[:-3].rstrip()
            cols.append(Column(base + "_ci", "interval", label=f"{head} CI"))
            plan.append((None, i, names.index(base + "_hi"), c.kind, c.signed))
        else:
            cols.append(c)
            plan.append((i,))

    def cell(row: tuple, step: tuple) -> Any:
        if len(step) == 1:
            return row[step[0]]
        v, lo, hi, kind, signed = step
        return _interval_cell(None if v is None else row[v], row[lo], row[hi], kind, signed, with_value)

    return replace(table, columns=cols, rows=[tuple(cell(r, st) for st in plan) for r in table.rows])


def human_cells(table: Table, *, inline_ci: bool = True) -> list[dict[str, str]]:
    """Each row's cells as people read them (what md, latex and the terminal write, before any escaping),
    by column name, each interval folded in (`inline_ci`: beside its value, "80.3 [75.1, 85.0]"). The app
    shows a table's figures through this, so they read as the exports write them."""
    folded = fold_intervals(table, with_value=inline_ci)
    return [{c.name: human_value(v, c.kind, c.signed) for v, c in zip(row, folded.columns)} for row in folded.rows]


#: Control characters (C0, DEL, C1) and the Unicode line and paragraph separators.
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _spaced(s: str) -> str:
    """Control characters as spaces: no line break, CR or NUL inside a Markdown row or a LaTeX cell."""
    return _CONTROL_RE.sub(" ", s)


def _md_escape(s: str) -> str:
    return _spaced(s.replace("\\", "\\\\").replace("|", "\\|"))


def to_markdown(table: Table, *, headers: bool = True, inline_ci: bool = False) -> str:
    table = fold_intervals(table, with_value=inline_ci)
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
    """Text as LaTeX typesets it: its special characters escaped, control characters as spaces (a blank
    line would end the paragraph inside a cell, a newline would end a % comment)."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group(0)], _spaced(s))


_LABEL_RE = re.compile(r"[A-Za-z0-9:._/+-]{1,200}")


def check_label(label: str | None) -> None:
    """A LaTeX \\label key: letters, digits and : . _ / + - (nothing LaTeX would run, like \\input)."""
    if label is not None and not _LABEL_RE.fullmatch(label):
        shown = label if len(label) <= 40 else label[:37] + "..."
        raise ReachError(f"--label {shown!r}: a label is letters, digits and : . _ / + - only")


_MINUS = re.compile(r"(?<![\w.])-(?=\d)")


def _latex_cell(v: Any, col: Column) -> str:
    """One cell: every minus sign of a number (values and intervals alike) as $-$."""
    text = latex_escape(human_value(v, col.kind, col.signed))
    return _MINUS.sub("$-$", text) if _numeric(col) else text


def to_latex(table: Table, *, headers: bool = True, inline_ci: bool = False, caption: str | None = None,
             label: str | None = None) -> str:
    """A booktabs tabular (needs \\usepackage{booktabs}); notes as comments, warnings as a visible row.
    With `caption` or `label`, the tabular sits in a `table` environment that carries them."""
    table = fold_intervals(table, with_value=inline_ci)
    cols = table.columns
    spec = "".join("r" if _numeric(c) else "l" for c in cols)
    out = [f"% {latex_escape(table.title)}"]
    out += [f"% {latex_escape(n)}" for n in table.notes]
    wrapped = caption is not None or label is not None
    if wrapped:
        out += ["\\begin{table}[t]", "\\centering"]
        if caption is not None:
            out.append(f"\\caption{{{latex_escape(caption)}}}")
        if label is not None:
            check_label(label)
            out.append(f"\\label{{{label}}}")
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
    if wrapped:
        out.append("\\end{table}")
    return "\n".join(out) + "\n"


def to_rich(table: Table, *, compact: bool = False, inline_ci: bool = False):
    """A rich Table for the terminal (percentages for fractions; warnings in the title, in red). Notes
    are not part of it: print `table.notes` after it (as `to_text` and `reachtui export` do).

    `compact`: for a short table that should fit 80 columns (the audit's closing table): no borders,
    one space between columns, each word of a header on its own line, cells never wrapped."""
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    from rich.markup import escape

    table = fold_intervals(table, with_value=inline_ci)
    title = escape(shown(table.title))
    if table.warnings:
        title = "[bold red]" + " ".join(f"WARNING: {escape(shown(w))}" for w in table.warnings) + "[/]\n" + title
    if compact:
        rt = RichTable(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 0), show_edge=False)
    else:
        rt = RichTable(title=title)
    for c in table.columns:
        header = "\n".join(human_header(c).split()) if compact else human_header(c)
        rt.add_column(Text(shown(header)), justify="right" if _numeric(c) else "left", no_wrap=compact)
    for row in table.rows:
        rt.add_row(*[Text(shown(human_value(v, c.kind, c.signed))) for v, c in zip(row, table.columns)])
    return rt


#: How a control character shows on a terminal: C0 and DEL as their Unicode control pictures (ESC is ␛),
#: C1 and the bidirectional overrides as U+FFFD; a newline and a tab stay what they are.
_SHOWN = {**{i: 0x2400 + i for i in range(0x20) if i not in (0x09, 0x0A)}, 0x7F: 0x2421,
          **{i: 0xFFFD for i in range(0x80, 0xA0)},
          **{i: 0xFFFD for i in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}}


_SHOWN_LINE = {**_SHOWN, 0x09: 0x2409, 0x0A: 0x240A}


def shown(text: str, *, one_line: bool = False) -> str:
    """Text for a terminal: no control character reaches it (an escape sequence in a model's output would
    otherwise be run by the terminal: colours, its title, the clipboard). `one_line`: a tab and a newline
    shown as marks too (an id printed one per line stays one line)."""
    return text.translate(_SHOWN_LINE if one_line else _SHOWN)


def to_text(table: Table, *, width: int = 160, inline_ci: bool = False) -> str:
    """The rich rendering as plain text, notes below it (what `--format table` prints to a file or pipe)."""
    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(to_rich(table, inline_ci=inline_ci))
    for n in table.notes:
        console.print(shown(n), markup=False, highlight=False)
    return console.export_text()


def render(table: Table, fmt: str, *, headers: bool = True, inline_ci: bool = False, caption: str | None = None,
           label: str | None = None, formulas: bool = False) -> str:
    """The table as text in `fmt` (one of FORMATS). For people: `inline_ci` writes each interval beside its
    value ("80.3 [75.1, 85.0]") instead of in its own column; LaTeX takes a `caption` and a `label`; csv/tsv
    neutralise formulas unless `formulas`."""
    if fmt == "csv":
        return to_csv(table, headers=headers, formulas=formulas)
    if fmt == "tsv":
        return to_csv(table, delimiter="\t", headers=headers, formulas=formulas)
    if fmt == "json":
        return to_json(table)
    if fmt == "ndjson":
        return to_ndjson(table)
    if fmt == "md":
        return to_markdown(table, headers=headers, inline_ci=inline_ci)
    if fmt == "latex":
        return to_latex(table, headers=headers, inline_ci=inline_ci, caption=caption, label=label)
    if fmt == "table":
        return to_text(table, inline_ci=inline_ci)
    raise ReachError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def render_many(tables: Iterable[Table], fmt: str, **style) -> str:
    """Several tables in one text: blank-line separated for people, one JSON object per table name
    for json, concatenated records (with a `table` field) for ndjson, blank-line separated csv/tsv."""
    tables = list(tables)
    if len(tables) == 1:
        return render(tables[0], fmt, **style)
    if fmt == "json":
        obj = {t.name: json_records(t) for t in tables}
        return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "ndjson":
        return "".join(
            json.dumps({"table": t.name, **r}, ensure_ascii=False, allow_nan=False) + "\n"
            for t in tables
            for r in json_records(t)
        )
    return "\n".join(render(t, fmt, **style) for t in tables)
