"""Drawing: one function per figure kind, each from the tables of a `Shown` (`shown.py`) in the look of
`look.py`, on a matplotlib Figure that no display ever sees (the Agg canvas).

Every drawn series carries what it shows (`KEY`: the table, run, probe or failure set, and column), so
`files.plotted` reads the numbers back from the artists themselves: lines' data, bands' and error bars'
vertices, the retained numbers' text. Shares are plotted as exported (0..1; the axes label them in % and
differences in percentage points). The figure carries no provenance (the file's metadata does): only an
optional title, the legend, and any warning of the tables in red.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from typing import Any

from reachtui import stats
from reachtui.errors import ReachError
from reachtui.reports.plots import look
from reachtui.reports.plots.shown import (Shown, budgets, curves_by, is_number, pass_at_k_rows, run_n, side_names,
                                  summary_of)
from reachtui.probes import registry

#: The attribute of a drawn artist that says what it shows: {"table", "run", "probe" or "set", "column"}.
KEY = "reachtui_key"
#: Space per legend row and around the panels (inches), added to the panels' height.
LEGEND_ROW = 0.16
MARGINS = 0.42
#: Horizontal offset (points) that keeps two series at one x apart, their data unmoved.
DODGE = 2.2
#: The panels of one figure together are at most this tall (inches), down to 1.6 in a panel.
TALLEST = 7.5


def need_matplotlib():
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ReachError("figures need matplotlib: pip install 'reachtui[plot]'") from None
    return matplotlib, Figure


def tag(artist, **key) -> Any:
    """Mark what `artist` shows (read back by `files.plotted`); its SVG id says the same for people."""
    setattr(artist, KEY, key)
    artist.set_gid(re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(str(v) for v in key.values())))
    return artist


def floats(values) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]


# --------------------------------------------------------------------------------------------------
# The legend: one entry per kind of thing shown, whatever the panels
# --------------------------------------------------------------------------------------------------


class Legend:
    """The figure's legend entries, in order, each once (proxy artists, not the tagged ones)."""

    def __init__(self) -> None:
        self.entries: dict[str, Any] = {}

    def line(self, label: str, glyph: look.Glyph, *, hollow: bool = False, line: Any = None,
             width: float = 1.2) -> None:
        from matplotlib.lines import Line2D

        if label not in self.entries:
            self.entries[label] = Line2D([], [], color=glyph.colour, marker=glyph.marker or None,
                                         linestyle=glyph.line if line is None else line, linewidth=width,
                                         markersize=4, markerfacecolor="white" if hollow else glyph.colour)

    def band(self, label: str, colour: str, hatch: str) -> None:
        from matplotlib.patches import Patch

        if label not in self.entries:
            self.entries[label] = Patch(facecolor="none", edgecolor=colour, hatch=hatch, linewidth=0)

    def place(self, fig) -> int:
        """Below the panels, in as many columns as fit the figure's width; the number of rows it takes."""
        if not self.entries:
            return 0
        renderer = fig.canvas.get_renderer()
        handles, labels = list(self.entries.values()), list(self.entries)
        for ncols in range(min(len(labels), 4), 0, -1):
            legend = fig.legend(handles, labels, loc="outside lower center", ncols=ncols)
            if ncols == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width * 0.96:
                return math.ceil(len(labels) / ncols)
            legend.remove()
        return len(labels)


# --------------------------------------------------------------------------------------------------
# Pieces
# --------------------------------------------------------------------------------------------------


