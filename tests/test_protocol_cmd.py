"""`reachtui protocol RUN` prints a run's protocol as TOML that `--protocol` reads back to the same hash (an
audit's and an import's); `--task-name` names a JSONL task in the store (GSM8K's test.jsonl as gsm8k)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fake_runner import FakeRunner, write_task
from reachtui.engine.audit import run_audit
from reachtui.protocol import MctsParams, ProbeSpec, Protocol, load_protocol_file
from reachtui.store import Store
from reachtui.tasks import load_task


def invoke(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "reachtui", *args], capture_output=True, text=True, cwd=cwd)


def test_a_runs_protocol_prints_as_toml_that_reads_back_to_its_hash(tmp_path):
    task = load_task(str(write_task(tmp_path / "t.jsonl", 6)))
    protocol = Protocol(probes=(ProbeSpec("sample", budget=3, temperature=0.7), ProbeSpec("routes", budget=2)),
                        seed=5, max_new_tokens=20, stop=("\n", "Question:"), fewshot=(("What is 1 + 1?", "#### 2"),),
                        mcts=MctsParams(lam=2.5))
    with Store(tmp_path / "s.sqlite") as store:
        audited = run_audit(store, FakeRunner(), model_name="fake", task=task, protocol=protocol).run_id
    lines = [{"question_id": q.id, "probe": "realized", "attempt": 0, "output": f" #### {q.answer}"}
             for q in task.questions]
    (tmp_path / "gen.jsonl").write_text("".join(__import__("json").dumps(x) + "\n" for x in lines))
    imported = invoke("import", str(tmp_path / "gen.jsonl"), "--task", str(tmp_path / "t.jsonl"),
                      "--store", str(tmp_path / "s.sqlite"))
    assert imported.returncode == 0, imported.stderr
    with Store(tmp_path / "s.sqlite", readonly=True) as store:
        hashes = {r["id"]: r["protocol_hash"] for r in store.list_runs()}
    for run_id, want in hashes.items():
        out = invoke("protocol", str(run_id), "--store", str(tmp_path / "s.sqlite"))
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0] == f"# run {run_id}: " + ("fake" if run_id == audited else "gen") + \
            f" on t, protocol {want}"
        path = tmp_path / f"run{run_id}.toml"
        path.write_text(out.stdout)
        assert load_protocol_file(path).hash() == want
    assert load_protocol_file(tmp_path / f"run{audited}.toml") == protocol
    out = invoke("protocol", "9", "--store", str(tmp_path / "s.sqlite"))
    assert out.returncode == 2 and out.stderr.startswith("error: no run 9")


def test_task_name_names_a_jsonl_task(tmp_path):
    path = write_task(tmp_path / "test.jsonl", 4)
    assert load_task(str(path)).name == "test"
    named = load_task(str(path), "gsm8k")
    assert named.name == "gsm8k" and named.named and named.sha256 == load_task(str(path)).sha256
    with Store(tmp_path / "s.sqlite") as store:
        store.upsert_task(load_task(str(path)))
        task_id = store.upsert_task(named)                      # the same file, named now: renamed
        assert store.conn.execute("SELECT name FROM tasks WHERE id = ?", (task_id,)).fetchone()[0] == "gsm8k"
        store.upsert_task(load_task(str(path)))                 # and not unnamed by a later plain use
        assert store.conn.execute("SELECT name FROM tasks WHERE id = ?", (task_id,)).fetchone()[0] == "gsm8k"
    out = invoke("audit", "demo", "--task", "demo", "--task-name", "x", "--store", str(tmp_path / "y.sqlite"))
    assert out.returncode == 2 and "the demo task is called demo" in out.stderr
    assert not Path(tmp_path / "y.sqlite").exists()
