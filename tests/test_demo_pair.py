"""The bundled demo pair: `demo-tuned` is found by name like `demo`, both audit the demo task, and the app's
comparison view of the two runs shows the numbers `reachtui compare` prints (realized Δ, reachable Δ with
its interval, McNemar p), with transition filters that list exactly the ids `compare --list` gives.
A few questions and a small budget keep it quick; the full measurement is in the model card."""

from __future__ import annotations

import subprocess

import pytest
from conftest import run_main

from reachtui import tables as T
from reachtui.assets import BUNDLED_MODELS
from reachtui.store import Store
from reachtui.tables.formats import percent
from reachtui.tui.app import ReachApp
from test_tui import screen_lines

pytestmark = [pytest.mark.slow,       # two audits of the demo models: about 8 s of CPU
              pytest.mark.skipif(not all((d / "config.json").is_file() for d in BUNDLED_MODELS.values()),
                                 reason="the bundled demo models are not installed")]
LIMIT, BUDGET = 24, 8


def reachtui(*args: str) -> subprocess.CompletedProcess:
    """`reachtui ARGS` in this process (compare loads no model): its exit status and output."""
    code, out, err = run_main(args)
    return subprocess.CompletedProcess(args, code, out, err)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Both models audited on the demo task's first questions (realized and sample), in this process on one
    torch thread (a subprocess each cost its start and imports; more threads than free cores collapse)."""
    import torch

    from reachtui.engine.audit import run_audit
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol, protocol_from_options
    from reachtui.tasks import load_task

    store = tmp_path_factory.mktemp("pair") / "s.sqlite"
    protocol = protocol_from_options(Protocol(), probes="realized,sample", budget=BUDGET)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with Store(store) as s:
            for model in ("demo", "demo-tuned"):
                runner = Runner(load_model(model, device="cpu"))
                loaded = runner.loaded
                done = run_audit(s, runner, model_name=loaded.name, model_path=str(loaded.path),
                                 model_class=loaded.arch.model_class, task=load_task("demo"), protocol=protocol,
                                 limit=LIMIT)
                assert done.status == "complete"
    finally:
        torch.set_num_threads(threads)
    return store


def test_compare_prints_the_deltas_of_the_demo_pair(pair):
    done = reachtui("compare", "1", "2", "--store", str(pair), "--format", "csv")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    cols = header.split(",")
    assert {"realized_delta", "realized_delta_lo", "reachable_delta", "reachable_delta_lo", "reachable_delta_hi",
            "realized_p", "reachable_p"} <= set(cols)
    sample = next(r for r in (dict(zip(cols, r.split(","))) for r in rows) if r["probe"] == "sample")
    assert (sample["run_a"], sample["model_a"], sample["run_b"], sample["model_b"]) == ("1", "demo", "2", "demo-tuned")
    with Store(pair, readonly=True) as store:
        runs = dict(store.db.execute("SELECT r.id, m.name FROM runs r JOIN models m ON m.id = r.model_id").fetchall())
        row = next(r for r in T.compare_runs(store, 1, 2).table.dicts() if r["probe"] == "sample")
    assert runs == {1: "demo", 2: "demo-tuned"}
    assert float(sample["reachable_delta"]) == pytest.approx(row["reachable_delta"])
    assert float(sample["realized_p"]) == pytest.approx(row["realized_p"])


async def test_the_app_shows_the_demo_pair_as_compare_does(pair):
    with Store(pair, readonly=True) as store:
        row = next(r for r in T.compare_runs(store, 1, 2).table.dicts() if r["probe"] == "sample")
    app = ReachApp(pair, compare=(1, 2))
    async with app.run_test(size=(150, 42)) as pilot:
        header = "\n".join(screen_lines(app)[:4])
        assert f"sample: realized {percent(row['realized_a'])} → {percent(row['realized_b'])}" in header
        assert percent(row["reachable_delta"], row["reachable_delta_lo"], row["reachable_delta_hi"],
                       signed=True) in header
        assert f"p {row['reachable_p']:.3g}" in header
        table = app.screen.table
        assert len(table.rows) == LIMIT
        for keys, spec in ((["r"], "realized:gained"), (["R"], "realized:lost"), (["e"], "sample:expanded"),
                           (["s"], "sample:shrunk")):
            await pilot.press("a", *keys)
            listed = reachtui("compare", "1", "2", "--store", str(pair), "--list", spec)
            assert listed.returncode == 0, listed.stderr
            assert [r.qid for r in table.rows] == [line.split("\t")[-1] for line in listed.stdout.split()], spec
