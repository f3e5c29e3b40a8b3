"""One meaning per number: on one run, every view writes the same reachable, gap and retained cells — csv,
json, md, LaTeX and the terminal (`reachtui export summary`), the audit's closing table, and the app (the
header's counters and its intervals grid, key `i`). Retained is "–" wherever the gap is 0 or below, has no
interval wherever the gap's interval holds 0, and the notes say why, and why a gap or a retained is negative.

Two runs: a real 2-question audit of the demo model (sample and routes at K = 2), and a synthetic run whose
numbers are known (a gain with a negative retained, a negative gap)."""

from __future__ import annotations

import json
import math
import re

import pytest
from click.testing import CliRunner

from reachtui import outcomes
from reachtui.assets import DEMO_MODEL_DIR
from reachtui.store import Store
from reachtui.tables import closing, summary_table
from reachtui.tables.formats import human_cells
from tables_fixtures import add_run, make_task

SIZE = (150, 42)
COLUMNS = "probe,reachable,reachable_lo,reachable_hi,gap,gap_lo,gap_hi,retained,retained_lo,retained_hi"
SHOWN = ("reachable", "gap", "retained")          # the cells every view shows


def _cli(*args: str) -> str:
    from reachtui.cli import cli

    out = CliRunner().invoke(cli, list(args))
    assert out.exit_code == 0, out.output
    return out.stdout


def _export(path, fmt: str) -> str:
    inline = ["--ci", "inline"] if fmt in ("md", "latex", "table") else []     # --ci is a people's format option
    return _cli("export", "summary", "--store", str(path), "--columns", COLUMNS, "--format", fmt, *inline)


def _cells_by_probe(rows: list[list[str]], header: list[str]) -> dict[str, dict[str, str]]:
    """{probe: {column: cell}} for the SHOWN columns of a people's table (headers as the exports write them)."""
    heads = {"reachable (%)": "reachable", "gap (%)": "gap", "retained (vote) (%)": "retained"}
    index = {heads[h]: i for i, h in enumerate(header) if h in heads}
    return {r[0]: {c: r[i] for c, i in index.items()} for r in rows}


def markdown_cells(text: str) -> dict[str, dict[str, str]]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    split = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return _cells_by_probe(split[2:], split[0])


def latex_cells(text: str) -> dict[str, dict[str, str]]:
    """The tabular's rows, LaTeX undone ($-$ is a minus, -- the dash of a blank cell, \\% a percent)."""
    body = text.split("\\midrule\n", 1)[1].split("\\bottomrule", 1)[0]
    header = text.split("\\toprule\n", 1)[1].split(" \\\\", 1)[0]

    def plain(cell: str) -> str:
        return cell.strip().replace("$-$", "-").replace("--", "–").replace("\\%", "%")

    rows = [[plain(c) for c in line.rstrip(" \\").split(" & ")] for line in body.splitlines() if line.strip()]
    return _cells_by_probe(rows, [plain(c) for c in header.split(" & ")])


def terminal_cells(text: str) -> dict[str, dict[str, str]]:
    """rich's box table: the header row between ┃, the data rows between │."""
    lines = text.splitlines()
    header = next([c.strip() for c in line.strip("┃").split("┃")] for line in lines if line.startswith("┃"))
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in lines if line.startswith("│")]
    return _cells_by_probe(rows, header)


def data_cells(records: list[dict]) -> dict[str, dict[str, str]]:
    """csv/json records written as people read them: the number as a percentage, its interval beside it."""
    from reachtui.tables.formats import human_value

    def cell(r: dict, c: str) -> str:
        v, lo, hi = (None if r[k] in ("", None) else float(r[k]) for k in (c, f"{c}_lo", f"{c}_hi"))
        if v is None:
            assert lo is None and hi is None, (c, r)
            return "–"
        signed = c != "reachable"
        text = human_value(v, "frac", signed)
        return text if lo is None else f"{text} [{human_value(lo, 'frac', signed)}, {human_value(hi, 'frac', signed)}]"

    return {r["probe"]: {c: cell(r, c) for c in SHOWN} for r in records}


def value(cell: str) -> str:
    return cell.split(" [")[0]


async def app_cells(path) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """(the header's counters: reachable and gap per probe, the intervals grid, key `i`: reachable, gap,
    retained per probe, read off the screen: a measure per row, a probe per column, at a width where every
    cell fits on one line)."""
    import time

    from reachtui.tui.app import ReachApp
    from tui_screen import screen_text

    app = ReachApp(path)
    async with app.run_test(size=(260, 50)) as pilot:
        await pilot.pause()
        counters = " ".join(screen_text(app)[:3])
        await pilot.press("i")
        pane = app.main.query_one("#intervals")
        end = time.monotonic() + 30
        while not any("95% intervals" in line for line in screen_text(app)):
            assert time.monotonic() < end
            await pilot.pause(0.05)
        r = pane.region
        shown = [line[r.x:r.right].strip() for line in screen_text(app)[r.y:r.bottom]]
        probes = app.run_info.probes
    heads = next(i for i, line in enumerate(shown) if line.split() == ["95%", "intervals", *probes])
    grid = {re.split(r"\s{2,}", line)[0]: re.split(r"\s{2,}", line)[1:] for line in shown[heads + 1:heads + 6]}
    labels = {"reachable": "reachable", "gap": "gap", "retained": "retained (vote)"}
    head = {p: dict(zip(("reachable", "gap"), re.search(rf"{re.escape(p)} (\S+)% gap (\S+)", counters).groups()))
            for p in probes}
    line = {p: {c: grid[labels[c]][i] for c in SHOWN} for i, p in enumerate(probes)}
    return head, {"notes": " ".join(" ".join(shown).split()), **line}


