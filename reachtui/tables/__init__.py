"""Every table reachtui shows or exports. `reachtui export`, `reachtui compare`, the audit's closing table,
the importer's summary and the app read their tables from here; the tables read the audit store (schema
in `reachtui/store/`) with the definitions of `reachtui.outcomes` (realized, reachable, first hit,
failure set), `reachtui.curves` (pass@k, reachable@k) and the probe registry, and return a `Table`
(`table.py`) that `formats.py` writes in every format.

    source.py     the run as the tables know it (run_info: its row and typed protocol, run_probes, budgets)
    summary.py    per run and probe: realized vs reachable, chance control, intervals; the audit's closing
    questions.py  question by question, and the raw attempts
    budget.py     budget curves (passk) and hit counts (hits)
    mlp.py        the MLP silencing scan
    compare.py    two runs, question by question
    registry.py   one record per table (name, builder, runs, help, the app's formats): build_table, TABLES
    table.py      the Table value and `select` (--where/--columns/--order/--limit)
    formats.py    csv, tsv, json, ndjson, md, latex, rich; intervals folded for people

Entry point: `build_table(store, name, run_ids)` for each of TABLES (the registry's records). Intervals are
columns `X_lo`, `X_hi` beside `X` (Wilson and bootstrap, `reachtui.stats`); the chance control comes from `reachtui.control`.
Python and sqlite3 (numpy for the bootstrap, imported when one runs): importing this package never imports
torch, transformers or textual (rich is imported only by `formats.to_rich`/`to_text`).
"""

from __future__ import annotations

from reachtui.curves import pass_at_k
from reachtui.stats import mcnemar_exact, ratio
from reachtui.tables.budget import HITS_COLUMNS, PASSK_COLUMNS, hits_table, passk_table
from reachtui.tables.compare import (CELLS, COMPARE_COLUMNS, Comparison, compare_runs, compare_table,
                                     compare_views, transition)
from reachtui.tables.mlp import MLP_COLUMNS, mlp_best, mlp_scan_table
from reachtui.tables.questions import ATTEMPT_COLUMNS, attempts_table, questions_table
from reachtui.tables.registry import TABLES, TABLE_SPECS, build_table
from reachtui.tables.source import column_suffix, is_reach_probe, run_info, run_probes
from reachtui.tables.summary import (SUMMARY_COLUMNS, SUMMARY_NOTE, closing, closing_lines, closing_table,
                                     header_grid, header_lines, summary_lines, summary_rows, summary_table, summary_views)
from reachtui.tables.table import Column, Table, select

__all__ = [
    "TABLES", "TABLE_SPECS", "build_table", "Table", "Column", "select",
    "summary_rows", "summary_table", "summary_lines", "header_grid", "header_lines", "summary_views", "closing", "closing_table", "closing_lines",
    "SUMMARY_COLUMNS", "SUMMARY_NOTE", "questions_table", "attempts_table", "ATTEMPT_COLUMNS",
    "passk_table", "hits_table", "PASSK_COLUMNS", "HITS_COLUMNS", "mlp_scan_table", "mlp_best", "MLP_COLUMNS",
    "compare_runs", "compare_table", "compare_views", "Comparison", "CELLS", "COMPARE_COLUMNS", "transition",
    "run_info", "run_probes", "is_reach_probe", "column_suffix",
    "pass_at_k", "mcnemar_exact", "ratio",
]
