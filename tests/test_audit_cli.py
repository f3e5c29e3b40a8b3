"""`reachtui audit` and `reachtui runs` from the outside: one-line errors, the runs listing, and SIGKILL at
random moments followed by re-running the same command, which must give exactly the attempts of an
uninterrupted run."""

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import stored_audit
from click.testing import CliRunner

from fake_runner import FakeRunner, write_task
from reachtui.assets import DEMO_MODEL_DIR
from reachtui.engine.audit import run_audit
from reachtui.cli import cli
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]


def invoke(*args):

    return subprocess.run([sys.executable, "-m", "reachtui", *args], capture_output=True, text=True, cwd=ROOT)


@pytest.fixture
def fake_store(tmp_path):
    task = load_task(str(write_task(tmp_path / "t.jsonl", 6)))
    store = Store(tmp_path / "s.sqlite")
    res = run_audit(store, FakeRunner(), model_name="fake", task=task,
                    protocol=Protocol(probes=(ProbeSpec("sample", budget=2),), seed=1))
    store.close()
    return tmp_path, res.run_id


def test_runs_lists_and_json(fake_store):
    tmp, rid = fake_store
    r = CliRunner().invoke(cli, ["runs", "--store", str(tmp / "s.sqlite")])
    assert r.exit_code == 0, r.output
    assert "fake" in r.output and "complete" in r.output
    r = CliRunner().invoke(cli, ["runs", "--store", str(tmp / "s.sqlite"), "--json"])
    data = json.loads(r.output)
    assert data[0]["id"] == rid and data[0]["n_attempts"] == 6 + 12
    assert data[0]["protocol"]["seed"] == 1


def test_runs_without_store_is_one_line(tmp_path):
    out = invoke("runs", "--store", str(tmp_path / "nope.sqlite"))
    assert out.returncode == 2
    assert out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1


