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


# -- every protocol written reads back (issue 25, class 9) ----------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: Any text a protocol can hold (no lone surrogates: they are not text), control characters and DEL included.
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@st.composite
def protocols(draw):
    template = draw(TEXT) + "{question}" + draw(TEXT)
    probes = draw(st.lists(st.sampled_from(["sample", "routes", "mcts", "mcts-blind"]), unique=True, max_size=3))
    return Protocol(
        template=template,
        system=draw(st.none() | TEXT),
        fewshot=tuple(draw(st.lists(st.tuples(TEXT, TEXT), max_size=3))),
        stop=tuple(draw(st.lists(TEXT.filter(bool), min_size=1, max_size=3))),
        max_new_tokens=draw(st.integers(1, 4096)),
        temperature=draw(st.sampled_from([0.0, 0.01, 0.5, 1.0, 1e300])),
        top_p=draw(st.floats(0.001, 1.0)),
        seed=draw(st.integers(0, 2**63 - 1)),
        probes=tuple(ProbeSpec(p, budget=draw(st.integers(1, 64)),
                               temperature=draw(st.sampled_from([0.0, 0.7, 1.0]))) for p in probes),
        mcts=MctsParams(lam=draw(st.floats(0, 1e6))))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(protocol=protocols(), model=TEXT)
def test_any_protocol_written_as_toml_reads_back_the_same(tmp_path, protocol, model):
    """`reachtui protocol` wrote a template holding DEL (U+007F) raw, which TOML forbids: `--protocol` refused
    the file it had printed. Written by tomli-w, any template, system prompt, few-shot pair, stop string and
    any model name in the comment line read back to the same protocol and hash."""
    from reachtui.protocol import protocol_to_toml

    path = tmp_path / "p.toml"
    path.write_text(protocol_to_toml(protocol, f"run 1: {model} on t, protocol {protocol.hash()}"), encoding="utf-8")
    back = load_protocol_file(path)
    assert back == protocol and back.hash() == protocol.hash()


def test_a_template_with_a_del_character_round_trips_through_the_command(tmp_path):
    task = load_task(str(write_task(tmp_path / "t.jsonl", 3)))
    protocol = Protocol(template="Q\x7f\x00\x1b: {question}\r\nA:", probes=(ProbeSpec("sample", budget=2),))
    with Store(tmp_path / "s.sqlite") as store:
        run_id = run_audit(store, FakeRunner(), model_name="fake\nname", task=task, protocol=protocol).run_id
    out = invoke("protocol", str(run_id), "--store", str(tmp_path / "s.sqlite"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == f"# run {run_id}: fake name on t, protocol {protocol.hash()}"
    (tmp_path / "p.toml").write_text(out.stdout)
    assert load_protocol_file(tmp_path / "p.toml") == protocol
