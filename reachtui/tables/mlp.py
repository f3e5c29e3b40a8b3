"""The MLP silencing scan as stored (`mlp_scan` rows, written by the engine's scan): per failure set and
layer, how many members the silenced layer repairs and how many realized questions it breaks
(`reachtui.outcomes.repaired_broken`); each set's best block, and its line under the audit's closing table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reachtui.tables.formats import percent
from reachtui.tables.source import left_out_notes, runs_label
from reachtui.tables.table import Column, Table

MLP_COLUMNS = [
    Column("run", "int"), Column("set", label="failure set"), Column("layer", "int"),
    Column("failure_n", "int", label="set n"), Column("repaired", "int"),
    Column("repair_rate", "frac", label="repair"), Column("realized_n", "int", label="realized n"),
    Column("broken", "int"), Column("break_rate", "frac", label="break"),
    Column("net", "int", label="net (repaired − broken)", signed=True),
    Column("best", "bool", label="most repairs"), Column("best_net", "bool", label="best net"),
]

#: How the two "best" blocks of a set are chosen (said under the table and in the audit's closing lines).
BEST_NOTE = ("most repairs = the block with the highest repair rate (then the lowest break rate, then the "
             "lowest layer); best net = the highest repaired − broken (then the most repairs, then the lowest "
             "layer); neither when the failure set is empty")


def mlp_scan_table(store, run_ids: Sequence[int]) -> Table:
    """The one-MLP silencing scan as stored: per set and layer, repaired/|F|, broken/|R| and the net
    repaired − broken; `best` and `best_net` mark each set's two best blocks (BEST_NOTE)."""
    rows: list[tuple] = []
    notes: list[str] = []
    for run_id in run_ids:
        got = store.mlp_scan_ranked(run_id)
        if not got:
            notes.append(f"run {run_id} has no MLP scan (audit with --mlp-scan)")
        rows += got
    notes += left_out_notes(store, run_ids)
    if rows:
        notes.append(BEST_NOTE)
    title = "MLP silencing scan: repair rate on the failure set, break rate on the realized set"
    return Table("mlp-scan", title + runs_label(run_ids), list(MLP_COLUMNS), rows, notes=notes)


def mlp_best(store, run_id: int, *, by: str = "best") -> list[dict[str, Any]]:
    """The best block of each scanned, non-empty failure set, as dicts: `by` "best" (most repairs) or
    "best_net" (repaired − broken)."""
    return [row for row in mlp_scan_table(store, [run_id]).dicts() if row[by]]


def best_of(rows: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the block with the most repairs, the best net block) among one set's scan rows; None for an
    empty failure set."""
    most = next((r for r in rows if r["best"]), None)
    net = next((r for r in rows if r["best_net"]), None)
    return None if most is None or net is None else (most, net)


def mlp_lines(store, run_id: int) -> list[str]:
    """One line per scanned failure set: the block with the most repairs and the best net block, what
    each repairs and what it breaks."""
    rows = mlp_scan_table(store, [run_id]).dicts()
    out = []
    for name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == name]
        best = best_of(mine)
        if best is None:
            out.append(f"MLP scan on {name}: the failure set is empty (|R| = {mine[0]['realized_n']}): no best block")
            continue
        most, net = best
        if most["repaired"] == 0:       # no "most repairs" where nothing was repaired
            out.append(f"MLP scan on {name} (|F| = {most['failure_n']}, |R| = {most['realized_n']}): no silenced "
                       f"block repairs any question of the failure set")
            continue
        line = (f"MLP scan on {name} (|F| = {most['failure_n']}, |R| = {most['realized_n']}): most repairs = "
                f"layer {most['layer']}: repairs {most['repaired']}/{most['failure_n']} "
                f"({percent(most['repair_rate'])}%), breaks {most['broken']}/{most['realized_n']} "
                f"({percent(most['break_rate'])}%)")
        if net is most:
            line += "; also the best net (repaired − broken)"
        else:
            line += (f"; best net (repaired − broken) = layer {net['layer']}: {net['net']:+d} "
                     f"({net['repaired']} repaired, {net['broken']} broken)")
        out.append(line)
    return out
