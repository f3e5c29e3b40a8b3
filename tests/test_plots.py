"""`reachtui plot passk|reach|mlp-scan|compare`: figures whose plotted numbers are the numbers `reachtui export`
writes. The numbers are read back from the figure's artists (matplotlib's own line data, band and error-bar
vertices) and from the files (PDF read by pypdf, PNG by Pillow, SVG by an XML parser), never from pixels, and
compared with `reachtui export ... --json` run through the CLI."""

from __future__ import annotations

import json
import math
import sys
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")

from conftest import libraries_loaded_by, run_main  # noqa: E402
from outputs_fixtures import audit, export_json  # noqa: E402, F401 (audit: the store fixture)
from reachtui.cli import cli  # noqa: E402

FORMATS = ("pdf", "png", "svg")


def plot(store, *args):
    res = CliRunner().invoke(cli, ["plot", *args, "--store", str(store)])
    return res


def embedded(path) -> dict:
    """The JSON a figure file carries, read with each format's own reader."""
    if path.suffix == ".pdf":
        from pypdf import PdfReader

        return json.loads(PdfReader(path).metadata.subject)
    if path.suffix == ".png":
        from PIL import Image

        with Image.open(path) as im:
            return json.loads(im.text["reachtui:data"])
    tree = ET.parse(path)
    desc = tree.find(".//{http://purl.org/dc/elements/1.1/}description")
    return json.loads(desc.text)


def file_text(path) -> str:
    """The words a figure shows (its text is text in PDF and SVG: pdf.fonttype 42, svg.fonttype none)."""
    if path.suffix == ".pdf":
        from pypdf import PdfReader

        return " ".join(page.extract_text() for page in PdfReader(path).pages)
    return " ".join(t.text or "" for t in ET.parse(path).iter("{http://www.w3.org/2000/svg}text"))


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


def expected(kind: str, store, a: int, b: int) -> dict[tuple, dict]:
    """The series of figure `kind` for run a (and b for compare), from `reachtui export --json`."""
    if kind == "passk":
        return curve_series([r for r in export_json(store, "passk", a, b) if r["estimator"] == "pass@k"])
    if kind == "reach":
        out = curve_series(export_json(store, "passk", a))
        realized = export_json(store, "summary", a)[0]["realized"]
        out[("summary", a, "realized", "realized")] = {"value": realized}
        return out
    if kind == "mlp-scan":
        rows = export_json(store, "mlp-scan", a)
        out = {}
        for name in dict.fromkeys(r["set"] for r in rows):
            mine = [r for r in rows if r["set"] == name]
            for col in ("repair_rate", "break_rate"):
                out[("mlp-scan", a, name, col)] = {"x": [float(r["layer"]) for r in mine], "y": [r[col] for r in mine]}
            out[("mlp-scan", a, name, "best")] = {"value": float(next(r["layer"] for r in mine if r["best"]))}
        return out
    compared = export_json(store, "compare", a, b)
    out = curve_series(export_json(store, "passk", a, b), probes={r["probe"] for r in compared})
    points = [(0, compared[0], "realized_delta", "realized")] + [
        (i + 1, r, "reachable_delta", r["probe"]) for i, r in enumerate(compared)]
    for x, row, col, probe in points:
        out[("compare", None, probe, col)] = {"x": [float(x)], "y": [row[col]]}
        out[("compare", None, probe, f"{col}_lo,{col}_hi")] = {"x": [float(x)], "lo": [row[f"{col}_lo"]],
                                                               "hi": [row[f"{col}_hi"]]}
    return out


def assert_same_numbers(data: dict, want: dict[tuple, dict]) -> None:
    got = {_key(s): {k: v for k, v in s.items() if k in ("x", "y", "lo", "hi", "value")} for s in data["series"]}
    assert set(got) == set(want), (sorted(set(got) ^ set(want), key=str))
    for key, series in want.items():
        assert got[key] == series, key


@pytest.mark.parametrize("kind", ["passk", "reach", "mlp-scan", "compare"])
def test_each_figure_file_carries_the_exports_numbers_and_names_what_it_shows(audit, kind):
    root, store, a, b = audit
    want = expected(kind, store, a, b)
    runs = [str(a), str(b)] if kind in ("passk", "compare") else [str(a)]
    hashes = {r["run"]: r["protocol_hash"] for r in export_json(store, "summary", a, b)}
    for fmt in FORMATS:
        out = root / f"{kind}.{fmt}"
        res = plot(store, kind, *runs, "-o", str(out))
        assert res.exit_code == 0, res.output
        assert res.stdout == ""
        data = embedded(out)
        assert data["figure"] == kind and [r["run"] for r in data["runs"]] == [int(r) for r in runs]
        assert_same_numbers(data, want)
        # the figure says which runs (model, task, protocol hash) and probes it shows
        for run in map(int, runs):
            assert f"run {run}: {'base' if run == a else 'tuned'} on t, protocol {hashes[run]}" in data["title"]
        if fmt != "png":
            words = file_text(out)
            assert f"protocol {hashes[a]}" in words
            if kind in ("passk", "compare"):
                assert "sample" in words
            if kind == "reach":
                assert all(p in words for p in ("sample", "routes", "mcts", "realized"))
            if kind == "mlp-scan":
                assert "failure:sample" in words


