"""A drawn figure as a file: PDF, PNG or SVG bytes that carry, besides the drawing, what a reader of the file
needs and the figure itself leaves out:

    the plotted numbers   read back from the artists (`plotted`), as JSON: the PDF's Subject, the SVG's
                          dc:description, the PNG's `reachtui:data` text chunk
    the provenance        run ids, models, tasks, protocol hashes and reachtui's version (`provenance`): the
                          PDF's Keywords, the SVG's dc:subject (keywords) in its <metadata>, the PNG's
                          `reachtui:provenance` text chunk; the JSON holds the same runs
    the title             --title, or what the figure shows: the document title

Files are byte-stable: no dates, fixed SVG ids; text stays text in PDF and SVG.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

from reachtui import __version__
from reachtui.errors import ReachError
from reachtui.reports.plots.draw import KEY, need_matplotlib, rc_context

FIGURE_FORMATS = ("pdf", "png", "svg")
#: The PNG text chunks that carry the plotted data and the provenance.
PNG_DATA = "reachtui:data"
PNG_PROVENANCE = "reachtui:provenance"
#: What each figure shows, as the file's document title when no --title is given.
NAMES = {"reach": "Reachable@k per probe against realized, beside the chance control",
         "blind": "Random routes vs MCTS at matched budgets: the answer-blind pick and retained",
         "mlp-scan": "MLP silencing scan: repair and break rates per block",
         "compare": "Matched comparison: realized and reachable in A and B, and the paired difference",
         "passk": "pass@k beside its chance control"}


def _json_number(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _band(collection) -> tuple[list[float], list[float], list[float]]:
    """x, lo, hi of a band (`fill_between`, `axhspan`) or of error bars (`LineCollection`), from its
    vertices: at each x the lowest and the highest y."""
    at: dict[float, list[float]] = {}
    paths = [p.vertices for p in collection.get_paths()] if hasattr(collection, "get_paths") else []
    if hasattr(collection, "get_segments"):
        paths = collection.get_segments()
    for vertices in paths:
        for x, y in vertices:
            if not (math.isnan(x) or math.isnan(y)):
                at.setdefault(float(x), []).append(float(y))
    xs = sorted(at)
    return xs, [min(at[x]) for x in xs], [max(at[x]) for x in xs]


def _one_value(artist, key: dict[str, Any]) -> float | None:
    """The number a level (axhline) or a marked block (axvline) shows."""
    xs, ys = artist.get_xdata(), artist.get_ydata()
    return _json_number(float(xs[0] if key["column"] == "best" else ys[0]))


def plotted(fig) -> dict[str, Any]:
    """Every tagged series of the figure, read from its artists: lines as x and y, bands and error bars as
    x, lo and hi, levels and marks as one value, texts (retained) as the numbers they print (shares in 0..1
    as exported; None where the table has none); with the runs, the figure kind, its title and reachtui's
    version."""
    series = []
    for ax in fig.axes:
        for line in ax.lines:
            key = getattr(line, KEY, None)
            if key is None:
                continue
            if key["column"] in ("realized", "best"):
                series.append({**key, "value": _one_value(line, key)})
                continue
            series.append({**key, "x": [float(x) for x in line.get_xdata()],
                           "y": [_json_number(float(y)) for y in line.get_ydata()]})
        for collection in ax.collections:
            key = getattr(collection, KEY, None)
            if key is None:
                continue
            xs, lo, hi = _band(collection)
            if key["column"] == "realized_lo,realized_hi":     # a band across the panel: one interval
                series.append({**key, "lo": lo[0], "hi": hi[0]})
                continue
            series.append({**key, "x": xs, "lo": lo, "hi": hi})
        for text in ax.texts:
            key = getattr(text, KEY, None)
            if key is not None:
                series.append({**key, **{k: _json_number(v) for k, v in text.reachtui_value.items()}})
    shown = fig.reachtui_shown
    return {"reachtui": __version__, "figure": shown.kind, "runs": runs_of(shown),
            "title": fig.get_suptitle(), "series": series}


def runs_of(shown) -> list[dict[str, Any]]:
    return [{k: r[k] for k in ("run", "model", "task", "protocol_hash", "status")} for r in shown.runs]


def provenance(shown) -> list[str]:
    """Where the figure's numbers come from, one line each: reachtui's version, then each run."""
    return [f"reachtui {__version__}"] + [
        f"run {r['run']}: {r['model']} on {r['task']}, protocol {r['protocol_hash']}"
        + ("" if r["status"] == "complete" else f" ({r['status']})") for r in shown.runs]


def document_title(fig) -> str:
    return fig.get_suptitle().replace("\n", " ") or NAMES[fig.reachtui_shown.kind]


def render(fig, fmt: str, *, dpi: int = 300) -> bytes:
    """The figure as a PDF, PNG or SVG file's bytes, with its data, provenance and title inside."""
    matplotlib, _Figure = need_matplotlib()
    if fmt not in FIGURE_FORMATS:
        raise ReachError(f"unknown figure format {fmt!r}; choose one of {', '.join(FIGURE_FORMATS)}")
    data = json.dumps(plotted(fig), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    lines = provenance(fig.reachtui_shown)
    title = document_title(fig)
    creator = f"reachtui {__version__} (matplotlib {matplotlib.__version__})"
    metadata = {
        "pdf": {"Title": title, "Subject": data, "Keywords": "; ".join(lines), "Creator": creator,
                "CreationDate": None},
        "svg": {"Title": title, "Description": data, "Keywords": lines, "Creator": creator, "Date": None},
        "png": {"Title": title, PNG_DATA: data, PNG_PROVENANCE: "\n".join(lines), "Software": creator},
    }[fmt]
    buf = io.BytesIO()
    with rc_context(matplotlib, fig.reachtui_style):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=metadata)
    return buf.getvalue()

