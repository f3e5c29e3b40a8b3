"""`reachtui import LOG --format inspect`: real Inspect AI logs, made here by inspect_ai itself with its
offline mock model (no network), imported and compared against a reachtui audit of the same questions."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

pytest.importorskip("inspect_ai")

from conftest import run_main  # noqa: E402
from fake_runner import FakeRunner, write_task  # noqa: E402
from reachtui.cli import cli  # noqa: E402
from reachtui.engine.audit import run_audit  # noqa: E402
from reachtui.protocol import ProbeSpec, Protocol, protocol_to_toml  # noqa: E402
from reachtui.store import Store  # noqa: E402
from reachtui.tasks import load_task  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The .initial. parameter is deprecated:DeprecationWarning")

EPOCHS = 3
N = 6


def make_inspect_log(log_dir, task, epochs=EPOCHS, status_ok=True):
    """An Inspect eval of the task's questions by mockllm: the k-th completion answers question k % N's
    gold when k % 4 != 1, else a wrong number. Returns the .eval path."""
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    golds = [q.answer for q in task.questions]
    outs = []
    for k in range(len(golds) * epochs):
        ans = golds[k % len(golds)] if k % 4 != 1 else "999"
        out = ModelOutput.from_content("mockllm/model", f"Let me add. #### {ans}")
        out.usage = ModelUsage(input_tokens=5, output_tokens=5, total_tokens=10)  # else it counts via tiktoken
        outs.append(out)
    dataset = [Sample(id=q.id, input=q.question, target=q.answer) for q in task.questions]
    logs = inspect_eval(Task(dataset=dataset, solver=generate(), scorer=match(), epochs=epochs),
                        model=get_model("mockllm/model", custom_outputs=outs), log_dir=str(log_dir),
                        display="none", max_samples=1)
    assert logs[0].status == "success"
    return logs[0].location


def completions(log_path):
    """(question id, epoch) -> completion, read back with inspect_ai's reader: the test's own truth."""
    from inspect_ai.log import read_eval_log

    return {(str(s.id), s.epoch): s.output.completion for s in read_eval_log(log_path).samples}


def right(text, gold):
    return re.search(r"#### (\d+)", text).group(1) == gold


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inspect")
    task_path = write_task(tmp / "t.jsonl", N)
    task = load_task(str(task_path))
    log = make_inspect_log(tmp / "logs", task)
    return tmp, task_path, task, log


def _attempts(store_path, run):
    with Store(store_path, readonly=True) as store:
        rows = store.conn.execute(
            "SELECT q.qid, a.probe, a.attempt, a.correct, a.text FROM attempts a "
            "JOIN questions q ON q.id = a.question_id WHERE a.run_id = ?", (run,)).fetchall()
    return {(r[0], r[1], r[2]): (bool(r[3]), r[4]) for r in rows}



def _import(args):
    res = CliRunner().invoke(cli, ["import", *args])
    assert res.exit_code == 0, res.output
    return int(re.search(r"^run (\d+)$", res.stdout, re.M).group(1)), res


def test_epochs_are_sample_attempts_and_the_first_epoch_is_realized(setup, tmp_path):
    _tmp, task_path, task, log = setup
    store = tmp_path / "s.sqlite"
    run, res = _import([log, "--task", str(task_path), "--store", str(store), "--model", "mock"])
    truth = completions(log)
    gold = {q.id: q.answer for q in task.questions}
    got = _attempts(store, run)
    assert len(got) == N + N * EPOCHS
    for (qid, epoch), text in truth.items():
        assert got[(qid, "sample", epoch - 1)] == (right(text, gold[qid]), text)
        if epoch == 1:
            assert got[(qid, "realized", 0)] == (right(text, gold[qid]), text)
    realized = sum(right(truth[(q, 1)], gold[q]) for q in gold)
    reachable = sum(any(right(truth[(q, e)], gold[q]) for e in range(1, EPOCHS + 1)) for q in gold)
    assert 0 < realized < N and realized < reachable  # the log is built so both differ
    out = CliRunner().invoke(cli, ["export", "summary", "--run", str(run), "--store", str(store),
                                   "--format", "json"])
    assert out.exit_code == 0, out.output
    row = next(r for r in json.loads(out.stdout) if r["probe"] == "sample")
    assert row["realized"] == pytest.approx(realized / N)
    assert row["reachable"] == pytest.approx(reachable / N)
    with Store(store, readonly=True) as s:
        proto = json.loads(s.conn.execute("SELECT protocol_json FROM runs WHERE id = ?", (run,)).fetchone()[0])
        note = s.conn.execute("SELECT note FROM runs WHERE id = ?", (run,)).fetchone()[0]
    assert "realized = epoch 1 of each Inspect sample" in proto["template"]
    assert "inspect; realized = epoch 1" in note


def test_realized_epoch_picks_another_epoch_and_another_protocol(setup, tmp_path):
    _tmp, task_path, task, log = setup
    store = tmp_path / "s.sqlite"
    one, _ = _import([log, "--task", str(task_path), "--store", str(store)])
    two, _ = _import([log, "--task", str(task_path), "--store", str(store), "--realized-epoch", "2"])
    truth = completions(log)
    got = _attempts(store, two)
    for q in task.questions:
        assert got[(q.id, "realized", 0)][1] == truth[(q.id, 2)]
    with Store(store, readonly=True) as s:
        hashes = [s.conn.execute("SELECT protocol_hash FROM runs WHERE id = ?", (r,)).fetchone()[0]
                  for r in (one, two)]
    assert hashes[0] != hashes[1]
    code, _out, err = run_main(["import", log, "--task", str(task_path), "--store", str(store),
                                "--realized-epoch", "4"])
    assert code == 2 and err.count("\n") == 1 and "has no epoch 4" in err


def test_an_inspect_run_compares_against_a_reachtui_audit_of_the_same_questions(setup, tmp_path):
    _tmp, task_path, task, log = setup
    store = tmp_path / "s.sqlite"
    protocol = Protocol(probes=(ProbeSpec("sample", budget=EPOCHS),), seed=2)
    with Store(store) as s:
        audit = run_audit(s, FakeRunner(), model_name="fake", task=task, protocol=protocol).run_id
    proto_file = tmp_path / "p.toml"
    proto_file.write_text(protocol_to_toml(protocol))
    imported, _ = _import([log, "--task", str(task_path), "--store", str(store), "--format", "inspect",
                           "--protocol", str(proto_file), "--model", "mock"])
    res = CliRunner().invoke(cli, ["compare", str(audit), str(imported), "--store", str(store),
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    row = next(r for r in json.loads(res.stdout) if r["probe"] == "sample")
    assert row["matched"] is True and row["n"] == N
    a, b = _attempts(store, audit), _attempts(store, imported)
    ra = {q.id: a[(q.id, "realized", 0)][0] for q in task.questions}
    rb = {q.id: b[(q.id, "realized", 0)][0] for q in task.questions}
    assert row["realized_a"] == pytest.approx(sum(ra.values()) / N)
    assert row["realized_b"] == pytest.approx(sum(rb.values()) / N)
    hb = {q.id: any(b[(q.id, "sample", j)][0] for j in range(EPOCHS)) for q in task.questions}
    assert row["reachable_b"] == pytest.approx(sum(hb.values()) / N)


def test_not_an_inspect_log_is_one_line(tmp_path, setup):
    _tmp, task_path, _task, _log = setup
    junk = tmp_path / "x.eval"
    junk.write_bytes(b"not a zip")
    code, _out, err = run_main(["import", str(junk), "--task", str(task_path), "--store", str(tmp_path / "s.sqlite")])
    assert code == 2
    assert err.count("\n") == 1 and "not a readable Inspect log" in err, err
    assert not (tmp_path / "s.sqlite").exists()  # nothing written