async def every_view(path, run_id: int) -> dict[str, dict[str, dict[str, str]]]:
    """Each view's SHOWN cells per probe; asserts they agree and returns them (with the table's notes)."""
    md = markdown_cells(_export(path, "md"))
    views = {"md": md, "latex": latex_cells(_export(path, "latex")), "table": terminal_cells(_export(path, "table")),
             "json": data_cells(json.loads(_export(path, "json"))),
             "csv": data_cells([dict(zip(lines[0].split(","), line.split(",")))
                                for lines in [_export(path, "csv").splitlines()] for line in lines[1:]])}
    head, line = await app_cells(path)
    for name, cells in views.items():
        assert cells == md, name
    assert {p: {c: line[p][c] for c in SHOWN} for p in md} == md
    assert head == {p: {c: value(md[p][c]) for c in ("reachable", "gap")} for p in md}
    with Store(path, readonly=True) as store:
        table, _lines = closing(store, run_id)
        notes = summary_table(store, [run_id]).notes
    shut = {c["probe"]: c for c in human_cells(table)}
    assert {p: {c: shut[p][c] for c in SHOWN} for p in md} == {p: {c: value(md[p][c]) for c in SHOWN} for p in md}
    for note in notes[:-1]:         # the gap and retained notes, in the table, the closing lines and the app
        assert note in table.notes and note in line["notes"]
    return {"cells": md, "notes": notes}


def _check_rules(cells: dict[str, dict[str, str]], notes: list[str]) -> None:
    """retained "–" wherever the gap is <= 0, its interval only where the gap's lies above 0; each case named."""
    def number(text: str) -> float:
        return float(value(text))

    for probe, c in cells.items():
        gap = number(c["gap"])
        if gap <= 0:
            assert c["retained"] == "–"
            assert f"{probe}" in next(n for n in notes if n.endswith(outcomes.NO_GAIN)).split(":")[0]
        if gap < 0:
            assert probe in next(n for n in notes if n.endswith(outcomes.NEGATIVE_GAP)).split(":")[0]
        gap_lo = float(c["gap"].split("[")[1].split(",")[0]) if "[" in c["gap"] else math.nan
        if "[" in c["retained"]:
            assert gap_lo > 0


@pytest.mark.skipif(not (DEMO_MODEL_DIR / "config.json").is_file(), reason="no demo model in assets/")
async def test_a_two_question_routes_run_reads_the_same_everywhere(tmp_path):
    path = tmp_path / "two.sqlite"
    _cli("audit", "demo", "--task", "demo", "--limit", "2", "--probes", "realized,sample,routes", "--budget", "2",
         "--store", str(path), "--threads", "1")
    got = await every_view(path, 1)
    assert set(got["cells"]) == {"sample", "routes"}
    _check_rules(got["cells"], got["notes"])


async def test_a_gain_a_loss_and_a_negative_retained_read_the_same_everywhere(tmp_path):
    """20 questions, 10 realized. sample reaches all 20 (gap +50, its interval above 0), its vote gets 5 right:
    retained (0.25 - 0.5) / 0.5 = -50.0 with an interval. routes reach 5 (gap -25): retained "–". mcts reaches
    the 10 realized and 1 more (gap +5, its interval holds 0) and its vote none: retained (0 - 0.5) / 0.05
    = -1000.0, without an interval."""
    task = make_task("views", 20)
    data = {}
    for i, q in enumerate(task.questions):
        right = (True, q.answer, -0.5)
        realized = i < 10
        data[q.id] = {
            "realized": [right if realized else (False, "1", -0.5)],
            # one right attempt among two wrong ones that agree: the vote is right only where all three are
            "sample": [right] * 3 if i < 5 else [right, (False, "7", -0.1), (False, "7", -0.2)],
            "routes": [right if i < 5 else (False, "2", -1.0), (False, "3", -1.0)],
            "mcts": [right if i < 11 else (False, "4", -1.0), (False, "5", -0.1)],
        }
    with Store(tmp_path / "v.sqlite") as store:
        run = add_run(store, "m", task, "p", data)
    got = await every_view(tmp_path / "v.sqlite", run)
    cells = got["cells"]
    assert cells["sample"]["reachable"].startswith("100.0 [")
    assert value(cells["sample"]["gap"]) == "+50.0" and value(cells["sample"]["retained"]) == "-50.0"
    assert "[" in cells["sample"]["retained"]                       # the gap's interval lies above 0
    assert value(cells["routes"]["gap"]) == "-25.0" and cells["routes"]["retained"] == "–"
    assert value(cells["mcts"]["gap"]) == "+5.0" and "[" not in cells["mcts"]["retained"]
    assert value(cells["mcts"]["retained"]) == "-1000.0"            # its vote (ties: "5", more likely) gets none
    _check_rules(cells, got["notes"])
    assert got["notes"][:4] == [
        f"routes: {outcomes.NEGATIVE_GAP}", f"routes: {outcomes.NO_GAIN}", f"mcts: {outcomes.UNBOUNDED}",
        f"sample, mcts: {outcomes.NEGATIVE_RETAINED}"]
