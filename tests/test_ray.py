"""`reachtui audit --ray` on a local Ray (2 CPUs, 2 workers of 1 thread): the same attempts as a plain run
with the same seed and thread count; a worker killed mid-job is re-run without duplicates; bad input and a
missing Ray are one line each."""

import logging
import os
import sqlite3

import pytest
from click.testing import CliRunner

from reachtui.cli import cli, main

AUDIT = ["audit", "demo", "--task", "demo", "--limit", "6", "--probes", "realized,sample,routes,mcts", "--budget",
         "3", "--mlp-scan", "sample", "--batch-size", "4", "--device", "cpu", "--threads", "1"]


def _audit(store, *extra):
    """`reachtui audit` in this process (so that it uses the test's Ray), leaving the thread count as it was."""
    import torch

    threads = torch.get_num_threads()
    env = {var: os.environ.get(var) for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    try:
        return CliRunner().invoke(cli, [*AUDIT, "--store", str(store), *extra])
    finally:
        torch.set_num_threads(threads)
        for var, value in env.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def _flat(text: str) -> str:
    return " ".join(text.split())       # rich wraps long lines at the terminal's width


def _contents(path):
    con = sqlite3.connect(path)
    try:
        return (con.execute(
            "SELECT q.qid, probe, attempt, route, silenced, text, answer, rule, correct, "
            "mean_logprob, new_tokens, layers_executed, compute FROM attempts a JOIN questions q ON q.id = "
            "a.question_id ORDER BY q.qid, probe, attempt").fetchall(),
                con.execute("SELECT f.name, group_concat(q.qid) FROM failure_sets f LEFT JOIN failure_set_members m "
                            "ON m.set_id = f.id LEFT JOIN questions q ON q.id = m.question_id GROUP BY f.name "
                            "ORDER BY f.name").fetchall(),
                con.execute("SELECT layer, failure_n, repaired, realized_n, broken FROM mlp_scan ORDER BY layer")
                .fetchall(),
                con.execute("SELECT status FROM runs").fetchall())
    finally:
        con.close()


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    store = tmp_path_factory.mktemp("plain") / "s.sqlite"
    r = _audit(store)
    assert r.exit_code == 0, r.output
    contents = _contents(store)
    assert len(contents[0]) == 92 and contents[3] == [("complete",)] and contents[2]
    return contents


@pytest.mark.slow
def test_ray_audit_equals_plain_audit(ray_local, plain, tmp_path):
    r = _audit(tmp_path / "s.sqlite", "--ray")
    assert r.exit_code == 0, r.output
    assert "loaded on 2 Ray worker(s) of 1 thread(s)" in _flat(r.stderr)
    assert "run 1: complete" in _flat(r.stdout)
    assert _contents(tmp_path / "s.sqlite") == plain


@pytest.mark.slow
def test_a_worker_killed_mid_job_is_rerun_without_duplicates(ray_local, plain, tmp_path, monkeypatch):
    marker = tmp_path / "killed"
    monkeypatch.setenv("REACHTUI_TEST_KILL_WORKER", str(marker))   # the first call of several interventions
    r = _audit(tmp_path / "s.sqlite", "--ray")
    assert r.exit_code == 0, r.output
    assert marker.exists()
    # the routes probe's first job: 4 questions x 3 routes, one route stored before the worker died
    assert ("a Ray worker was lost mid-job (ActorUnavailableError): 1 of 3 interventions were done, 2 sent again"
            in _flat(r.stderr))
    assert _contents(tmp_path / "s.sqlite") == plain


@pytest.mark.slow
def test_the_contracts_generate_runs_on_a_worker_as_it_runs_here(ray_local):
    """`RayRunner.generate` and `generate_many` (`reachtui.generation.Runner`'s calls: one engine call on a
    worker) give the generations the model's runner gives in this process, with the same thread count."""
    import torch

    from reachtui.cluster import RayRunner
    from reachtui.generation import Decoding
    from reachtui.intervention import Intervention
    from reachtui.model.run import load_runner

    prompts = ["Question: What is 3 + 4?\nAnswer:", "Question: What is 12 + 30?\nAnswer:"]
    ivs = [None, Intervention(silenced=frozenset({2}))]
    dec = Decoding(max_new_tokens=8, temperature=1.0)
    threads = torch.get_num_threads()
    try:
        here = load_runner("demo", threads=1, device="cpu")
        want = [here.generate(prompts, decoding=dec, seeds=[3, 4]),
                here.generate_many(prompts, ivs, decoding=dec, seeds=[[5], [6, 7]], rows=[[1], [0, 1]])]
    finally:
        torch.set_num_threads(threads)
    done = []
    with RayRunner("demo", workers=1, threads=1, device="cpu") as there:
        got = [there.generate(prompts, decoding=dec, seeds=[3, 4]),
               there.generate_many(prompts, ivs, decoding=dec, seeds=[[5], [6, 7]], rows=[[1], [0, 1]],
                                   on_done=lambda i, gens: done.append(i))]
    assert got == want and sorted(done) == [0, 1]


@pytest.mark.slow
def test_a_job_that_keeps_killing_its_worker_fails_with_one_line(ray_local):
    from reachtui.engine.plan import Call
    from reachtui.cluster import RETRIES, stream_calls
    from reachtui.errors import ReachError

    @ray_local.remote(num_cpus=1, max_restarts=RETRIES, max_task_retries=0)
    class Crashes:
        def run(self, call):
            os._exit(1)
            yield

    actor = Crashes.remote()
    call = Call(["2 + 2 ="], [(None, frozenset())], None, [[0]], 1)
    with pytest.raises(ReachError, match=f"^a generation job lost its Ray worker {RETRIES} times .*resumable$"):
        list(stream_calls(ray_local, [actor], [call]))
    ray_local.kill(actor)


@pytest.mark.parametrize("args,msg", [
    (["--ray", "not an address"], "--ray 'not an address': give no value (start Ray here), auto"),
    (["--ray", "ray://head:10001"], "--ray ray://head:10001: Ray Client is not supported"),
    (["--workers", "2"], "--workers needs --ray"),
    (["--ray", "--workers", "0"], "--workers must be at least 1, not 0"),
    (["--ray", "auto", "--device-map", "auto"], "--device-map and --ray"),
    (["--ray", "--device", "cuda:1"], "--device cuda:1 with --ray: use auto, cpu or cuda"),
    (["--ray", "--no-ray-installed"], "--ray needs Ray: pip install 'reachtui[ray]'"),
])
def test_bad_ray_input_is_one_line_before_the_store_is_touched(tmp_path, monkeypatch, capsys, args, msg):
    if "--no-ray-installed" in args:
        args = [a for a in args if a != "--no-ray-installed"]
        monkeypatch.setitem(__import__("sys").modules, "ray", None)      # import ray -> ImportError
    with pytest.raises(SystemExit) as exit_:
        main(["audit", "demo", "--task", "demo", "--store", str(tmp_path / "s.sqlite"), *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith(f"error: {msg}") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.sqlite").exists()


def test_load_tokenizer_is_the_models_own():
    from reachtui.model.load import load_model, load_tokenizer

    tok = load_tokenizer("demo")
    assert tok("12 + 30 =")["input_ids"] == load_model("demo", device="cpu").tokenizer("12 + 30 =")["input_ids"]
