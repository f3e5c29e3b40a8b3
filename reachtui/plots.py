"""Figures for a paper (`reachtui plot KIND RUN... -o FILE.pdf|png|svg`), drawn with matplotlib (the optional
extra `reachtui[plot]`) on its headless Agg canvas, never a display, from the very tables `reachtui export`
writes: a figure computes nothing of its own.

    passk     pass@k per pass@k probe (sample), one colour per run: the curve and its 95% interval (shaded),
              the chance control (dotted) and its interval          <- export passk
    reach     reachable@k of every probe of a run (routes, mcts: reachable@k; sample: pass@k), each with its
              chance control, the run's realized level as a line   <- export passk, export summary
    mlp-scan  per silenced MLP block, the repair rate on the failure set and the break rate on the realized
              set, the block with the most repairs marked          <- export mlp-scan
    compare   two runs' curves per compared probe, and Δ (B - A) of realized and of each probe's reachable
              with the paired-bootstrap interval                   <- export passk, export compare

Every drawn series is tagged with the table, run, probe (or failure set) and column it shows (`KEY`), so
`plotted(fig)` reads the numbers back from the artists themselves (lines' data, the shaded bands' and the
error bars' vertices), and `save` writes that read-back, as JSON, into the file: the PDF's Subject, the SVG's
dc:description, the PNG's `reachtui:data` text chunk. Fractions are plotted as they are exported (0..1; the
axis labels them as %). The figure's title says which runs (model, task, protocol hash) and its panels and
legends which probes it shows. Imports matplotlib only here, and no torch.
"""

from __future__ import annotations

import io
import json
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reachtui import __version__
from reachtui.errors import ReachError
from reachtui.probes import registry

KINDS = ("passk", "reach", "mlp-scan", "compare")
FIGURE_FORMATS = ("pdf", "png", "svg")
#: The attribute of a drawn artist that says what it shows: {"table", "run", "probe" or "set", "column"}.
KEY = "reachtui_key"
#: The PNG text chunk that carries the plotted data.
PNG_DATA = "reachtui:data"
#: What the figures' lines mean (said under every figure).
LEGEND_NOTE = ("shaded: 95% Wilson interval over the questions counted; dotted: chance control (each question's "
               "attempts scored against another question's gold)")


def _mpl():
    try:
        import matplotlib
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator, PercentFormatter
    except ImportError:
        raise ReachError("figures need matplotlib: pip install 'reachtui[plot]'") from None
    return matplotlib, Figure, PercentFormatter, MaxNLocator


#: matplotlib settings while a figure is drawn and saved: text stays text in SVG and PDF (editable in a
#: paper's figure), files are byte-stable (fixed SVG ids, no dates), no display.
RC = {"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "reachtui", "font.size": 8,
      "axes.titlesize": 8, "legend.fontsize": 7, "figure.dpi": 100}


# --------------------------------------------------------------------------------------------------
# The tables a figure shows (the export's own)
# --------------------------------------------------------------------------------------------------


@dataclass
class Shown:
    """What a figure shows: its kind, the runs (`run_info` dicts) and the tables, by export name."""

    kind: str
    runs: list[dict[str, Any]]
    tables: dict[str, Any]


def figure_tables(store, kind: str, run_ids: Sequence[int], *, probes: Sequence[str] = (),
                  allow_unmatched: bool = False, bootstrap: int = 1000, seed: int = 0) -> Shown:
    """The tables `reachtui export` writes for these runs (`build_table`, the same call), restricted to
    `probes` when given (rows filtered, nothing recomputed)."""
    from reachtui import tables as T

    if kind not in KINDS:
        raise ReachError(f"unknown figure {kind!r}; choose one of {', '.join(KINDS)}")
    run_ids = list(run_ids)
    if kind == "compare" and len(run_ids) != 2:
        raise ReachError("plot compare needs two runs: RUN_A RUN_B (Δ = B − A)")
    if kind != "compare" and not run_ids:
        raise ReachError(f"plot {kind} needs a run")
    names = {"passk": ["passk"], "reach": ["passk", "summary"], "mlp-scan": ["mlp-scan"],
             "compare": ["passk", "compare"]}[kind]
    tables = {}
    for name in names:
        table = T.build_table(store, name, run_ids, allow_unmatched=allow_unmatched,
                              bootstrap=0 if name == "summary" else bootstrap, seed=seed)
        tables[name] = _only(table, probes)
    shown = Shown(kind, [T.run_info(store, r) for r in run_ids], tables)
    _check_not_empty(shown, probes)
    return shown