def panels(fig, n: int, width: float, *, aspect: float = 0.7, height_cap: float = 2.5, cols: int | None = None,
           ratios: Sequence[float] | None = None):
    """n panels: one column at a journal's column width, up to 3 a row on wider pages (`ratios`: their
    widths)."""
    if cols is None:
        cols = 1 if width < 5 else min(n, 2 if width < 9 else 3)
    rows = math.ceil(n / cols)
    panel_h = min(width / cols * aspect, height_cap, max(1.6, TALLEST / rows))
    fig.set_size_inches(width, rows * panel_h)
    grid = fig.add_gridspec(rows, cols, width_ratios=ratios if cols > 1 else None)
    return [fig.add_subplot(grid[i // cols, i % cols]) for i in range(n)]


def _marks_every(ks: Sequence[int]):
    """Markers at every k up to 8 attempts, else at 1, 2, 4, ... and K (the curve itself is every k)."""
    if len(ks) <= 8:
        return None
    return [i for i, k in enumerate(ks) if k & (k - 1) == 0 or i == len(ks) - 1]


def band(ax, xs, lo, hi, colour: str, hatch: str, *, alpha: float = 0.55, **key) -> None:
    """An interval as a hatched band with no fill: overlapping bands stay apart, in greyscale too."""
    collection = ax.fill_between(xs, floats(lo), floats(hi), facecolor="none", edgecolor=colour, hatch=hatch,
                                 linewidth=0, alpha=alpha, zorder=1)
    tag(collection, **key)


def curve(ax, rows: list[dict[str, Any]], glyph: look.Glyph, *, run: int, probe: str) -> None:
    """One budget curve of the passk table (value, and its chance control), each with its interval band."""
    ks = [r["k"] for r in rows]
    every = _marks_every(ks)
    line, = ax.plot(ks, floats(r["value"] for r in rows), color=glyph.colour, marker=glyph.marker,
                    linestyle=glyph.line, markevery=every, zorder=3)
    tag(line, table="passk", run=run, probe=probe, column="value")
    band(ax, ks, (r["value_lo"] for r in rows), (r["value_hi"] for r in rows), glyph.colour, glyph.hatch,
         table="passk", run=run, probe=probe, column="value_lo,value_hi")
    control = floats(r["control"] for r in rows)
    if all(math.isnan(y) for y in control):
        return
    line, = ax.plot(ks, control, color=glyph.colour, marker=glyph.marker, markerfacecolor="white",
                    linestyle=look.CONTROL_LINE, linewidth=1.0, markevery=every, zorder=2.5)
    tag(line, table="passk", run=run, probe=probe, column="control")
    band(ax, ks, (r["control_lo"] for r in rows), (r["control_hi"] for r in rows), glyph.colour,
         look.CONTROL_HATCH, alpha=0.35, table="passk", run=run, probe=probe, column="control_lo,control_hi")


def realized_level(ax, row: dict[str, Any] | None, run: int) -> bool:
    """The run's realized share as a black line across the panel, its Wilson interval a grey band."""
    if row is None or not is_number(row.get("realized")):
        return False
    line = ax.axhline(row["realized"], color=look.BLACK, linewidth=1.0, linestyle="-", zorder=2)
    tag(line, table="summary", run=run, probe=registry.REALIZED.name, column="realized")
    if is_number(row.get("realized_lo")) and is_number(row.get("realized_hi")):
        span = ax.fill_between([0, 1], row["realized_lo"], row["realized_hi"], facecolor=look.BLACK, alpha=0.12,
                               linewidth=0, zorder=0.5, transform=ax.get_yaxis_transform())
        tag(span, table="summary", run=run, probe=registry.REALIZED.name, column="realized_lo,realized_hi")
    return True


def errorbar(ax, x: float, y: float, lo: float, hi: float, glyph: look.Glyph, *, dodge: float = 0.0,
             size: float = 4.5, **key):
    """One point with its interval, shifted `dodge` points sideways on the page (its data unmoved)."""
    y, lo, hi = floats([y, lo, hi])
    bars = ax.errorbar([x], [y], yerr=None if math.isnan(lo) or math.isnan(hi) else [[y - lo], [hi - y]],
                       fmt=glyph.marker, color=glyph.colour, markersize=size, capsize=2.5, elinewidth=0.9,
                       capthick=0.9, transform=ax.transData + _shift(ax, dodge), zorder=3)
    tag(bars.lines[0], **key)
    if bars.lines[2]:
        tag(bars.lines[2][0], **{**key, "column": f"{key['column']}_lo,{key['column']}_hi"})
    return bars


def _shift(ax, points: float):
    """A sideways move of `points` on the page: two series at one x drawn apart, their data unmoved."""
    from matplotlib.transforms import ScaledTranslation

    return ScaledTranslation(points / 72, 0, ax.figure.dpi_scale_trans)


def k_max(rows: Sequence[dict[str, Any]]) -> int:
    return max((r["k"] for r in rows), default=1)


def curve_label(probe: str, rows: Sequence[dict[str, Any]]) -> str:
    return f"{probe} ({rows[0]['estimator']})"


# --------------------------------------------------------------------------------------------------
# The figures
# --------------------------------------------------------------------------------------------------


def draw_reach(fig, shown: Shown, width: float, legend: Legend) -> None:
    """Per run, reachable@k of every probe (sample: pass@k) beside its chance control, under the realized
    level: the ceiling against the deployed score."""
    curves = curves_by(shown.rows("passk"))
    axes = panels(fig, len(shown.runs), width)
    for ax, info, name in zip(axes, shown.runs, side_names(shown)):
        run = info["run"]
        mine = registry.ordered_names(p for r, p in curves if r == run)
        for probe in mine:
            glyph = look.probe_glyph(probe)
            curve(ax, curves[(run, probe)], glyph, run=run, probe=probe)
            legend.line(curve_label(probe, curves[(run, probe)]), glyph)
        if realized_level(ax, next(iter(summary_of(shown, run).values()), None), run):
            legend.line("realized", look.REALIZED)
        look.k_axis(ax, k_max([r for p in mine for r in curves[(run, p)]]))
        look.share_axis(ax, f"reached within k (% of {run_n(shown, run)})")
        if len(shown.runs) > 1:
            ax.set_title(name)
    _curve_entries(legend)


def _curve_entries(legend: Legend) -> None:
    """The legend entries every figure of budget curves shares: the chance control and the interval band."""
    legend.line("chance control", look.Glyph(look.GREY, "o", look.CONTROL_LINE, ""), hollow=True, width=1.0)
    legend.band("95% Wilson interval", look.GREY, "////")


def draw_blind(fig, shown: Shown, width: float, legend: Legend) -> None:
    """Per run, two panels: the route probes' reachable@k (random routes against the search, at the same
    budget k), and at each probe's budget K the answer-blind pick (majority vote) between realized and
    reachable, with retained = (blind − realized) / (reachable − realized)."""
    curves = curves_by(shown.rows("passk"))
    axes = panels(fig, 2 * len(shown.runs), width, cols=1 if width < 5 else 2, ratios=(1.7, 1))
    names = side_names(shown)
    for i, info in enumerate(shown.runs):
        run = info["run"]
        by_k, at_k = axes[2 * i], axes[2 * i + 1]
        mine = registry.ordered_names(p for r, p in curves if r == run)
        summary = summary_of(shown, run)
        for probe in mine:
            glyph = look.probe_glyph(probe)
            curve(by_k, curves[(run, probe)], glyph, run=run, probe=probe)
            legend.line(curve_label(probe, curves[(run, probe)]), glyph)
        realized_row = next(iter(summary.values()), None)
        for ax in (by_k, at_k):
            if realized_level(ax, realized_row, run):
                legend.line("realized", look.REALIZED)
        look.k_axis(by_k, k_max([r for p in mine for r in curves[(run, p)]]))
        n = run_n(shown, run)
        look.share_axis(by_k, f"reached within k (% of {n})")
        _picks(at_k, [summary[p] for p in mine if p in summary], run, legend)
        look.share_axis(at_k, f"% of {n} at the budget K", headroom=0.3)
        if len(shown.runs) > 1:
            by_k.set_title(names[i])
            at_k.set_title(names[i])
    _curve_entries(legend)


def _picks(ax, rows: list[dict[str, Any]], run: int, legend: Legend) -> None:
    """At each probe's budget: reachable (its interval), the answer-blind pick, and retained above them."""
    for x, row in enumerate(rows):
        probe = row["probe"]
        errorbar(ax, x, row["reachable"], row["reachable_lo"], row["reachable_hi"], look.probe_glyph(probe),
                 dodge=-DODGE, table="summary", run=run, probe=probe, column="reachable")
        pick, = ax.plot([x], floats([row["blind_vote"]]), linestyle="none", marker=look.BLIND.marker,
                        color=look.BLIND.colour, markersize=5.5, zorder=4,
                        transform=ax.transData + _shift(ax, DODGE))
        tag(pick, table="summary", run=run, probe=probe, column="blind_vote")
        text = ax.text(x, 1.04, "retained\n" + _retained(row), ha="center", va="bottom", fontsize=7)
        tag(text, table="summary", run=run, probe=probe, column="retained")
        text.reachtui_value = {c: row.get(c) for c in ("retained", "retained_lo", "retained_hi")}
    legend.line("answer-blind pick (vote)", look.BLIND)
    ax.set_xticks(range(len(rows)), [f"{r['probe']}\nK = {r['budget']}" for r in rows])
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.tick_params(axis="x", length=0)


def _retained(row: dict[str, Any]) -> str:
    """retained as people read it: "+14%", "+14%\n[3, 25]", or "– (no gap)" where the gap is not positive."""
    v = row.get("retained")
    if not is_number(v):
        return "– (no gap)"
    out = f"{100 * v:+.0f}%".replace("-", "−")
    lo, hi = row.get("retained_lo"), row.get("retained_hi")
    if is_number(lo) and is_number(hi):
        out += f"\n[{100 * lo:.0f}, {100 * hi:.0f}]".replace("-", "−")
    return out


def draw_mlp(fig, shown: Shown, width: float, legend: Legend) -> None:
    """Per scanned failure set, per silenced MLP block: the repair rate on the failure set and the break
    rate on the realized set, with 95% Wilson intervals (of the table's counts); the block with the most
    repairs marked when it repairs any."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in shown.rows("mlp-scan"):
        groups.setdefault((r["run"], r["set"]), []).append(r)
    axes = panels(fig, len(groups), width)
    names = dict(zip([r["run"] for r in shown.runs], side_names(shown)))
    repair, brk = look.Glyph(look.GREEN, "o", "-", ""), look.Glyph(look.VERMILLION, "s", "--", "")
    for ax, ((run, name), rows) in zip(axes, groups.items()):
        layers = [r["layer"] for r in rows]
        for column, count, of, glyph, dodge, label in (
                ("repair_rate", "repaired", "failure_n", repair, -DODGE, "repair rate (failure set F)"),
                ("break_rate", "broken", "realized_n", brk, DODGE, "break rate (realized set R)")):
            shift = ax.transData + _shift(ax, dodge)
            line, = ax.plot(layers, floats(r[column] for r in rows), color=glyph.colour, marker=glyph.marker,
                            linestyle=glyph.line, transform=shift, zorder=3)
            tag(line, table="mlp-scan", run=run, set=name, column=column)
            intervals = [stats.wilson(r[count], r[of]) if r[of] else stats.NAN_PAIR for r in rows]
            bars = ax.vlines(layers, floats(lo for lo, _hi in intervals), floats(hi for _lo, hi in intervals),
                             color=glyph.colour, linewidth=0.9, transform=shift, zorder=2.5)
            tag(bars, table="mlp-scan", run=run, set=name, column=f"{column}_lo,{column}_hi")
            legend.line(label, glyph)
        best = next((r for r in rows if r["best"]), None)
        if best is not None and best["repaired"]:
            mark = ax.axvline(best["layer"], color=look.GREY, linestyle=(0, (1, 1.5)), linewidth=1.0, zorder=1)
            tag(mark, table="mlp-scan", run=run, set=name, column="best")
            legend.line("most repairs", look.Glyph(look.GREY, "", (0, (1, 1.5)), ""), width=1.0)
        look.layer_axis(ax, layers)
        look.share_axis(ax, "share of the set")
        title = f"{name}: |F| = {rows[0]['failure_n']}, |R| = {rows[0]['realized_n']}"
        ax.set_title(title if len(shown.runs) == 1 else f"{names[run]}, {title}")
    legend.line("95% Wilson interval", look.Glyph(look.GREY, "", "-", ""), width=0.9)


def draw_compare(fig, shown: Shown, width: float, legend: Legend) -> None:
    """Two runs (A, then B) on the questions both have: realized and each probe's reachable in A and in B,
    and Δ = B − A in percentage points with its 95% paired-bootstrap interval."""
    rows = shown.rows("compare")
    cats = [(registry.REALIZED.name, rows[0], "realized")] + [(r["probe"], r, "reachable") for r in rows
                                                             if r["probe"] is not None]
    levels, delta = panels(fig, 2, width, aspect=0.5, height_cap=1.9, cols=1)
    delta.sharex(levels)
    names = side_names(shown)
    glyph_a, glyph_b = look.run_glyph(0), look.run_glyph(1)
    shift_a, shift_b = (levels.transData + _shift(levels, -2 * DODGE), levels.transData + _shift(levels, 2 * DODGE))
    for x, (name, row, measure) in enumerate(cats):
        a, b = floats([row[f"{measure}_a"], row[f"{measure}_b"]])
        if not (math.isnan(a) or math.isnan(b)):         # A to B, as a slope
            levels.annotate("", xy=(x, b), xycoords=shift_b, xytext=(x, a), textcoords=shift_a,
                            arrowprops={"arrowstyle": "-", "color": look.GREY, "linewidth": 0.8,
                                        "shrinkA": 0, "shrinkB": 0}, zorder=2)
        for side, value, glyph, shift in (("a", a, glyph_a, shift_a), ("b", b, glyph_b, shift_b)):
            point, = levels.plot([x], [value], linestyle="none", marker=glyph.marker, color=glyph.colour,
                                 markersize=5, transform=shift, zorder=3)
            tag(point, table="compare", probe=name, column=f"{measure}_{side}")
        errorbar(delta, x, row[f"{measure}_delta"], row[f"{measure}_delta_lo"], row[f"{measure}_delta_hi"],
                 look.Glyph(look.BLACK, "s", "", ""), size=4, table="compare", probe=name,
                 column=f"{measure}_delta")
    legend.line(f"A: {names[0]}", glyph_a, line="")
    legend.line(f"B: {names[1]}", glyph_b, line="")
    legend.line("Δ = B − A, 95% paired bootstrap", look.Glyph(look.BLACK, "s", "-", ""), width=0.9)
    look.share_axis(levels, f"% of n = {rows[0]['n']}")
    levels.tick_params(axis="x", labelbottom=False, length=0)
    values = [v for _n, row, m in cats for v in floats([row[f"{m}_delta_lo"], row[f"{m}_delta_hi"],
                                                         row[f"{m}_delta"]])]
    look.points_axis(delta, "Δ = B − A (pp)", values)
    delta.set_xticks(range(len(cats)), [registry.REALIZED.name] + [f"reachable\n{n}" for n, _r, _m in cats[1:]])
    delta.set_xlim(-0.5, len(cats) - 0.5)
    delta.tick_params(axis="x", length=0)


def draw_passk(fig, shown: Shown, width: float, legend: Legend) -> None:
    """pass@k of each pass@k probe (sample), one curve per run, each beside its chance control."""
    rows = pass_at_k_rows(shown)
    curves = curves_by(rows)
    probes = registry.ordered_names({r["probe"] for r in rows})
    axes = panels(fig, len(probes), width)
    names = side_names(shown)
    for ax, probe in zip(axes, probes):
        for i, info in enumerate(shown.runs):
            mine = curves.get((info["run"], probe))
            if mine:
                curve(ax, mine, look.run_glyph(i), run=info["run"], probe=probe)
                n = run_n(shown, info["run"])
                legend.line(f"{names[i]} (n = {n})" if len(shown.runs) > 1 else f"{probe} (n = {n})",
                            look.run_glyph(i))
        look.k_axis(ax, budgets(rows).get(probe, 1))
        look.share_axis(ax, "pass@k (unbiased estimator)")
        if len(probes) > 1:
            ax.set_title(probe)
    _curve_entries(legend)


DRAW = {"reach": draw_reach, "blind": draw_blind, "mlp-scan": draw_mlp, "compare": draw_compare,
        "passk": draw_passk}


def wrap(text: str, width_in: float, size: float) -> str:
    """`text` wrapped to lines that fit `width_in` inches at `size` points (DejaVu Sans: about 0.55 em a
    character, 0.6 taken)."""
    chars = max(12, int(width_in * 72 / (size * 0.6)))
    return "\n".join(textwrap.wrap(text, chars)) or text


def draw(shown: Shown, *, width: float = look.WIDTHS["column"], title: str | None = None,
         style: dict[str, Any] | None = None):
    """The matplotlib Figure of `shown`, `width` inches wide (on the Agg canvas, never a display)."""
    matplotlib, Figure = need_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    with rc_context(matplotlib, style):
        fig = Figure(layout="constrained")
        FigureCanvasAgg(fig)
        legend = Legend()
        DRAW[shown.kind](fig, shown, width, legend)
        panels_h = fig.get_size_inches()[1]
        extra = MARGINS
        if title:
            fig.suptitle(wrap(title, width, 9))
            extra += 0.2 * (fig.get_suptitle().count("\n") + 1)
        rows = legend.place(fig)
        note = wrap("WARNING: " + " ".join(shown.warnings), width - 0.1, 7) if shown.warnings else ""
        strip = 0.14 * (note.count("\n") + 1.3) if note else 0.0
        height = panels_h + extra + rows * LEGEND_ROW + strip
        fig.set_size_inches(width, height)
        if note:
            fig.text(0.5, 0.04 / height, note, ha="center", va="bottom", color="#C00000", fontsize=7)
            fig.get_layout_engine().set(rect=(0, strip / height, 1, 1 - strip / height))
    fig.reachtui_shown = shown
    fig.reachtui_style = style
    return fig


def rc_context(matplotlib, style: dict[str, Any] | None):
    """reachtui's look, a --style file's settings over it, then what stays fixed (`look.rc_layers`)."""
    from contextlib import ExitStack

    stack = ExitStack()
    for layer in look.rc_layers(style):
        stack.enter_context(matplotlib.rc_context(layer))
    return stack
