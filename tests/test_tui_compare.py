"""The app's comparison view (`reachtui open --compare A B`) on the hand-built runs of test_compare: its
header shows the numbers `reachtui compare` prints, each transition filter shows exactly the ids
`reachtui compare --list` gives, the detail pane shows both runs' outputs, unmatched protocols are refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reachtui import tables as T
from reachtui.store import Store
from reachtui.tables.formats import percent
from reachtui.tui.app import ReachApp
from test_compare import matched_store, store_path  # noqa: F401  (fixtures: matched and unmatched runs)
from test_tui import screen_lines, until

SIZE = (150, 42)


def listed(store_path, spec: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "reachtui", "compare", "1", "2", "--store", str(store_path),
                          "--list", spec], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [line.split("\t")[-1] for line in out.stdout.split()]


async def test_the_comparison_view_shows_what_compare_prints(store_path):
    with Store(store_path, readonly=True) as store:
        rows = {r["probe"]: r for r in T.compare_runs(store, 1, 2).table.dicts()}
    app = ReachApp(store_path, compare=(1, 2))
    async with app.run_test(size=SIZE) as pilot:
        header = "\n".join(screen_lines(app)[:4])
        for probe in ("routes", "sample"):
            r = rows[probe]
            assert f"{probe}: realized {percent(r['realized_a'])} → {percent(r['realized_b'])}" in header
            assert percent(r["reachable_delta"], r["reachable_delta_lo"], r["reachable_delta_hi"],
                           signed=True) in header
            assert f"p {r['reachable_p']:.3g}" in header
        table = app.screen.table
        assert len(table.rows) == 20                                    # the questions both runs have
        for keys, spec in ((["r"], "realized:gained"), (["R"], "realized:lost"), (["w"], "realized:never"),
                           (["e"], "sample:expanded"), (["e", "e"], "routes:expanded"),
                           (["s"], "sample:shrunk"), (["s", "s"], "routes:shrunk"), (["p"], "sample:preserved"),
                           (["o", "o"], "routes:out-of-reach")):
            await pilot.press("a", *keys)
            assert [r.qid for r in table.rows] == listed(store_path, spec), spec
        await pilot.press("a", "j")
        qid = table.current_qid
        await until(pilot, lambda: qid in "\n".join(screen_lines(app)))
        screen = "\n".join(screen_lines(app))
        assert "run A (1 base)" in screen and "run B (2 trained)" in screen
        await pilot.press("v")
        assert type(app.screen).__name__ == "ComparisonChartScreen"
        await pilot.press("escape")


def test_open_compare_refuses_unmatched_protocols(store_path):
    out = subprocess.run([sys.executable, "-m", "reachtui", "open", "--store", str(store_path), "--compare", "1",
                          "3"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "different default deployments (max_new_tokens 48 vs 32)" in out.stderr
    assert "--allow-unmatched" in out.stderr
    out = subprocess.run([sys.executable, "-m", "reachtui", "open", "--store", str(store_path), "--compare",
                          "nobody", "2"], capture_output=True, text=True)
    assert out.returncode == 2 and "no run 'nobody': not a run id, 'latest', or a model" in out.stderr


async def test_the_comparison_view_names_the_probes_it_leaves_out(matched_store):
    """Runs matched on sample, not on routes (K = 2 against 4): the view compares sample and says why routes
    is left out, as `reachtui compare` does."""
    from reachtui.commands.open import compared_runs

    ids = compared_runs(matched_store, ("base", "tuned-k2"), False)
    app = ReachApp(matched_store, compare=ids)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.screen.comparison.probes == ["sample"]
        header = " ".join(" ".join(screen_lines(app)[:6]).split())
        assert "sample: realized" in header
        assert "routes: not matched (budget 4 vs 2): not compared" in header


async def test_the_comparison_view_stacks_at_80x24(store_path):
    """At 80×24 the detail (both runs' outputs) goes under the table, as on the main screen: the table, the
    question's runs A and B and the footer all show."""
    app = ReachApp(store_path, compare=(1, 2))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("j")
        qid = app.screen.table.current_qid
        await until(pilot, lambda: qid in "\n".join(screen_lines(app)))
        assert app.screen.has_class("-narrow")
        screen = "\n".join(screen_lines(app))
        assert "run A (1 base)" in screen and "run B (2 trained)" in screen
        assert sum(1 for line in screen_lines(app) if line.startswith("q0")) >= 4    # table rows still show
        right, left = app.screen.query_one("#right").region, app.screen.query_one("#left").region
        assert right.y >= left.bottom and right.width >= 78