def _only(table, probes: Sequence[str]):
    """The table's rows of `probes` (all when none given); the summary's realized level comes with any."""
    if not probes or "probe" not in table.column_names:
        return table
    from dataclasses import replace

    i = table.column_names.index("probe")
    return replace(table, rows=[r for r in table.rows if r[i] in probes])


def _check_not_empty(shown: Shown, probes: Sequence[str]) -> None:
    runs = ", ".join(str(r["run"]) for r in shown.runs)
    asked = f" of probe {', '.join(probes)}" if probes else ""
    if shown.kind == "passk" and not [r for r in shown.tables["passk"].dicts() if r["estimator"] == "pass@k"]:
        raise ReachError(f"run {runs} has no pass@k curve{asked} (no sample attempts); `reachtui plot reach` draws "
                         "reachable@k of the route probes")
    if shown.kind in ("reach", "compare") and not shown.tables["passk"].rows:
        raise ReachError(f"run {runs} has no reachability attempts{asked}: no curve to draw")
    if shown.kind == "mlp-scan" and not shown.tables["mlp-scan"].rows:
        raise ReachError(f"run {runs} has no MLP scan (audit with --mlp-scan)")
    if shown.kind == "compare" and not shown.tables["compare"].rows:
        raise ReachError(f"runs {runs} have no compared probe{asked}")


# --------------------------------------------------------------------------------------------------
# Drawing
# --------------------------------------------------------------------------------------------------


def _tag(artist, **key) -> Any:
    """Mark what `artist` shows (read back by `plotted`); its SVG id says the same for people."""
    setattr(artist, KEY, key)
    artist.set_gid(re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(str(v) for v in key.values())))
    return artist


def _floats(values) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]


def _run_line(info: dict[str, Any]) -> str:
    return (f"run {info['run']}: {info['model']} on {info['task']}, protocol {info['protocol_hash']}"
            + ("" if info["status"] == "complete" else f" ({info['status']})"))


def _run_colour(shown: Shown, run_id: int) -> str:
    return f"C{[r['run'] for r in shown.runs].index(run_id) % 10}"


def _probe_colour(probe: str) -> str:
    return f"C{registry.get(probe).order % 10}" if probe in registry.BY_NAME else "C7"


def _curve(ax, rows: list[dict[str, Any]], *, colour: str, label: str, run: int, probe: str) -> None:
    """One budget curve of the passk table (value and control over k), each with its interval band."""
    ks = [r["k"] for r in rows]
    for column, style, alpha, name in (("value", "-", 0.18, label), ("control", ":", 0.08, f"{label}, control")):
        ys = _floats(r[column] for r in rows)
        if all(math.isnan(y) for y in ys):
            continue
        line, = ax.plot(ks, ys, style, color=colour, label=name, linewidth=1.4 if column == "value" else 1.0)
        _tag(line, table="passk", run=run, probe=probe, column=column)
        band = ax.fill_between(ks, _floats(r[f"{column}_lo"] for r in rows), _floats(r[f"{column}_hi"] for r in rows),
                               color=colour, alpha=alpha, linewidth=0)
        _tag(band, table="passk", run=run, probe=probe, column=f"{column}_lo,{column}_hi")


def _k_axis(ax, kmax: int, MaxNLocator) -> None:
    if kmax >= 16:
        ax.set_xscale("log", base=2)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("k (attempts)")


def _frac_axis(ax, PercentFormatter, label: str) -> None:
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel(label)
    ax.grid(alpha=0.3, linewidth=0.5)


def _legend(ax) -> None:
    """Below the panel, so that it never hides a curve; none for a panel without a curve (no probe in common:
    matplotlib would warn that it found nothing to label)."""
    if not ax.get_legend_handles_labels()[0]:
        return
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, fontsize=6.5, frameon=False)