def test_the_figure_objects_artists_hold_the_exports_numbers(audit):
    """Read matplotlib's own artists (not reachtui's read-back): the pass@k curve, its control and the shaded
    interval of run A, and the MLP scan's repair rates."""
    from reachtui import plots
    from reachtui.store import Store

    _root, store, a, _b = audit
    with Store(store, readonly=True) as s:
        fig = plots.draw(plots.figure_tables(s, "passk", [a]))
        mlp = plots.draw(plots.figure_tables(s, "mlp-scan", [a]))
    rows = [r for r in export_json(store, "passk", a) if r["probe"] == "sample"]
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.lines}
    assert list(lines[f"run {a} (base)"].get_ydata()) == [r["value"] for r in rows]
    assert list(lines[f"run {a} (base)"].get_xdata()) == [r["k"] for r in rows]
    assert list(lines[f"run {a} (base), control"].get_ydata()) == [r["control"] for r in rows]
    band = ax.collections[0].get_paths()[0].vertices
    for r in rows:
        at = sorted(y for x, y in band if x == r["k"])
        assert (at[0], at[-1]) == (r["value_lo"], r["value_hi"])
    assert "sample" in ax.get_title() and "pass@k" in ax.get_title()
    assert "protocol" in fig.get_suptitle() and f"run {a}: base on t" in fig.get_suptitle()
    scan = [r for r in export_json(store, "mlp-scan", a)]
    repair = next(line for line in mlp.axes[0].lines if line.get_label().startswith("repair rate"))
    assert list(repair.get_ydata()) == [r["repair_rate"] for r in scan]
    assert list(repair.get_xdata()) == [r["layer"] for r in scan]


def test_probe_filter_keeps_only_that_probe(audit):
    root, store, a, _b = audit
    out = root / "routes.svg"
    res = plot(store, "reach", str(a), "--probe", "routes", "-o", str(out))
    assert res.exit_code == 0, res.output
    probes = {s.get("probe") for s in embedded(out)["series"] if s["table"] == "passk"}
    assert probes == {"routes"}


def test_files_are_byte_stable(audit):
    """The same figure twice is the same file (no dates, fixed SVG ids): figures can live in git."""
    root, store, a, _b = audit
    for fmt in FORMATS:
        one, two = root / f"s1.{fmt}", root / f"s2.{fmt}"
        assert plot(store, "passk", str(a), "-o", str(one)).exit_code == 0
        assert plot(store, "passk", str(a), "-o", str(two)).exit_code == 0
        assert one.read_bytes() == two.read_bytes(), fmt



@pytest.mark.parametrize("args, says", [
    (["plot", "bars", "1", "-o", "x.pdf"], "unknown figure 'bars'"),
    (["plot", "passk", "1", "-o", "x.jpg"], "unknown suffix '.jpg'"),
    (["plot", "passk", "1", "-o", "x"], "no suffix"),
    (["plot", "passk", "1", "-o", "x.png", "--format", "pdf"], "is a .png file but --format is pdf"),
    (["plot", "compare", "1", "-o", "x.pdf"], "needs two runs"),
    (["plot", "compare", "1", "1", "-o", "x.pdf"], "two different runs"),
    (["plot", "passk", "99", "-o", "x.pdf"], "no run 99"),
    (["plot", "passk", "1", "--probe", "routes", "-o", "x.pdf"], "has no pass@k curve of probe routes"),
])
def test_bad_requests_are_one_line(audit, monkeypatch, args, says):
    root, store, _a, _b = audit
    monkeypatch.chdir(root)
    code, _out, err = run_main([*args, "--store", str(store)])
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and says in err, err
    assert not (root / "x.pdf").exists()


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
    code, _out, _err = run_main(["plot", "reach", "-o", str(tmp_path / "r.pdf"), "--store", str(store)])
    assert code == 0 and (tmp_path / "r.pdf").stat().st_size > 0


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
    argv = ["plot", "reach", str(a), "-o", str(root / "mods.pdf"), "--store", str(store)]
    assert libraries_loaded_by(argv, {"torch", "transformers", "textual"}) == []
    assert (root / "mods.pdf").exists()
