"""`reachtui plot reach|blind|mlp-scan|compare|passk|all`: figures a paper can take as they are.

- The numbers: read back from the figure's artists (matplotlib's own line data, band and error-bar vertices)
  and from the files (PDF read by pypdf, PNG by Pillow, SVG by an XML parser), never from pixels, and
  compared with `reachtui export ... --json` run through the CLI.
- The page: every text item of the PDF and SVG files (positions and sizes as the files write them, widths
  measured in the font the file names) lies inside the page, at 7 pt or more, at column and page width.
- The look: series in a panel differ by line style, marker or fill, not by colour alone (a greyscale print);
  bands are hatched, never filled over each other; a series at 0 sits above the axis; k ticks are integers,
  differences are in percentage points, n is on the figure.
- The provenance: in the file's metadata, not on the figure."""

from __future__ import annotations

import json
import math
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")

from conftest import libraries_loaded_by, run_main  # noqa: E402
from outputs_fixtures import audit, export_json  # noqa: E402, F401 (audit: the store fixture)
from reachtui import __version__, stats  # noqa: E402
from reachtui.cli import cli  # noqa: E402

FORMATS = ("pdf", "png", "svg")
KINDS = ("reach", "blind", "mlp-scan", "compare", "passk")
SVG = "{http://www.w3.org/2000/svg}"
DC = "{http://purl.org/dc/elements/1.1/}"
RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"


def plot(store, *args):
    return CliRunner().invoke(cli, ["plot", *args, "--store", str(store)])


def runs_of(kind: str, a: int, b: int) -> list[str]:
    return [str(a), str(b)] if kind in ("passk", "compare") else [str(a)]


# --------------------------------------------------------------------------------------------------
# Reading a figure file back
# --------------------------------------------------------------------------------------------------


def embedded(path) -> dict:
    """The JSON a figure file carries, read with each format's own reader."""
    if path.suffix == ".pdf":
        from pypdf import PdfReader

        return json.loads(PdfReader(path).metadata.subject)
    if path.suffix == ".png":
        from PIL import Image

        with Image.open(path) as im:
            return json.loads(im.text["reachtui:data"])
    return json.loads(ET.parse(path).find(f".//{DC}description").text)


def metadata(path) -> tuple[str, list[str]]:
    """(the document title, the provenance lines) of a figure file."""
    if path.suffix == ".pdf":
        from pypdf import PdfReader

        meta = PdfReader(path).metadata
        return meta.title, meta["/Keywords"].split("; ")
    if path.suffix == ".png":
        from PIL import Image

        with Image.open(path) as im:
            return im.text["Title"], im.text["reachtui:provenance"].split("\n")
    tree = ET.parse(path)
    return (tree.find(f".//{DC}title").text,
            [li.text for li in tree.find(f".//{DC}subject").iter(f"{RDF}li")])


