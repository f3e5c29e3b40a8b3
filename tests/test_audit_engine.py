"""The audit engine with a fake runner: plans, batching, resume, determinism, and the summary's numbers
recomputed from the attempts table with plain SQL."""

import math
import threading
from fractions import Fraction

import pytest

from fake_runner import FakeRunner, write_task
from reachtui.engine.audit import run_audit
from reachtui.errors import ReachError
from reachtui.intervention import Intervention
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tables import mlp_best
from reachtui.tables import summary_rows as summarize
from reachtui.tasks import load_task
import reference  # noqa: E402

PROBES = (ProbeSpec("sample", budget=4), ProbeSpec("routes", budget=4), ProbeSpec("mcts", budget=4),
          ProbeSpec("mcts-blind", budget=3))


@pytest.fixture
def task(tmp_path):
    return load_task(str(write_task(tmp_path / "t.jsonl", 12)))


def audit(store, task, protocol=None, runner=None, **kw):
    protocol = protocol or Protocol(probes=PROBES, seed=3)
    runner = runner or FakeRunner()
    kw.setdefault("batch_size", 5)
    return run_audit(store, runner, model_name="fake", task=task, protocol=protocol, **kw)


def _plain(rows):
    return repr(rows)        # NaN-safe equality (nan != nan, but its repr is stable)


def attempts_of(store, run_id):
    return [tuple(r) for r in store.conn.execute(
        "SELECT q.qid, probe, attempt, route, silenced, text, answer, rule, correct, "
        "mean_logprob, new_tokens, layers_executed, compute FROM attempts a JOIN questions q ON q.id = a.question_id "
        "WHERE run_id = ? ORDER BY q.qid, probe, attempt", (run_id,))]


