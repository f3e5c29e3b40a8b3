"""The app's export: a table of the open run built by `reachtui.tables` and written by the same code as
`reachtui export` (the questions table restricted to the rows on screen)."""

from __future__ import annotations

from pathlib import Path


def export_table(store, run_id: int, table: str, fmt: str, folder: Path, *, shown: set[str] | None = None,
                 label: str | None = None) -> tuple[Path, int]:
    """Write `table` of run `run_id` in `fmt` to a file in `folder`; with `shown`, only those question ids
    (the view's filter, `label`, which also names the file). Returns (path, rows written); ReachError on
    failure."""
    from reachtui import tables
    from reachtui.output import write_output
    from reachtui.tables.formats import render

    built = tables.build_table(store, table, [run_id])
    if shown is not None:
        col = built.column_names.index("question_id")
        built.rows = [row for row in built.rows if row[col] in shown]
        built.notes.append(f"filter: {label}")
    slug = "".join(ch for ch in (label or "").replace(" ", "-") if ch.isalnum() or ch in "-_")[:40]
    suffix = {"latex": "tex", "table": "txt"}.get(fmt, fmt)
    path = Path(folder) / f"run{run_id}-{table}{'-' + slug if slug else ''}.{suffix}"
    Path(folder).mkdir(parents=True, exist_ok=True)
    write_output(str(path), render(built, fmt), store.path)
    return path, len(built.rows)
