"""Figures for a paper (`reachtui plot KIND RUN... -o FILE.pdf|png|svg`, `reachtui plot all RUN [RUN2] -o
DIR/`), drawn with matplotlib (the optional extra `reachtui[plot]`) on its headless Agg canvas from the very
tables `reachtui export` writes: a figure computes nothing of its own (only the MLP scan's Wilson intervals,
from the table's counts, by `reachtui.stats.wilson`, the tables' own function).

The seed's four findings, and pass@k:

    reach     the ceiling against the deployed score: reachable@k of each probe (sample: pass@k) beside its
              chance control, under the realized level                       <- export passk, summary
    blind     random routes vs MCTS at matched budgets: their reachable@k, and at K the answer-blind pick
              between realized and reachable, with retained                  <- export passk, summary
    mlp-scan  per silenced MLP block, the repair rate on the failure set and the break rate on the
              realized set, with intervals; the block with the most repairs marked <- export mlp-scan
    compare   a matched comparison (base vs tuned): realized and reachable in A and B side by side, and
              Δ = B − A in percentage points with its paired-bootstrap interval <- export compare
    passk     pass@k of the sampling probe, one curve per run, beside its chance control <- export passk

    shown.py     which tables each figure shows, and the one-line refusals (pure Python)
    look.py      widths, fonts, glyphs and palette, axes, --style files
    draw.py      one function per figure; every drawn series tagged with what it shows
    files.py     the PDF/PNG/SVG bytes, with the plotted numbers, the provenance and the title inside
    captions.py  --caption: the LaTeX caption (runs, n, K, probes, intervals)

matplotlib is imported only in look, draw and files, and only when a figure is drawn; no torch.
"""

from __future__ import annotations

from reachtui.reports.plots.captions import caption
from reachtui.reports.plots.draw import KEY, draw
from reachtui.reports.plots.files import FIGURE_FORMATS, NAMES, PNG_DATA, PNG_PROVENANCE, plotted, provenance, render
from reachtui.reports.plots.look import MIN_FONT, WIDTHS, parse_width, style_rc
from reachtui.reports.plots.shown import KINDS, NothingToDraw, Shown, check_kind, figure_tables

#: `reachtui plot all`: the figures drawn for one run, and the one drawn only for two (A, B).
ONE_RUN_KINDS = tuple(k for k in KINDS if k != "compare")

__all__ = ["KINDS", "ONE_RUN_KINDS", "FIGURE_FORMATS", "NAMES", "KEY", "PNG_DATA", "PNG_PROVENANCE", "MIN_FONT",
           "NothingToDraw", "WIDTHS", "Shown", "caption", "check_kind", "draw", "figure_tables", "parse_width",
           "plotted", "provenance", "render", "style_rc"]