def test_audit_refuses_another_protocol_on_a_given_run_before_loading(fake_store):
    tmp, rid = fake_store
    out = invoke("audit", "no-such-model-needed", "--task", str(tmp / "t.jsonl"), "--store", str(tmp / "s.sqlite"),
                 "--run", str(rid), "--probes", "sample", "--budget", "2", "--seed", "9")
    assert out.returncode == 2, out.stderr
    assert "differs in: seed" in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,msg", [
    (["--mlp-scan", "mcts", "--probes", "sample"], "not in this audit"),
    (["--probes", "sample,nope"], "unknown probe"),
    (["--limit", "0"], "--limit"),
])
def test_audit_bad_options_are_one_line(fake_store, args, msg):
    tmp, _ = fake_store
    out = invoke("audit", "demo", "--task", str(tmp / "t.jsonl"), "--store", str(tmp / "x.sqlite"), *args)
    assert out.returncode == 2
    assert msg in out.stderr and len(out.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------ SIGKILL


def _model_dir(tmp_path: Path) -> Path:
    if (DEMO_MODEL_DIR / "config.json").is_file():
        return DEMO_MODEL_DIR
    out = tmp_path / "tiny"
    subprocess.run([sys.executable, str(ROOT / "tests" / "audit_tiny_model.py"), str(out)], check=True,
                   capture_output=True)
    return out


def _attempts(path: Path):
    audit = stored_audit(path)
    return audit["rows"], audit["sets"], audit["scan"], audit["status"]


def _count(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT count(*) FROM attempts").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_sigkill_at_random_moments_then_rerun_equals_uninterrupted(tmp_path):
    model = _model_dir(tmp_path)
    task = write_task(tmp_path / "t.jsonl", 6)
    common = ["-m", "reachtui", "audit", str(model), "--task", str(task), "--probes", "realized,sample,routes,mcts",
              "--budget", "3", "--max-new-tokens", "12", "--batch-size", "4", "--mlp-scan", "sample",
              "--device", "cpu", "--threads", "1"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    ref = tmp_path / "ref.sqlite"
    subprocess.run([sys.executable, *common, "--store", str(ref)], check=True, capture_output=True, cwd=ROOT, env=env)
    ref_data = _attempts(ref)
    total = len(ref_data[0])
    assert ref_data[3] == [("complete",)]

    store = tmp_path / "s.sqlite"
    rng = random.Random(7)
    # Kill points: attempts already stored when the kill lands (spread over the phases), plus one
    # random delay after start (model loading or early batches).
    points = sorted(rng.sample(range(1, total - 1), 2))
    kills = 0
    for point in points + [None]:
        proc = subprocess.Popen([sys.executable, *common, "--store", str(store)], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        if point is None:
            time.sleep(rng.uniform(0.5, 3.0))
        else:
            while proc.poll() is None and _count(store) < point and time.monotonic() < deadline:
                time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
    assert kills >= 2
    before = _attempts(store)
    assert before[3] != [("complete",)]            # a killed run is never reported complete
    done = subprocess.run([sys.executable, *common, "--store", str(store)], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    assert "resumed" in done.stdout
    after = _attempts(store)
    assert after[3] == [("complete",)]
    assert after[0] == ref_data[0]                 # exactly the attempts, no loss, no duplicates
    assert after[1:3] == ref_data[1:3]             # the same frozen failure sets and MLP scan
    # The closing summary's numbers, recomputed from the attempts table with plain SQL.
    from reachtui.tables import summary_rows

    st = Store(store, readonly=True)
    rows = {r["probe"]: r for r in summary_rows(st, 1)}
    sql = lambda q, *a: st.conn.execute(q, a).fetchone()[0]  # noqa: E731
    realized = sql("SELECT avg(correct) FROM attempts WHERE probe = 'realized'")
    assert rows["realized"]["realized"] == pytest.approx(realized)
    for probe in ("sample", "routes", "mcts"):
        reach = sql("SELECT avg(hit) FROM (SELECT max(correct) AS hit FROM attempts WHERE probe = ? "
                    "GROUP BY question_id)", probe)
        assert rows[probe]["reachable"] == pytest.approx(reach)
        assert rows[probe]["failure"] == sql(
            "SELECT count(*) FROM (SELECT a.question_id FROM attempts a JOIN attempts r ON r.question_id = "
            "a.question_id AND r.probe = 'realized' AND r.correct = 0 WHERE a.probe = ? GROUP BY a.question_id "
            "HAVING max(a.correct) = 1)", probe)
    st.close()


def test_closing_note_puts_chance_control_beside_reachable(fake_store):
    from reachtui.tables.summary import closing_lines, summary_rows

    tmp, run_id = fake_store
    with Store(tmp / "s.sqlite") as store:
        lines = closing_lines(store, run_id)
        row = next(r for r in summary_rows(store, run_id, intervals=True) if r["probe"] == "sample")
    sample = next(line for line in lines if line.startswith("sample K=2:"))
    assert f"reachable {100 * row['reachable']:.1f} [" in sample
    assert f"control {100 * row['control']:.1f} [" in sample
    assert "excess" in sample and ("beats chance" in sample or "not above chance" in sample)


def test_closing_table_is_a_view_of_the_summary(fake_store):
    """The audit's closing table: summary rows under the summary table's own columns (retained as a
    percentage, as in every export), realized first; the lines under it start with its notes; as the
    audit prints it (compact) it is whole at 80 columns."""
    import io
    import math

    from rich.console import Console

    from reachtui.tables import summary_table
    from reachtui.tables.formats import human_value, to_rich, to_text
    from reachtui.tables.summary import closing

    tmp, run_id = fake_store
    with Store(tmp / "s.sqlite") as store:
        table, lines = closing(store, run_id)
        summary = {r["probe"]: r for r in summary_table(store, [run_id]).dicts()}
    assert table.column_names == ["probe", "budget", "realized", "reachable", "gap", "blind_vote", "blind_logprob",
                                  "retained", "retained_logprob", "failure_set_size"]  # no chance: not a choice task
    assert table.column("retained").kind == "frac" and table.column("retained").label == "retained (vote)"
    rows = {r["probe"]: r for r in table.dicts()}
    assert list(rows) == ["realized", "sample"]
    for name in table.column_names:
        mine, theirs = rows["sample"][name], summary["sample"][name]
        assert mine == theirs or (isinstance(mine, float) and math.isnan(mine) and math.isnan(theirs)), name
    assert math.isnan(rows["realized"]["reachable"]) and rows["realized"]["failure_set_size"] is None
    assert lines[:len(table.notes)] == table.notes and any(line.startswith("sample pass@k: k=1 ") for line in lines)
    text = to_text(table, width=200)
    assert "retained (vote) (%)" in text and "kept" not in text
    assert human_value(rows["sample"]["realized"], "frac") in text
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(to_rich(table, compact=True))
    narrow = console.export_text()
    assert "…" not in narrow and "retained" in narrow and "(vote)" in narrow
    assert all(len(line) <= 80 for line in narrow.splitlines())