def _curves_by(rows: list[dict[str, Any]]) -> dict[tuple[int, str], list[dict[str, Any]]]:
    out: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["run"], r["probe"]), []).append(r)
    return out


def _panels(fig, n: int, *, extra_row: bool = False):
    """n panels, at most 3 a row (and one across the figure below them): about 3.6 x 3.3 inches each."""
    cols = min(n, 3)
    rows = math.ceil(n / cols) + (1 if extra_row else 0)
    heights = [1.0] * (rows - 1) + [0.6 if extra_row else 1.0]
    fig.set_size_inches(max(3.6 * cols + 0.4, 5.2 if extra_row else 4.2), 3.3 * sum(heights) + 0.8)
    grid = fig.add_gridspec(rows, cols, height_ratios=heights)
    axes = [fig.add_subplot(grid[i // cols, i % cols]) for i in range(n)]
    return axes, (fig.add_subplot(grid[rows - 1, :]) if extra_row else None)


def _draw_passk(fig, shown: Shown, mpl) -> None:
    _m, _F, PercentFormatter, MaxNLocator = mpl
    rows = [r for r in shown.tables["passk"].dicts() if r["estimator"] == "pass@k"]
    probes = registry.ordered_names({r["probe"] for r in rows})
    axes, _ = _panels(fig, len(probes))
    curves = _curves_by(rows)
    for ax, probe in zip(axes, probes):
        for info in shown.runs:
            mine = curves.get((info["run"], probe))
            if mine:
                _curve(ax, mine, colour=_run_colour(shown, info["run"]), run=info["run"], probe=probe,
                       label=f"run {info['run']} ({info['model']})")
        ax.set_title(f"{probe}: pass@k (unbiased estimator)")
        _k_axis(ax, max(r["k"] for r in rows if r["probe"] == probe), MaxNLocator)
        _frac_axis(ax, PercentFormatter, "pass@k")
        _legend(ax)


def _draw_reach(fig, shown: Shown, mpl) -> None:
    _m, _F, PercentFormatter, MaxNLocator = mpl
    rows = shown.tables["passk"].dicts()
    curves = _curves_by(rows)
    realized = {r["run"]: r["realized"] for r in shown.tables["summary"].dicts()}
    axes, _ = _panels(fig, len(shown.runs))
    for ax, info in zip(axes, shown.runs):
        run = info["run"]
        mine = [p for (r, p) in curves if r == run]
        for probe in registry.ordered_names(mine):
            est = curves[(run, probe)][0]["estimator"]
            _curve(ax, curves[(run, probe)], colour=_probe_colour(probe), run=run, probe=probe,
                   label=f"{probe} ({est})")
        level = realized.get(run)
        if level is not None and not math.isnan(level):
            line = ax.axhline(level, color="black", linestyle="--", linewidth=0.9, label="realized (default decoding)")
            _tag(line, table="summary", run=run, probe=registry.REALIZED.name, column="realized")
        ax.set_title(f"run {run} ({info['model']}): reachable@k per probe")
        _k_axis(ax, max((r["k"] for r in rows if r["run"] == run), default=1), MaxNLocator)
        _frac_axis(ax, PercentFormatter, "reached by k attempts")
        _legend(ax)


def _draw_mlp(fig, shown: Shown, mpl) -> None:
    _m, _F, PercentFormatter, MaxNLocator = mpl
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in shown.tables["mlp-scan"].dicts():
        groups.setdefault((r["run"], r["set"]), []).append(r)
    axes, _ = _panels(fig, len(groups))
    for ax, ((run, name), rows) in zip(axes, groups.items()):
        layers = [r["layer"] for r in rows]
        for column, style, colour, label in (("repair_rate", "o-", "C2", "repair rate (on the failure set)"),
                                             ("break_rate", "s--", "C3", "break rate (on the realized set)")):
            line, = ax.plot(layers, _floats(r[column] for r in rows), style, color=colour, label=label,
                            markersize=3.5, linewidth=1.1)
            _tag(line, table="mlp-scan", run=run, set=name, column=column)
        best = next((r for r in rows if r["best"]), None)
        if best is not None:
            mark = ax.axvline(best["layer"], color="0.4", linestyle=":", linewidth=0.9,
                              label=f"most repairs: layer {best['layer']}")
            _tag(mark, table="mlp-scan", run=run, set=name, column="best")
        ax.set_title(f"run {run}: {name} (|F| = {rows[0]['failure_n']}, |R| = {rows[0]['realized_n']})")
        ax.set_xlabel("silenced MLP block (layer)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        _frac_axis(ax, PercentFormatter, "share of the set")
        _legend(ax)


def _draw_compare(fig, shown: Shown, mpl) -> None:
    _m, _F, PercentFormatter, MaxNLocator = mpl
    compared = shown.tables["compare"].dicts()
    probes = [r["probe"] for r in compared]
    curves = _curves_by(shown.tables["passk"].dicts())
    axes, delta = _panels(fig, len(probes), extra_row=True)
    a, b = shown.runs
    for ax, probe in zip(axes, probes):
        for info, name in ((a, "A"), (b, "B")):
            mine = curves.get((info["run"], probe))
            if mine:
                _curve(ax, mine, colour=_run_colour(shown, info["run"]), run=info["run"], probe=probe,
                       label=f"{name}: run {info['run']} ({info['model']})")
        est = (curves.get((a["run"], probe)) or curves.get((b["run"], probe)) or [{"estimator": ""}])[0]["estimator"]
        ax.set_title(f"{probe}: {est}")
        _k_axis(ax, max((r["k"] for (r_, p), rs in curves.items() if p == probe for r in rs), default=1), MaxNLocator)
        _frac_axis(ax, PercentFormatter, est)
        _legend(ax)
    # Δ panel: realized (one value) and each probe's reachable, with the paired-bootstrap interval
    labels = [registry.REALIZED.name] + [f"reachable {p}" for p in probes]
    points = [(0, compared[0], "realized_delta", None)] + [(i + 1, r, "reachable_delta", r["probe"])
                                                          for i, r in enumerate(compared)]
    for x, row, column, probe in points:
        y, lo, hi = (_floats([row[column], row[f"{column}_lo"], row[f"{column}_hi"]]))
        colour = "black" if probe is None else _probe_colour(probe)
        bars = delta.errorbar([x], [y], yerr=None if math.isnan(lo) else [[y - lo], [hi - y]], fmt="o",
                              color=colour, capsize=4, markersize=5)
        _tag(bars.lines[0], table="compare", probe=probe or registry.REALIZED.name, column=column)
        if bars.lines[2]:
            _tag(bars.lines[2][0], table="compare", probe=probe or registry.REALIZED.name,
                 column=f"{column}_lo,{column}_hi")
    delta.axhline(0, color="0.5", linewidth=0.8)
    delta.set_xticks(range(len(labels)), labels)
    delta.set_xlim(-0.5, len(labels) - 0.5)
    delta.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    delta.set_ylabel("Δ = B − A")
    delta.set_title(f"Δ = B − A on the {compared[0]['n']} questions of both runs (95% paired bootstrap)")
    delta.grid(alpha=0.3, linewidth=0.5, axis="y")


def _footer(fig, lines: list[str], colour: str) -> None:
    """Notes under the panels, wrapped to the figure's width, in a strip the layout keeps free."""
    width, height = fig.get_size_inches()
    wrapped = [w for line in lines for w in textwrap.wrap(line, width=int(width * 19))]
    strip = (len(wrapped) * 6 * 1.35 + 6) / 72 / height          # 6 pt lines, as a share of the height
    fig.get_layout_engine().set(rect=(0, strip, 1, 1 - strip))
    fig.text(0.01, 0.004, "\n".join(wrapped), fontsize=6, va="bottom", ha="left", color=colour)


_DRAW = {"passk": _draw_passk, "reach": _draw_reach, "mlp-scan": _draw_mlp, "compare": _draw_compare}
_TITLES = {"passk": "Pass@k beside its chance control", "reach": "Reachable@k per probe, beside chance",
           "mlp-scan": "MLP silencing scan: repair and break rates per block",
           "compare": "Two runs compared: A, B and Δ = B − A"}


def draw(shown: Shown):
    """The matplotlib Figure of `shown` (not attached to any display)."""
    mpl = _mpl()
    matplotlib, Figure, _P, _M = mpl
    with matplotlib.rc_context(RC):
        fig = Figure(layout="constrained")
        _DRAW[shown.kind](fig, shown, mpl)
        fig.suptitle(f"{_TITLES[shown.kind]} (reachtui plot {shown.kind})\n" + "\n".join(_run_line(r) for r in shown.runs),
                     fontsize=8)
        warnings = [w for t in shown.tables.values() for w in t.warnings]
        foot = (["WARNING: " + w for w in dict.fromkeys(warnings)]
                + ([LEGEND_NOTE] if shown.kind != "mlp-scan" else []))
        if foot:
            _footer(fig, foot, "red" if warnings else "0.3")
    fig.reachtui_shown = shown
    return fig


# --------------------------------------------------------------------------------------------------
# Reading the numbers back from the artists, and saving them with the file
# --------------------------------------------------------------------------------------------------


def _json_number(v: float) -> float | None:
    return None if math.isnan(v) else float(v)


def _band(collection) -> tuple[list[float], list[float], list[float]]:
    """x, lo, hi of a shaded band (`fill_between`) or an error bar (`LineCollection`), from its vertices:
    at each x the lowest and the highest y."""
    at: dict[float, list[float]] = {}
    paths = [p.vertices for p in collection.get_paths()] if hasattr(collection, "get_paths") else []
    if not paths and hasattr(collection, "get_segments"):
        paths = collection.get_segments()
    for vertices in paths:
        for x, y in vertices:
            if not (math.isnan(x) or math.isnan(y)):
                at.setdefault(float(x), []).append(float(y))
    xs = sorted(at)
    return xs, [min(at[x]) for x in xs], [max(at[x]) for x in xs]


def plotted(fig) -> dict[str, Any]:
    """Every tagged series of the figure, read from its artists: lines as x and y, bands and error bars as
    x, lo and hi (y and bounds in 0..1 as exported; None where the table has no value)."""
    series = []
    for ax in fig.axes:
        for line in ax.lines:
            key = getattr(line, KEY, None)
            if key is None:
                continue
            xs, ys = line.get_xdata(), line.get_ydata()
            if key.get("column") in ("realized", "best"):      # a level or a marked block: one number
                value = ys[0] if key["column"] == "realized" else xs[0]
                series.append({**key, "value": _json_number(float(value))})
                continue
            series.append({**key, "x": [float(x) for x in xs], "y": [_json_number(float(y)) for y in ys]})
        for collection in ax.collections:
            key = getattr(collection, KEY, None)
            if key is None:
                continue
            xs, lo, hi = _band(collection)
            series.append({**key, "x": xs, "lo": lo, "hi": hi})
    shown = getattr(fig, "reachtui_shown", None)
    title = fig.get_suptitle()
    return {"reachtui": __version__, "figure": shown.kind if shown else None,
            "runs": [{k: r[k] for k in ("run", "model", "task", "protocol_hash", "status")} for r in shown.runs]
            if shown else [], "title": title, "series": series}


def render(fig, fmt: str, *, dpi: int = 300) -> bytes:
    """The figure as a PDF, PNG or SVG file's bytes, with `plotted(fig)` as JSON inside (see the module
    docstring) and its title as the document title."""
    matplotlib, _F, _P, _M = _mpl()
    if fmt not in FIGURE_FORMATS:
        raise ReachError(f"unknown figure format {fmt!r}; choose one of {', '.join(FIGURE_FORMATS)}")
    data = plotted(fig)
    text = json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    title = " · ".join(line for line in data["title"].splitlines() if line)
    creator = f"reachtui {__version__} (matplotlib {matplotlib.__version__})"
    metadata = {
        "pdf": {"Title": title, "Subject": text, "Creator": creator, "CreationDate": None},
        "svg": {"Title": title, "Description": text, "Creator": creator, "Date": None},
        "png": {"Title": title, PNG_DATA: text, "Software": creator},
    }[fmt]
    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=metadata)
    return buf.getvalue()