def test_full_audit_rows_and_summary_match_plain_sql(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    res = audit(store, task, mlp_scan="sample")
    assert res.status == "complete" and not res.resumed
    rid = res.run_id
    assert store.get_run(rid)["status"] == "complete"
    q = lambda sql, *a: store.conn.execute(sql, (rid, *a)).fetchall()  # noqa: E731
    counts = dict(q("SELECT probe, count(*) FROM attempts WHERE run_id = ? AND probe NOT LIKE 'mlp:%' GROUP BY probe"))
    assert counts == {"realized": 12, "sample": 48, "routes": 48, "mcts": 48, "mcts-blind": 36}

    n = 12
    realized = q("SELECT count(*) FROM attempts WHERE run_id = ? AND probe = 'realized' AND correct = 1")[0][0] / n
    rows = {r["probe"]: r for r in summarize(store, rid)}
    assert rows["realized"]["realized"] == pytest.approx(realized)
    for probe in ("sample", "routes", "mcts", "mcts-blind"):
        reach = q("SELECT count(*) FROM (SELECT question_id FROM attempts WHERE run_id = ? AND probe = ? "
                  "GROUP BY question_id HAVING max(correct) = 1)", probe)[0][0] / n
        assert rows[probe]["reachable"] == pytest.approx(reach), probe
        assert rows[probe]["gap"] == pytest.approx(reach - realized)
        # failure set = reachable and not realized, by SQL, equals the frozen set
        fail_sql = {r[0] for r in q(
            "SELECT a.question_id FROM attempts a WHERE a.run_id = ? AND a.probe = ? GROUP BY a.question_id "
            "HAVING max(a.correct) = 1 AND a.question_id IN (SELECT question_id FROM attempts WHERE run_id = ?1 "
            "AND probe = 'realized' AND correct = 0)", probe)}
        fs = store.get_failure_set(rid, f"failure:{probe}")
        assert set(store.failure_set_members(fs["id"])) == fail_sql
        assert rows[probe]["failure"] == len(fail_sql)
        # first hits (reachable@k) from SQL
        if probe != "sample":
            hits = dict(q("SELECT question_id, min(attempt) FROM attempts WHERE run_id = ? AND probe = ? "
                          "AND correct = 1 GROUP BY question_id", probe))
            K = rows[probe]["budget"]
            assert rows[probe]["reachable_at_k"] == pytest.approx(
                [sum(1 for h in hits.values() if h < k) / n for k in range(1, K + 1)])
    # pass@k from SQL counts against the closed form
    per_q = q("SELECT count(*), sum(correct) FROM attempts WHERE run_id = ? AND probe = 'sample' GROUP BY question_id")
    for k in range(1, 5):
        expected = sum(float(1 - Fraction(math.comb(nn - c, k), math.comb(nn, k))) for nn, c in per_q) / n
        assert rows["sample"]["pass_at_k"][k - 1] == pytest.approx(expected)
    # blind logprob from SQL: the max-logprob attempt's correctness (ties: earliest)
    blind = 0
    for (qid,) in q("SELECT DISTINCT question_id FROM attempts WHERE run_id = ? AND probe = 'routes'"):
        blind += store.conn.execute(
            "SELECT correct FROM attempts WHERE run_id = ? AND probe = 'routes' AND question_id = ? "
            "ORDER BY mean_logprob DESC, attempt LIMIT 1", (rid, qid)).fetchone()[0]
    assert rows["routes"]["blind_logprob"] == pytest.approx(blind / n)
    # the MLP scan: every layer, on F ∪ R, with repaired/broken from the mlp:<L> rows
    fs = store.get_failure_set(rid, "failure:sample")
    F = set(store.failure_set_members(fs["id"]))
    R = {r[0] for r in q("SELECT question_id FROM attempts WHERE run_id = ? AND probe = 'realized' AND correct = 1")}
    scan = store.mlp_scan(rid)
    assert [r["layer"] for r in scan] == list(range(8))
    for r in scan:
        got = dict(q("SELECT question_id, correct FROM attempts WHERE run_id = ? AND probe = ?", f"mlp:{r['layer']}"))
        assert set(got) == F | R
        assert r["repaired"] == sum(got[x] for x in F)
        assert r["broken"] == sum(1 - got[x] for x in R)
    assert F and R
    best = mlp_best(store, rid)[0]
    assert best["repair_rate"] == max(r["repair_rate"] for r in scan)
    top = [r for r in scan if r["repair_rate"] == best["repair_rate"]]
    assert best["break_rate"] == min(r["break_rate"] for r in top)


def test_routes_shared_pool_batches_one_route_over_all_questions(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    runner = FakeRunner()
    proto = Protocol(probes=(ProbeSpec("routes", budget=4),), seed=1)
    res = audit(store, task, proto, runner, batch_size=64)
    routed = [c for c in runner.calls if c[1] != tuple(range(8))]
    assert len(routed) == 4 and all(c[0] == 12 for c in routed)
    routes = store.conn.execute("SELECT attempt, count(DISTINCT route), count(*) FROM attempts WHERE run_id = ? "
                                   "AND probe = 'routes' GROUP BY attempt", (res.run_id,)).fetchall()
    assert all(d == 1 and c == 12 for _, d, c in routes)


def test_routes_per_question_mode(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    proto = Protocol(probes=(ProbeSpec("routes", budget=4),), routes_mode="per_question", seed=1)
    res = audit(store, task, proto)
    per_q = store.conn.execute("SELECT question_id, group_concat(route, ';') FROM attempts WHERE run_id = ? "
                                  "AND probe = 'routes' GROUP BY question_id", (res.run_id,)).fetchall()
    assert len({r for _, r in per_q}) > 1


def test_two_runs_same_protocol_and_seed_are_identical(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    a = audit(store, task, mlp_scan="routes")
    b = audit(store, task, mlp_scan="routes", new=True)
    assert a.run_id != b.run_id
    assert attempts_of(store, a.run_id) == attempts_of(store, b.run_id)
    c = audit(store, task, Protocol(probes=PROBES, seed=4), new=True)
    assert attempts_of(store, c.run_id) != attempts_of(store, a.run_id)


def cancel_after(n: int):
    """(on_event, cancel): cancel is set once `n` progress events have reported generated attempts."""
    cancel = threading.Event()
    seen = []

    def on_event(ev):
        if ev.generated:
            seen.append(ev)
        if len(seen) >= n:
            cancel.set()

    return on_event, cancel


@pytest.mark.parametrize("stop_after", [1, 4, 9, 17, 30])
def test_cancel_then_resume_equals_uninterrupted(tmp_path, task, stop_after):
    ref_store = Store(tmp_path / "ref.sqlite")
    ref = audit(ref_store, task, mlp_scan="mcts")
    store = Store(tmp_path / "s.sqlite")
    on_event, cancel = cancel_after(stop_after)
    first = audit(store, task, mlp_scan="mcts", on_event=on_event, cancel=cancel)
    assert first.status == "cancelled"
    assert store.get_run(first.run_id)["status"] == "cancelled"
    second = audit(store, task, mlp_scan="mcts")
    assert second.resumed and second.run_id == first.run_id and second.status == "complete"
    assert attempts_of(store, first.run_id) == attempts_of(ref_store, ref.run_id)
    assert _plain(summarize(store, first.run_id)) == _plain(summarize(ref_store, ref.run_id))
    got = [(r["layer"], r["repaired"], r["broken"]) for r in store.mlp_scan(first.run_id)]
    want = [(r["layer"], r["repaired"], r["broken"]) for r in ref_store.mlp_scan(ref.run_id)]
    assert got == want


class WorkersRunner(FakeRunner):
    """A runner with workers of its own (`run_calls`, like reachtui.cluster.RayRunner) that finishes the calls
    last first, and each call's interventions last first: results come back out of plan order."""

    def run_calls(self, calls, cancel=None):
        self.sizes = getattr(self, "sizes", []) + [len(calls)]
        for c in reversed(range(len(calls))):
            done: list[tuple] = []
            calls[c].run(self, lambda i, gens, done=done: done.append((i, gens)))
            for i, gens in reversed(done):
                if cancel is not None and cancel.is_set():
                    return
                yield c, i, gens


def test_a_runner_with_workers_gives_the_attempts_of_a_local_run(tmp_path, task):
    ref_store = Store(tmp_path / "ref.sqlite")
    ref = audit(ref_store, task, mlp_scan="sample")
    store = Store(tmp_path / "s.sqlite")
    runner = WorkersRunner()
    res = audit(store, task, runner=runner, mlp_scan="sample")
    assert res.status == "complete"
    assert attempts_of(store, res.run_id) == attempts_of(ref_store, ref.run_id)
    assert store.mlp_scan(res.run_id) == ref_store.mlp_scan(ref.run_id)
    assert max(runner.sizes) > 1          # a phase's (an MCTS round's) calls go to the workers together


def test_a_runner_with_workers_stops_on_cancel_and_resumes(tmp_path, task):
    ref_store = Store(tmp_path / "ref.sqlite")
    ref = audit(ref_store, task, mlp_scan="mcts")
    store = Store(tmp_path / "s.sqlite")
    on_event, cancel = cancel_after(5)
    first = audit(store, task, runner=WorkersRunner(), mlp_scan="mcts", on_event=on_event, cancel=cancel)
    assert first.status == "cancelled"
    assert 0 < len(attempts_of(store, first.run_id)) < len(attempts_of(ref_store, ref.run_id))
    second = audit(store, task, runner=WorkersRunner(), mlp_scan="mcts")
    assert second.resumed and second.status == "complete"
    assert attempts_of(store, first.run_id) == attempts_of(ref_store, ref.run_id)


def test_mcts_distinct_budget_and_first_hit(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    res = audit(store, task)
    rows = store.conn.execute("SELECT question_id, count(*), count(DISTINCT route), "
                                 "min(CASE WHEN correct = 1 THEN attempt END) FROM attempts WHERE run_id = ? "
                                 "AND probe = 'mcts' GROUP BY question_id", (res.run_id,)).fetchall()
    assert len(rows) == 12
    assert all(n == 4 and d == 4 for _, n, d, _ in rows)
    hits = {q: None if h is None else h + 1 for q, _, _, h in rows}   # first hit: 1-based k
    status = {r["question_id"]: r["first_hit"] for r in reference.question_status(store, res.run_id, ["mcts"])}
    assert status == hits
    ident = ",".join(["0-7"])
    assert not store.conn.execute("SELECT 1 FROM attempts WHERE run_id = ? AND probe LIKE 'mcts%' AND route = ?",
                                     (res.run_id, ident)).fetchone()


def test_mcts_resume_replays_stored_attempts(tmp_path, task):
    """Delete the tail of some questions' MCTS attempts (as a kill would lose them) and resume."""
    ref_store = Store(tmp_path / "ref.sqlite")
    ref = audit(ref_store, task)
    store = Store(tmp_path / "s.sqlite")
    res = audit(store, task)
    with store.transaction():
        store.db.execute("DELETE FROM attempts WHERE run_id = ? AND probe = 'mcts' AND attempt >= 2", (res.run_id,))
        store.db.execute("DELETE FROM failure_sets WHERE run_id = ?", (res.run_id,))
    store.set_run_status(res.run_id, "running")
    runner = FakeRunner()
    again = audit(store, task, runner=runner)
    assert again.resumed and again.generated == 12 * 2
    assert attempts_of(store, res.run_id) == attempts_of(ref_store, ref.run_id)


def test_mixed_phases_let_the_runner_forget_kept_prefills(tmp_path, task):
    """After the MCTS phases and per-question routes (mixed calls), the runner is told it may drop the
    prompts' prefills it kept across their calls."""

    class Forgetting(FakeRunner):
        forgotten = 0

        def forget_prefixes(self):
            self.forgotten += 1

    runner = Forgetting()
    audit(Store(tmp_path / "s.sqlite"), task, runner=runner)
    assert runner.forgotten == 2                      # mcts, mcts-blind
    runner = Forgetting()
    audit(Store(tmp_path / "p.sqlite"), task, Protocol(probes=(ProbeSpec("routes", budget=3),), seed=3,
                                                       routes_mode="per_question"), runner=runner)
    assert runner.forgotten == 1


def test_mcts_replay_mismatch_is_one_clear_error(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    res = audit(store, task)
    with store.transaction():
        store.db.execute("UPDATE attempts SET route = '0-3,5-7' WHERE run_id = ? AND probe = 'mcts' AND attempt = 0",
                         (res.run_id,))
    with pytest.raises(ReachError, match="do not replay"):
        audit(store, task, run_id=res.run_id)


def test_other_protocol_on_given_run_is_refused(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    res = audit(store, task, Protocol(probes=PROBES, seed=3))
    with pytest.raises(ReachError, match=r"differs in: seed"):
        audit(store, task, Protocol(probes=PROBES, seed=9), run_id=res.run_id)
    with pytest.raises(ReachError, match="limit"):
        audit(store, task, Protocol(probes=PROBES, seed=3), run_id=res.run_id, limit=3)
    # without --run, another protocol is simply another run
    other = audit(store, task, Protocol(probes=PROBES, seed=9))
    assert other.run_id != res.run_id and not other.resumed


def test_complete_run_is_not_resumed_but_a_new_one_starts(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    a = audit(store, task, limit=5)
    b = audit(store, task, limit=5)
    assert b.run_id != a.run_id
    assert store.get_run(a.run_id)["n_questions"] == 5


def test_mlp_scan_added_later_to_a_complete_run(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    a = audit(store, task)
    assert not store.mlp_scan(a.run_id)
    runner = FakeRunner()
    b = audit(store, task, runner=runner, run_id=a.run_id, mlp_scan="routes")
    assert b.status == "complete" and store.mlp_scan(b.run_id)
    assert all(c[2] for c in runner.calls)          # only silenced generations were needed


def test_mlp_scan_needs_a_probe_of_the_run(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    with pytest.raises(ReachError, match="not in this run"):
        audit(store, task, Protocol(probes=(ProbeSpec("sample", budget=2),)), mlp_scan="routes")


def test_progress_events_cover_every_phase(tmp_path, task):
    store = Store(tmp_path / "s.sqlite")
    events = []
    audit(store, task, on_event=events.append, mlp_scan="sample")
    phases = list(dict.fromkeys(e.phase for e in events))
    assert phases == ["realized", "sample", "routes", "mcts", "mcts-blind", "failure_sets", "mlp_scan", "done"]
    last = {}
    for e in events:
        last[e.phase] = e
    assert last["sample"].done == last["sample"].total == 48
    assert last["mcts"].done == last["mcts"].total == 48


def test_failure_mid_run_marks_failed_and_resumes(tmp_path, task):
    class Boom(FakeRunner):
        def generate(self, prompts, intervention=None, **kw):
            if len(self.calls) == 6:
                raise RuntimeError("boom")
            return super().generate(prompts, intervention, **kw)

    store = Store(tmp_path / "s.sqlite")
    with pytest.raises(RuntimeError):
        audit(store, task, runner=Boom())
    run = store.latest_run()
    assert run["status"] == "failed"
    again = audit(store, task)
    assert again.run_id == run["id"] and again.status == "complete"
    ref_store = Store(tmp_path / "ref.sqlite")
    ref = audit(ref_store, task)
    assert attempts_of(store, run["id"]) == attempts_of(ref_store, ref.run_id)


def test_batch_size_is_estimated_stored_and_kept_on_resume(tmp_path, task):
    """No --batch-size: the runner's estimate sizes the jobs and is stored with the run (and why); a resumed
    run keeps it even if the estimate changed; an explicit --batch-size wins and is recorded."""
    class Sized(FakeRunner):
        def __init__(self, size):
            super().__init__()
            self.size = size

        def suggest_batch_size(self, prompts, max_new_tokens, route_len):
            assert len(prompts) == 12 and route_len == math.floor(1.2 * 8)
            return self.size, "fake memory"

    store = Store(tmp_path / "s.sqlite")
    cancel = threading.Event()
    first = Sized(3)
    res = audit(store, task, runner=first, batch_size=None, cancel=cancel,
                on_event=lambda ev: cancel.set() if ev.phase == "sample" and ev.generated else None)
    assert res.status == "cancelled"
    assert max(n for n, *_ in first.calls) == 3
    assert store.get_run(res.run_id)["batch_size"] == 3
    second = Sized(7)
    assert audit(store, task, runner=second, batch_size=None).status == "complete"
    assert max(n for n, *_ in second.calls) == 3                  # the run's own size, not the new estimate
    events = [(e["kind"], e["detail"]) for e in store.run_events(res.run_id)]
    assert events == [("batch_size", "3 (auto: fake memory)")]
    ref_store = Store(tmp_path / "ref.sqlite")
    ref = audit(ref_store, task, batch_size=3)
    assert attempts_of(store, res.run_id) == attempts_of(ref_store, ref.run_id)
    assert [(e["kind"], e["detail"]) for e in ref_store.run_events(ref.run_id)] == [("batch_size", "3 (--batch-size)")]


def test_out_of_memory_halving_is_recorded_and_the_run_goes_on(tmp_path, task):
    class Tight(FakeRunner):
        batch_size_hint = None

        def generate(self, prompts, intervention=None, **kw):
            if len(self.calls) == 4:
                self.batch_size_hint = 2          # what Runner does when a batch ran out of memory
            return super().generate(prompts, intervention, **kw)

    store = Store(tmp_path / "s.sqlite")
    res = audit(store, task, runner=Tight())
    assert res.status == "complete"
    ooms = [e["detail"] for e in store.run_events(res.run_id) if e["kind"] == "out_of_memory"]
    assert ooms == ["out of memory in sample: generation batches halved to 2 prompts"]


def test_each_exported_temperature_and_seed_regenerates_its_attempt(tmp_path, task):
    """The store keeps no temperature or seed: the attempts export recomputes both from the protocol. Fed
    back to the runner, each exported (temperature, seed) gives the stored text, for every kind of attempt:
    sampled probes with their own temperatures, the MLP scan and two explorations (one MLP: the scan's seed
    stream; a route: its own) under a sampling default decoding."""
    from reachtui.engine.mlp import apply
    from reachtui.generation import Decoding
    from reachtui.tables import build_table

    store = Store(tmp_path / "s.sqlite")
    protocol = Protocol(probes=(ProbeSpec("sample", budget=4), ProbeSpec("routes", budget=3, temperature=0.7)),
                        temperature=0.5, seed=3)
    rid = audit(store, task, protocol, mlp_scan="sample").run_id
    apply(store, FakeRunner(), rid, "sample", Intervention(None, frozenset({2})))
    apply(store, FakeRunner(), rid, "sample", Intervention((0, 1, 2, 2, 3, 4, 5, 6, 7), frozenset({1, 3})))
    rows = build_table(store, "attempts", [rid]).dicts()
    prompts = {q.id: protocol.render_prompt(q.question) for q in task.questions}
    runner = FakeRunner()

    def text(row, seed):
        decoding = Decoding.of(protocol, row["temperature"], 1.0)
        return runner.generate([prompts[row["question_id"]]], Intervention.parse(row["route"], row["silenced"], 8),
                               decoding=decoding, seeds=[seed])[0].text

    kinds = {row["probe"].split(":")[0] for row in rows}
    assert kinds == {"realized", "sample", "routes", "mlp", "explore"}
    temperatures = {(row["probe"].split(":")[0], row["temperature"]) for row in rows}
    assert temperatures == {("realized", 0.5), ("sample", 1.0), ("routes", 0.7), ("mlp", 0.5), ("explore", 0.5)}
    assert all(isinstance(row["seed"], int) for row in rows)
    assert [row for row in rows if text(row, row["seed"]) != row["text"]] == []
    assert sum(text(row, row["seed"] + 1) != row["text"] for row in rows) > len(rows) / 2   # the seed matters


def test_the_apply_job_without_the_app_repeats_the_mlp_scan_row_for_its_layer(tmp_path, task):
    """The app's apply job is an engine job: run with no app, silencing one MLP on failure:sample gives
    the MLP scan's repaired/broken counts for that layer and the very same attempts (texts and grades)."""
    from reachtui.engine.mlp import apply

    store = Store(tmp_path / "s.sqlite")
    rid = audit(store, task, Protocol(probes=PROBES, seed=3, temperature=0.5), mlp_scan="sample").run_id
    scan = {r["layer"]: r for r in store.mlp_scan(rid)}
    for layer in (0, 5):
        done = apply(store, FakeRunner(), rid, "sample", Intervention(None, frozenset({layer})))
        assert done.status == "complete"
        row = scan[layer]
        assert (done.extra["repaired"], done.extra["failure_n"], done.extra["broken"], done.extra["realized_n"]) == \
            (row["repaired"], row["failure_n"], row["broken"], row["realized_n"])
        attempts = lambda probe: store.conn.execute(  # noqa: E731
            "SELECT question_id, text, correct FROM attempts WHERE run_id = ? AND probe = ? ORDER BY question_id",
            (rid, probe)).fetchall()
        assert attempts(f"explore:{done.extra['exploration_id']}") == attempts(f"mlp:{layer}") != []


def test_what_the_runner_has_to_say_becomes_one_run_event(tmp_path, task):
    """A runner's notes (e.g. the GPU's decoding steps fell back to eager ones) are told to the run once, as
    events the audit prints and `runs --json` lists."""

    class Noting(FakeRunner):
        def __init__(self):
            super().__init__()
            self.notes = ["decoding steps run eagerly: a CUDA graph could not be captured (test)"]

        def take_notes(self):
            notes, self.notes = self.notes, []
            return notes

    store = Store(tmp_path / "s.sqlite")
    res = audit(store, task, Protocol(probes=(ProbeSpec("sample", budget=2),), seed=3), runner=Noting())
    events = [e for e in store.run_events(res.run_id) if e["kind"] == "engine"]
    assert [e["detail"] for e in events] == ["decoding steps run eagerly: a CUDA graph could not be captured (test)"]
