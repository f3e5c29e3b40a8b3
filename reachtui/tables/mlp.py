"""The MLP silencing scan as stored (`mlp_scan` rows, written by the engine's scan): per failure set and
layer, how many members the silenced layer repairs and how many realized questions it breaks
(`reachtui.outcomes.repaired_broken`); each set's best block, and its line under the audit's closing table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reachtui.tables.formats import percent
from reachtui.tables.source import connection, runs_label
from reachtui.tables.table import Column, Table

MLP_COLUMNS = [
    Column("run", "int"), Column("set", label="failure set"), Column("layer", "int"),
    Column("failure_n", "int", label="set n"), Column("repaired", "int"),
    Column("repair_rate", "frac", label="repair"), Column("realized_n", "int", label="realized n"),
    Column("broken", "int"), Column("break_rate", "frac", label="break"), Column("best", "bool"),
]


def mlp_scan_table(source: Any, run_ids: Sequence[int]) -> Table:
    """The one-MLP silencing scan as stored: per set and layer, repaired/|F| and broken/|R|; `best`
    marks each set's best block (highest repair rate, then lowest break rate, then lowest layer)."""
    con = connection(source)
    rows: list[tuple] = []
    notes: list[str] = []
    for run_id in run_ids:
        cur = con.execute(
            """SELECT s.run_id, f.name, s.layer, s.failure_n, s.repaired, s.repair_rate, s.realized_n,
                      s.broken, s.break_rate,
                      row_number() OVER (PARTITION BY s.set_id ORDER BY s.repair_rate IS NULL,
                        s.repair_rate DESC, s.break_rate IS NULL, s.break_rate, s.layer) = 1
               FROM mlp_scan s JOIN failure_sets f ON f.id = s.set_id
               WHERE s.run_id = ? ORDER BY s.set_id, s.layer""",
            (run_id,),
        )
        got = [r[:9] + (bool(r[9]),) for r in cur]
        if not got:
            notes.append(f"run {run_id} has no MLP scan (audit with --mlp-scan)")
        rows += got
    title = "MLP silencing scan: repair rate on the failure set, break rate on the realized set"
    return Table("mlp-scan", title + runs_label(run_ids), list(MLP_COLUMNS), rows, notes=notes)


def mlp_best(source: Any, run_id: int) -> list[dict[str, Any]]:
    """The best block of each scanned failure set (the `best` rows of `mlp_scan_table`), as dicts."""
    return [row for row in mlp_scan_table(source, [run_id]).dicts() if row["best"]]


def mlp_lines(source: Any, run_id: int) -> list[str]:
    """One line per scanned failure set: its best block, what it repairs and what it breaks."""
    out = []
    for b in mlp_best(source, run_id):
        if not b["failure_n"]:
            out.append(f"MLP scan on {b['set']}: the failure set is empty (|R| = {b['realized_n']})")
            continue
        out.append(f"MLP scan on {b['set']} (|F| = {b['failure_n']}, |R| = {b['realized_n']}): best block "
                   f"= layer {b['layer']}: repairs {b['repaired']}/{b['failure_n']} ({percent(b['repair_rate'])}%), "
                   f"breaks {b['broken']}/{b['realized_n']} ({percent(b['break_rate'])}%)")
    return out