def _width(text: str, size: float) -> float:
    """The advance width of `text` in DejaVu Sans (the font the files name) at `size` points."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    return TextToPath().get_text_width_height_descent(text, FontProperties(family="DejaVu Sans", size=size),
                                                      ismath=False)[0]


def _corners(x, y, direction, up, start, length, size):
    """The corners of a text's box: from `start` to `start + length` along `direction` (points), from a
    descent of 0.3 em below the baseline to 1 em above it (a generous line box)."""
    return [(x + u * direction[0] + v * up[0], y + u * direction[1] + v * up[1])
            for u in (start, start + length) for v in (-0.3 * size, size)]


def pdf_texts(path) -> tuple[tuple[float, float], list[dict]]:
    """The page size and each text item of a PDF: its string, size in points and box corners (pypdf gives
    each text run's matrix, font and size)."""
    from pypdf import PdfReader

    page = PdfReader(path).pages[0]
    items = []

    def visit(text, cm, tm, font, size):
        if not text.strip():
            return
        # the run's position and axes: the text matrix, then the page's (cm)
        a, b, c, d, e, f = tm
        A, B, C, D, E, F = cm
        m = (a * A + b * C, a * B + b * D, c * A + d * C, c * B + d * D, e * A + f * C + E, e * B + f * D + F)
        scale = math.hypot(m[0], m[1])
        pt = size * scale
        direction, up = (m[0] / scale, m[1] / scale), (m[2] / scale, m[3] / scale)
        items.append({"text": text, "size": pt,
                      "corners": _corners(m[4], m[5], direction, up, 0.0, _width(text, pt), pt)})

    page.extract_text(visitor_text=visit)
    return (float(page.mediabox.width), float(page.mediabox.height)), items


def svg_texts(path) -> tuple[tuple[float, float], list[dict]]:
    """The page size and each text item of an SVG (y downwards): string, size, box corners."""
    root = ET.parse(path).getroot()
    size = (float(root.get("width").removesuffix("pt")), float(root.get("height").removesuffix("pt")))
    items = []
    for t in root.iter(f"{SVG}text"):
        if not (t.text or "").strip():
            continue
        style = dict(p.strip().split(": ", 1) for p in t.get("style").split(";") if ": " in p)
        pt = float(re.search(r"([\d.]+)px", style.get("font-size") or style["font"]).group(1))   # 3.8: font: 7px ...
        transform = t.get("transform", "")
        if t.get("x") is not None:
            x, y = float(t.get("x")), float(t.get("y"))
        else:
            x, y = map(float, re.search(r"translate\(([-\d.e]+) ([-\d.e]+)\)", transform).groups())
        angle = re.search(r"rotate\(([-\d.e]+)", transform)
        theta = math.radians(float(angle.group(1))) if angle else 0.0
        direction, up = (math.cos(theta), math.sin(theta)), (math.sin(theta), -math.cos(theta))
        w = _width(t.text, pt)
        start = {"start": 0.0, "middle": -w / 2, "end": -w}[style.get("text-anchor", "start")]
        items.append({"text": t.text, "size": pt, "corners": _corners(x, y, direction, up, start, w, pt)})
    return size, items


def file_text(path) -> str:
    """The words a figure shows (its text is text in PDF and SVG: pdf.fonttype 42, svg.fonttype none)."""
    reader = pdf_texts if path.suffix == ".pdf" else svg_texts
    return " ".join(item["text"] for item in reader(path)[1])


# --------------------------------------------------------------------------------------------------
# What each figure must show, from `reachtui export --json`
# --------------------------------------------------------------------------------------------------


def _key(s: dict) -> tuple:
    return (s["table"], s.get("run"), s.get("probe", s.get("set")), s["column"])


def _none(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def curve_series(rows: list[dict], probes=None) -> dict[tuple, dict]:
    """What a figure must draw for passk rows: each curve's value and control over k, and their bands."""
    out: dict[tuple, dict] = {}
    groups: dict[tuple, list] = {}
    for r in rows:
        if probes is None or r["probe"] in probes:
            groups.setdefault((r["run"], r["probe"]), []).append(r)
    for (run, probe), rs in groups.items():
        for col in ("value", "control"):
            ys = [_none(r[col]) for r in rs]
            if all(y is None for y in ys):
                continue
            out[("passk", run, probe, col)] = {"x": [float(r["k"]) for r in rs], "y": ys}
            ok = [r for r in rs if r[f"{col}_lo"] is not None and r[f"{col}_hi"] is not None]
            out[("passk", run, probe, f"{col}_lo,{col}_hi")] = {
                "x": [float(r["k"]) for r in ok], "lo": [r[f"{col}_lo"] for r in ok], "hi": [r[f"{col}_hi"] for r in ok]}
    return out


def realized_series(summary: list[dict], run: int) -> dict[tuple, dict]:
    row = summary[0]
    return {("summary", run, "realized", "realized"): {"value": row["realized"]},
            ("summary", run, "realized", "realized_lo,realized_hi"): {"lo": row["realized_lo"],
                                                                       "hi": row["realized_hi"]}}


def expected(kind: str, store, a: int, b: int) -> dict[tuple, dict]:
    """The series of figure `kind` for run a (and b for passk and compare), from `reachtui export --json`."""
    if kind == "passk":
        return curve_series([r for r in export_json(store, "passk", a, b) if r["estimator"] == "pass@k"])
    if kind == "reach":
        return {**curve_series(export_json(store, "passk", a)),
                **realized_series(export_json(store, "summary", a), a)}
    if kind == "blind":
        summary = export_json(store, "summary", a)
        routed = [r for r in summary if r["probe"] in ("routes", "mcts")]
        out = {**curve_series(export_json(store, "passk", a), probes={"routes", "mcts"}),
               **realized_series(summary, a)}
        for x, r in enumerate(routed):
            p = r["probe"]
            out[("summary", a, p, "reachable")] = {"x": [float(x)], "y": [r["reachable"]]}
            out[("summary", a, p, "reachable_lo,reachable_hi")] = {"x": [float(x)], "lo": [r["reachable_lo"]],
                                                                     "hi": [r["reachable_hi"]]}
            out[("summary", a, p, "blind_vote")] = {"x": [float(x)], "y": [r["blind_vote"]]}
            out[("summary", a, p, "retained")] = {c: r[c] for c in ("retained", "retained_lo", "retained_hi")}
        return out
    if kind == "mlp-scan":
        rows = export_json(store, "mlp-scan", a)
        out = {}
        for name in dict.fromkeys(r["set"] for r in rows):
            mine = [r for r in rows if r["set"] == name]
            xs = [float(r["layer"]) for r in mine]
            for col, count, of in (("repair_rate", "repaired", "failure_n"), ("break_rate", "broken", "realized_n")):
                out[("mlp-scan", a, name, col)] = {"x": xs, "y": [r[col] for r in mine]}
                bounds = [stats.wilson(r[count], r[of]) for r in mine]     # the table's counts, Wilson
                out[("mlp-scan", a, name, f"{col}_lo,{col}_hi")] = {"x": xs, "lo": [lo for lo, _ in bounds],
                                                                     "hi": [hi for _, hi in bounds]}
            best = next(r for r in mine if r["best"])
            if best["repaired"]:
                out[("mlp-scan", a, name, "best")] = {"value": float(best["layer"])}
        return out
    compared = export_json(store, "compare", a, b)
    points = [(0, compared[0], "realized", "realized")] + [
        (i + 1, r, "reachable", r["probe"]) for i, r in enumerate(compared)]
    out = {}
    for x, row, measure, probe in points:
        for side in ("a", "b"):
            out[("compare", None, probe, f"{measure}_{side}")] = {"x": [float(x)], "y": [row[f"{measure}_{side}"]]}
        col = f"{measure}_delta"
        out[("compare", None, probe, col)] = {"x": [float(x)], "y": [row[col]]}
        out[("compare", None, probe, f"{col}_lo,{col}_hi")] = {"x": [float(x)], "lo": [row[f"{col}_lo"]],
                                                               "hi": [row[f"{col}_hi"]]}
    return out


def assert_same_numbers(data: dict, want: dict[tuple, dict]) -> None:
    got = {_key(s): {k: v for k, v in s.items() if k in ("x", "y", "lo", "hi", "value", "retained", "retained_lo",
                                                          "retained_hi")} for s in data["series"]}
    assert set(got) == set(want), (sorted(set(got) ^ set(want), key=str))
    for key, series in want.items():
        assert got[key] == series, key


# --------------------------------------------------------------------------------------------------
# The numbers and the provenance
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_each_figure_file_carries_the_exports_numbers_and_its_provenance(audit, kind):
    root, store, a, b = audit
    want = expected(kind, store, a, b)
    runs = runs_of(kind, a, b)
    summary = {r["run"]: r for r in export_json(store, "summary", a, b)}
    for fmt in FORMATS:
        out = root / f"{kind}.{fmt}"
        res = plot(store, kind, *runs, "-o", str(out), *(["--dpi", "72"] if fmt == "png" else []))
        assert res.exit_code == 0, res.output
        assert res.stdout == ""
        data = embedded(out)
        assert data["figure"] == kind and [r["run"] for r in data["runs"]] == [int(r) for r in runs]
        assert data["reachtui"] == __version__ and data["title"] == ""
        assert_same_numbers(data, want)
        # the provenance is in the file's metadata: version, run ids, models, task, protocol hashes
        title, lines = metadata(out)
        assert lines[0] == f"reachtui {__version__}"
        assert lines[1:] == [f"run {r}: {summary[int(r)]['model']} on t, protocol {summary[int(r)]['protocol_hash']}"
                             for r in runs]
        assert title and "run" not in title
        if fmt != "png":      # ... and not on the figure
            words = file_text(out)
            assert summary[a]["protocol_hash"] not in words and "reachtui" not in words and "protocol" not in words
            assert f"run {a}" not in words


def test_the_figure_objects_artists_hold_the_exports_numbers(audit):
    """Read matplotlib's own artists (not reachtui's read-back): the pass@k curve, its control and the hatched
    interval of run A, and the MLP scan's repair rates."""
    from reachtui.reports import plots
    from reachtui.store import Store

    _root, store, a, _b = audit
    with Store(store, readonly=True) as s:
        fig = plots.draw(plots.figure_tables(s, "passk", [a]))
        mlp = plots.draw(plots.figure_tables(s, "mlp-scan", [a]))
    rows = [r for r in export_json(store, "passk", a) if r["probe"] == "sample"]
    ax = fig.axes[0]
    value, control = ax.lines[0], ax.lines[1]
    assert list(value.get_ydata()) == [r["value"] for r in rows]
    assert list(value.get_xdata()) == [r["k"] for r in rows]
    assert list(control.get_ydata()) == [r["control"] for r in rows]
    band = ax.collections[0].get_paths()[0].vertices
    for r in rows:
        at = sorted(y for x, y in band if x == r["k"])
        assert (at[0], at[-1]) == (r["value_lo"], r["value_hi"])
    scan = export_json(store, "mlp-scan", a)
    repair = mlp.axes[0].lines[0]
    assert list(repair.get_ydata()) == [r["repair_rate"] for r in scan]
    assert list(repair.get_xdata()) == [r["layer"] for r in scan]


def test_title_and_caption(audit):
    """No title unless --title; --caption prints a LaTeX caption that says n, K, the probes and the intervals."""
    root, store, a, b = audit
    out = root / "titled.svg"
    res = plot(store, "reach", str(a), "-o", str(out), "--title", "Reach of the base model", "--caption")
    assert res.exit_code == 0, res.output
    assert "Reach of the base model" in file_text(out) and metadata(out)[0] == "Reach of the base model"
    assert embedded(out)["title"] == "Reach of the base model"
    lines = res.stdout.splitlines()
    assert all(0 < len(line) <= 100 for line in lines)     # no blank line (it would end the caption)
    caption = " ".join(lines)
    assert caption.startswith(r"\caption{") and caption.endswith("}") and caption.count("{") == caption.count("}")
    for part in ("base on t (run 1, $n = 10$)", "sample (pass@k, $K = 6$)", "routes (reachable@k, $K = 6$)",
                 "mcts (reachable@k, $K = 4$)", r"95\% Wilson intervals", "chance control", "realized"):
        assert part in caption, part
    res = plot(store, "compare", str(a), str(b), "-o", str(root / "c.pdf"), "--caption")
    caption = " ".join(res.stdout.splitlines())
    assert r"$n = 10$ questions both runs have, under one protocol (sample $K = 6$, routes $K = 6$, mcts $K = 4$)" \
        in caption and r"95\% paired-bootstrap interval" in caption and "(1000 replicates, seed 0)" in caption


def test_captions_escape_what_the_store_names(audit):
    from reachtui.reports import plots
    from reachtui.store import Store

    _root, store, a, _b = audit
    with Store(store, readonly=True) as s:
        shown = plots.figure_tables(s, "mlp-scan", [a])
    shown.runs = [dict(shown.runs[0], model="my_model&co", task="50%_set")]
    text = " ".join(plots.caption(shown).splitlines())
    assert r"my\_model\&co on 50\%\_set" in text and "failure:sample" in text and "(layer 3)" in text


# --------------------------------------------------------------------------------------------------
# The page: sizes, fonts, every text inside
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shown_figures(audit):
    """The tables of every figure kind (runs A, B for passk and compare; A for the others)."""
    from reachtui.reports import plots
    from reachtui.store import Store

    _root, store, a, b = audit
    with Store(store, readonly=True) as s:
        return {k: plots.figure_tables(s, k, [int(r) for r in runs_of(k, a, b)]) for k in KINDS}


@pytest.mark.parametrize("width, inches", [("column", 3.25), ("page", 6.75)])
@pytest.mark.parametrize("kind", KINDS)
def test_every_text_lies_inside_the_page_at_7_pt_or_more(shown_figures, tmp_path, kind, width, inches):
    from reachtui.reports import plots

    shown = shown_figures[kind]
    if kind == "compare":       # a warning under the figure too: the longest text a figure holds
        shown = replace(shown, tables={"compare": replace(shown.tables["compare"], warnings=[
            "UNMATCHED PROTOCOLS: runs 1 and 2 have different default deployments (template differs); "
            "differences may come from the protocol, not the model"])})
    fig = plots.draw(shown, width=plots.parse_width(width),
                     title="A long title that a paper would rather put in its caption, wrapped to the width")
    for fmt, reader, y_down in (("pdf", pdf_texts, False), ("svg", svg_texts, True)):
        path = tmp_path / f"{kind}.{fmt}"
        path.write_bytes(plots.render(fig, fmt))
        (page_w, page_h), items = reader(path)
        assert page_w == pytest.approx(inches * 72, abs=0.01)
        assert len(items) > 10
        for item in items:
            assert item["size"] >= plots.MIN_FONT - 1e-6, (fmt, item["text"], item["size"])
            for x, y in item["corners"]:
                assert -0.5 <= x <= page_w + 0.5 and -0.5 <= y <= page_h + 0.5, (fmt, item["text"], x, y)
        words = " ".join(i["text"] for i in items)
        assert "WARNING" in words or kind != "compare"


def test_width_and_its_refusals(audit):
    from pypdf import PdfReader

    root, store, a, _b = audit
    for width, points in (("page", 486.0), ("4.5", 324.0), ("5in", 360.0)):
        out = root / f"w{width}.pdf"
        assert plot(store, "reach", str(a), "-o", str(out), "--width", width).exit_code == 0
        assert float(PdfReader(out).pages[0].mediabox.width) == pytest.approx(points)
    for width, says in (("wide", "column (3.25 in), page (6.75 in) or a width in inches"),
                        ("0.5", "a figure is 2 to 12 inches wide"), ("nan", "2 to 12 inches")):
        code, _out, err = run_main(["plot", "reach", str(a), "-o", str(root / "w.pdf"), "--width", width,
                                    "--store", str(store)])
        assert code == 2 and err.count("\n") == 1 and says in err, err


# --------------------------------------------------------------------------------------------------
# The look: greyscale, bands, zero, units and ticks, marks
# --------------------------------------------------------------------------------------------------


def _glyph(line) -> tuple:
    """How a line looks without colour: its line style (dashes included), marker, and whether the marker is
    hollow."""
    dashes = tuple(line._unscaled_dash_pattern[1] or ()) if line.get_linestyle() not in ("None", "") else None
    face = line.get_markerfacecolor()
    return (line.get_linestyle(), dashes, line.get_marker(), face in ("white", "w", "#ffffff", (1, 1, 1, 1)))


def _meaning(key: dict) -> tuple:
    """What a drawn artist shows, across the categories of a panel: a point per probe of the blind pick is
    one series (the pick), so is run A's point per measure in compare; a curve is its run, probe and column."""
    if key["table"] == "compare":
        return (key["column"].rsplit("_", 1)[-1],)                 # a, b or delta
    if key["table"] == "summary" and key["column"] != "reachable":
        return (key["column"],)
    return (key.get("run"), key.get("probe", key.get("set")), key["column"])


@pytest.mark.parametrize("kind", KINDS)
def test_in_greyscale_every_series_of_a_panel_looks_different(shown_figures, kind):
    """Series of one panel never differ by colour alone, and neither do the legend's entries; bands are
    hatched (no fill that would hide another), only the realized interval is a plain grey band."""
    from matplotlib.colors import to_rgba

    from reachtui.reports import plots

    fig = plots.draw(shown_figures[kind])
    for ax in fig.axes:
        lines = [ln for ln in ax.lines if getattr(ln, plots.KEY, None) and ln.get_marker() not in ("", "None", None)
                 or getattr(ln, plots.KEY, {}).get("column") in ("realized", "best")]
        meanings: dict[tuple, set] = {}
        for ln in lines:
            meanings.setdefault(_glyph(ln), set()).add(_meaning(ln.reachtui_key))
        assert all(len(m) == 1 for m in meanings.values()), meanings     # one look, one thing shown
        bands = [c for c in ax.collections if getattr(c, plots.KEY, None)
                 and "," in c.reachtui_key["column"] and c.get_paths() and len(c.get_paths()[0].vertices) > 2]
        for band in bands:
            if band.reachtui_key["column"] == "realized_lo,realized_hi":
                continue
            face = band.get_facecolor()            # "none": no colours, or a transparent one
            assert band.get_hatch() and (len(face) == 0 or to_rgba(face[0])[3] == 0), band.reachtui_key
        values = [b.get_hatch() for b in bands if b.reachtui_key["column"] == "value_lo,value_hi"]
        assert len(set(values)) == len(values), values
    legend = fig.legends[0]
    entries = [_glyph(h) for h in legend.legend_handles if hasattr(h, "get_marker")]
    assert len(set(entries)) == len(entries), entries


def test_the_greyscale_render_keeps_the_curves_apart(audit, tmp_path):
    """Pixels too: in the greyscale PNG, the sample and routes curves of run A (blue and vermillion, close in
    grey) are drawn with other pixels along their paths: a dash gap or another marker in each."""
    from PIL import Image

    from reachtui.reports import plots
    from reachtui.store import Store

    _root, store, a, _b = audit
    with Store(store, readonly=True) as s:
        fig = plots.draw(plots.figure_tables(s, "reach", [a], probes=["sample", "routes"]))
    path = tmp_path / "grey.png"
    path.write_bytes(plots.render(fig, "png", dpi=200))
    ax = fig.axes[0]
    lines = {ln.reachtui_key["probe"]: ln for ln in ax.lines if ln.reachtui_key["column"] == "value"}
    with Image.open(path) as im:
        grey = im.convert("L")
        height = grey.height

        def profile(line):
            """Grey levels every 2 px along the line's path (display coordinates at 200 dpi)."""
            pts = ax.transData.transform(list(zip(line.get_xdata(), line.get_ydata())))
            out = []
            for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
                steps = max(2, int(math.hypot(x1 - x0, y1 - y0) * 2 / fig.dpi * 200 / 2))
                for i in range(steps):
                    x = x0 + (x1 - x0) * i / steps
                    y = y0 + (y1 - y0) * i / steps
                    out.append(grey.getpixel((int(x * 200 / fig.dpi), height - 1 - int(y * 200 / fig.dpi))))
            return out

        solid, dashed = profile(lines["sample"]), profile(lines["routes"])
    # a solid line is dark all along; a dashed one has gaps (light pixels) between its dashes
    assert sum(p > 200 for p in solid) / len(solid) < 0.1
    assert sum(p > 200 for p in dashed) / len(dashed) > 0.15


def test_a_series_at_zero_sits_above_the_axis_and_units_are_said(shown_figures):
    from reachtui.reports import plots

    for kind in KINDS:
        fig = plots.draw(shown_figures[kind])
        for ax in fig.axes:
            low = ax.get_ylim()[0]
            above = ax.transData.transform((0, 0))[1] - ax.transData.transform((0, low))[1]
            assert low < 0 and above * 72 / fig.dpi >= 4, (kind, low)     # 0 is 4 pt or more above the axis
    fig = plots.draw(shown_figures["reach"])
    ax = fig.axes[0]
    assert ax.get_ylabel() == "reached within k (% of 10)"                 # n on the figure
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4", "5", "6"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0%", "25%", "50%", "75%", "100%"]
    compare = plots.draw(shown_figures["compare"])
    levels, delta = compare.axes
    assert levels.get_ylabel() == "% of n = 10" and delta.get_ylabel() == "Δ = B − A (pp)"
    compare.canvas.draw()
    ticks = [t.get_text() for t in delta.get_yticklabels()]
    assert "0" in ticks and any(t.startswith("+") for t in ticks) and all("%" not in t for t in ticks)
    assert [t.get_text() for t in delta.get_xticklabels()] == ["realized", "reachable\nsample", "reachable\nroutes",
                                                               "reachable\nmcts"]
    legend = [t.get_text() for t in plots.draw(shown_figures["passk"]).legends[0].get_texts()]
    assert legend[:2] == ["base (n = 10)", "tuned (n = 10)"]


@pytest.mark.parametrize("kmax, ticks", [(6, ["1", "2", "3", "4", "5", "6"]), (16, ["1", "2", "4", "8", "16"]),
                                         (20, ["1", "2", "4", "8", "16", "20"]), (33, ["1", "2", "4", "8", "16", "33"]),
                                         (64, ["1", "2", "4", "8", "16", "32", "64"])])
def test_k_ticks_are_integers(kmax, ticks):
    from matplotlib.figure import Figure

    from reachtui.reports.plots import look

    fig = Figure()
    ax = fig.add_subplot()
    ax.plot(range(1, kmax + 1), [0.5] * kmax)
    look.k_axis(ax, kmax)
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ticks


def test_glyphs_keep_one_meaning(shown_figures):
    """Run B in compare is a filled diamond on no line; the chance control is a hollow marker on a dotted
    line: never the same glyph."""
    from reachtui.reports import plots

    compare = plots.draw(shown_figures["compare"])
    b = next(ln for ln in compare.axes[0].lines if ln.reachtui_key["column"].endswith("_b"))
    reach = plots.draw(shown_figures["reach"])
    controls = [ln for ln in reach.axes[0].lines if ln.reachtui_key["column"] == "control"]
    assert controls and all(_glyph(c)[3] and c.get_linestyle() == ":" for c in controls)
    assert not _glyph(b)[3] and b.get_linestyle() in ("None", "") and b.get_marker() == "D"


def test_no_most_repairs_mark_where_nothing_was_repaired(shown_figures):
    from reachtui.reports import plots

    shown = shown_figures["mlp-scan"]
    table = shown.tables["mlp-scan"]
    names = table.column_names
    none_repaired = [tuple(0 if c in ("repaired", "repair_rate") else v for c, v in zip(names, row))
                     for row in table.rows]
    fig = plots.draw(replace(shown, tables={"mlp-scan": replace(table, rows=none_repaired)}))
    assert not [s for s in plots.plotted(fig)["series"] if s["column"] == "best"]
    assert "most repairs" not in [t.get_text() for t in fig.legends[0].get_texts()]
    marked = plots.draw(shown)
    assert [s["value"] for s in plots.plotted(marked)["series"] if s["column"] == "best"] == [3.0]


# --------------------------------------------------------------------------------------------------
# --style, plot all, refusals
# --------------------------------------------------------------------------------------------------


def test_a_style_file_applies_and_a_bad_one_is_one_line(audit, tmp_path):
    from reachtui.reports import plots
    from reachtui.store import Store

    root, store, a, _b = audit
    lab = tmp_path / "lab.mplstyle"
    lab.write_text("# our lab\nlines.linewidth: 2.5\nfont.family: serif\naxes.grid: False\nsvg.fonttype: path\n"
                   "backend: pdf\n")
    out = root / "styled.svg"
    assert plot(store, "reach", str(a), "-o", str(out), "--style", str(lab)).exit_code == 0
    assert "reached within k" in file_text(out)           # the style may not turn text into paths
    with Store(store, readonly=True) as s:
        fig = plots.draw(plots.figure_tables(s, "reach", [a]), style=plots.style_rc(str(lab)))
    value = next(ln for ln in fig.axes[0].lines if ln.reachtui_key["column"] == "value")
    assert value.get_linewidth() == 2.5 and fig.axes[0].yaxis.label.get_fontfamily() == ["serif"]
    for text, says in (("lines.linewidth 2\n", "Missing colon"), ("lines.widht: 2\n", "Bad key lines.widht"),
                       ("lines.linewidth: thick\n", "thick")):
        bad = tmp_path / "bad.mplstyle"
        bad.write_text(text)
        code, _out, err = run_main(["plot", "reach", str(a), "-o", str(root / "bad.pdf"), "--style", str(bad),
                                    "--store", str(store)])
        assert code == 2 and err.startswith(f"error: --style {bad}: ") and says in err and err.count("\n") == 1, err
    code, _out, err = run_main(["plot", "reach", str(a), "-o", str(root / "bad.pdf"), "--style",
                                str(tmp_path / "none.mplstyle"), "--store", str(store)])
    assert code == 2 and "no such file" in err and err.count("\n") == 1
    assert not (root / "bad.pdf").exists()
    assert plot(store, "reach", str(a), "-o", str(root / "gg.png"), "--style", "ggplot").exit_code == 0


def test_plot_all_writes_the_set(audit, tmp_path):
    _root, store, a, b = audit
    code, out, err = run_main(["plot", "all", str(a), str(b), "-o", str(tmp_path / "figs"), "--format", "png",
                               "--dpi", "50", "--caption", "--store", str(store)])
    assert code == 0, err
    names = ["reach", "blind", "mlp-scan", "compare", "passk"]
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == sorted(f"{k}.png" for k in names)
    assert err == "wrote " + ", ".join(str(tmp_path / "figs" / f"{k}.png") for k in names) + "\n"
    assert [line for line in out.splitlines() if line.startswith("%")] == [
        f"% {tmp_path / 'figs' / k}.png" for k in names]
    assert out.count(r"\caption{") == 5
    for k in names:
        data = embedded(tmp_path / "figs" / f"{k}.png")
        assert data["figure"] == k and [r["run"] for r in data["runs"]] == [a, b]
    code, out, err = run_main(["plot", "all", str(a), "-o", str(tmp_path / "one"), "--format", "svg",
                               "--store", str(store)])
    assert code == 0 and out == ""
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == sorted(f"{k}.svg" for k in names if k != "compare")


def test_plot_all_skips_what_a_run_lacks_and_says_so(tmp_path):
    store = tmp_path / "s.sqlite"
    task = tmp_path / "t.jsonl"
    task.write_text('{"id": "a", "question": "1+1?", "answer": "2"}\n{"id": "b", "question": "2+2?", "answer": "4"}\n')
    att = tmp_path / "g.jsonl"
    att.write_text("".join(json.dumps({"question_id": q, "probe": p, "attempt": i, "output": o}) + "\n"
                           for q, p, i, o in [("a", "realized", 0, "2"), ("b", "realized", 0, "5"),
                                              ("a", "sample", 0, "3"), ("a", "sample", 1, "2"),
                                              ("b", "sample", 0, "4"), ("b", "sample", 1, "1")]))
    assert CliRunner().invoke(cli, ["import", str(att), "--task", str(task), "--store", str(store)]).exit_code == 0
    code, _out, err = run_main(["plot", "all", "-o", str(tmp_path / "figs"), "--store", str(store)])
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == ["passk.pdf", "reach.pdf"]
    assert "skipped blind: run 1 has no attempts of the route probes (routes, mcts, mcts-blind)" in err
    assert "skipped mlp-scan: run 1 has no MLP scan (audit with --mlp-scan)" in err


@pytest.mark.parametrize("args, says", [
    (["plot", "bars", "1", "-o", "x.pdf"], "unknown figure 'bars'"),
    (["plot", "passk", "1", "-o", "x.jpg"], "unknown suffix '.jpg'"),
    (["plot", "passk", "1", "-o", "x"], "no suffix"),
    (["plot", "passk", "1", "-o", ""], "-o needs a file: FILE.pdf, .png or .svg"),
    (["plot", "all", "1", "-o", " "], "-o needs a folder"),
    (["plot", "passk", "1", "-o", "x.png", "--format", "pdf"], "is a .png file but --format is pdf"),
    (["plot", "compare", "1", "-o", "x.pdf"], "needs two runs"),
    (["plot", "compare", "1", "1", "-o", "x.pdf"], "two different runs"),
    (["plot", "passk", "99", "-o", "x.pdf"], "no run 99"),
    (["plot", "reach", "1", "--probe", "beam", "-o", "x.pdf"], "--probe beam: run 1 has no probe 'beam' (its "
                                                              "probes: sample, routes, mcts)"),
    (["plot", "blind", "1", "--probe", "mcts-blind", "-o", "x.pdf"], "has no probe 'mcts-blind'"),
    (["plot", "reach", "1", "--allow-unmatched", "-o", "x.pdf"], "--allow-unmatched is for plot compare"),
    (["plot", "all", "1", "--title", "T", "-o", "figs"], "--title names one figure"),
    (["plot", "all", "1", "2", "1", "-o", "figs"], "plot all takes one run, or two"),
    (["plot", "all", "1", "-o", "x.pdf/figs"], "folder x.pdf does not exist"),
    (["plot", "all", "1", "--format", "jpg", "-o", "figs"], "unknown figure format 'jpg'"),
])
def test_bad_requests_are_one_line(audit, monkeypatch, args, says):
    root, store, _a, _b = audit
    monkeypatch.chdir(root)
    code, _out, err = run_main([*args, "--store", str(store)])
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and says in err, err
    assert not (root / "x.pdf").exists() and not (root / "figs").exists()


def test_plot_all_into_a_file_is_refused(audit, tmp_path):
    _root, store, a, _b = audit
    target = tmp_path / "figs.pdf"
    target.write_text("mine")
    code, _out, err = run_main(["plot", "all", str(a), "-o", str(target), "--store", str(store)])
    assert code == 2 and "is a file: plot all writes its figures into a folder" in err
    assert target.read_text() == "mine"


def test_compare_of_runs_with_no_probe_in_common_draws_realized_without_warnings(tmp_path, recwarn):
    store = tmp_path / "s.sqlite"
    task = tmp_path / "t.jsonl"
    task.write_text('{"id": "a", "question": "1+1?", "answer": "2"}\n{"id": "b", "question": "2+2?", "answer": "4"}\n')
    for name, probe in (("one", "sample"), ("two", "routes")):
        att = tmp_path / f"{name}.jsonl"
        att.write_text("".join(json.dumps({"question_id": q, "probe": p, "attempt": 0, "output": o}) + "\n"
                               for q, p, o in [("a", "realized", "2"), ("b", "realized", "5"), ("a", probe, "2"),
                                               ("b", probe, "4")]))
        assert CliRunner().invoke(cli, ["import", str(att), "--task", str(task), "--store", str(store),
                                        "--model", name]).exit_code == 0
    out = tmp_path / "c.svg"
    code, _out, err = run_main(["plot", "compare", "one", "two", "-o", str(out), "--store", str(store)])
    assert code == 0 and err == "", err
    assert {(s["probe"], s["column"]) for s in embedded(out)["series"]} == {
        ("realized", c) for c in ("realized_a", "realized_b", "realized_delta", "realized_delta_lo,realized_delta_hi")}
    assert not [w for w in recwarn if "matplotlib" in str(w.filename) or "Legend" in str(w.message)]


def test_files_are_byte_stable(audit):
    """The same figure twice is the same file (no dates, fixed SVG ids): figures can live in git."""
    root, store, a, _b = audit
    for fmt in FORMATS:
        one, two = root / f"s1.{fmt}", root / f"s2.{fmt}"
        dpi = ["--dpi", "72"] if fmt == "png" else []          # a PNG's resolution (refused for vectors)
        assert plot(store, "blind", str(a), "-o", str(one), *dpi).exit_code == 0
        assert plot(store, "blind", str(a), "-o", str(two), *dpi).exit_code == 0
        assert one.read_bytes() == two.read_bytes(), fmt


def test_a_run_without_a_scan_or_samples_is_one_line(tmp_path):
    store = tmp_path / "s.sqlite"
    task = tmp_path / "t.jsonl"
    task.write_text('{"id": "a", "question": "1+1?", "answer": "2"}\n')
    att = tmp_path / "g.jsonl"
    att.write_text('{"question_id": "a", "probe": "realized", "attempt": 0, "output": "2"}\n'
                   '{"question_id": "a", "probe": "routes", "attempt": 0, "output": "3"}\n')
    assert CliRunner().invoke(cli, ["import", str(att), "--task", str(task), "--store", str(store)]).exit_code == 0
    code, _out, err = run_main(["plot", "mlp-scan", "-o", str(tmp_path / "m.pdf"), "--store", str(store)])
    assert code == 2 and "has no MLP scan (audit with --mlp-scan)" in err and err.count("\n") == 1
    code, _out, err = run_main(["plot", "passk", "-o", str(tmp_path / "p.pdf"), "--store", str(store)])
    assert code == 2 and "no pass@k curve" in err and "plot reach" in err
    for kind in ("reach", "blind"):
        code, _out, _err = run_main(["plot", kind, "-o", str(tmp_path / f"{kind}.pdf"), "--store", str(store)])
        assert code == 0 and (tmp_path / f"{kind}.pdf").stat().st_size > 0


def test_plot_never_writes_over_the_store(audit):
    _root, store, a, _b = audit
    before = store.read_bytes()
    code, _out, err = run_main(["plot", "passk", str(a), "-o", str(store), "--store", str(store)])
    assert code == 2 and "is the audit store" in err
    assert store.read_bytes() == before


def test_without_matplotlib_the_command_says_which_extra(audit, monkeypatch):
    root, store, a, _b = audit
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import matplotlib fails as if not installed
    code, _out, err = run_main(["plot", "passk", str(a), "-o", str(root / "n.pdf"), "--store", str(store)])
    assert code == 2 and "pip install 'reachtui[plot]'" in err and err.count("\n") == 1


def test_plotting_imports_no_torch_or_textual(audit):
    root, store, a, _b = audit
    argv = ["plot", "all", str(a), "-o", str(root / "mods"), "--format", "svg", "--store", str(store)]
    assert libraries_loaded_by(argv, {"torch", "transformers", "textual"}) == []
    assert (root / "mods" / "reach.svg").exists()
