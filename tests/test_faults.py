"""Faults of the environment mid-work, and the requests that must not be done twice or at all:

- a full disk (a COMMIT that fails, and a real tmpfs that fills up) mid-audit and mid-import: one line,
  exit status 3, nothing half-written; after freeing space the same command finishes the run with exactly
  the attempts of an uninterrupted one (nothing lost, nothing duplicated);
- out of memory on the CPU: the batch halves as on a GPU; one prompt that cannot fit is an error line;
- a prompt longer than the model's positions is refused before anything is generated or stored;
- the same audit command on a complete run shows it and generates nothing (--new starts another);
- `reachtui open` on a model that cannot load says why in the app, instead of waiting for its layers.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import stored_audit

from fake_runner import FakeRunner, write_task
from reachtui.assets import DEMO_MODEL_DIR
from reachtui.engine.audit import run_audit
from reachtui.errors import EnvironmentFault, ReachError
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tasks import load_task

HAVE_DEMO = (DEMO_MODEL_DIR / "config.json").is_file()
PROTOCOL = Protocol(probes=(ProbeSpec("sample", budget=3), ProbeSpec("routes", budget=2)), seed=4)
FULL = "database or disk is full"


def attempts(path: Path):
    """What a run is made of, without ids and timestamps: its attempts, frozen sets and status."""
    audit = stored_audit(path)
    return audit["rows"], audit["sets"], audit["status"]


class FailingCommits:
    """Store._commit raising as SQLite does on a full disk, from the `after`-th commit on, until `heal()`."""

    def __init__(self, monkeypatch, after: int, times: int | None = None, message: str = FULL):
        self.real, self.after, self.times, self.n, self.failed = Store._commit, after, times, 0, 0
        owner = self

        def commit(store):
            owner.n += 1
            if owner.n >= owner.after and (owner.times is None or owner.failed < owner.times):
                owner.failed += 1
                raise sqlite3.OperationalError(message)
            owner.real(store)

        monkeypatch.setattr(Store, "_commit", commit)

    def heal(self) -> None:
        self.times = self.failed


@pytest.fixture
def one_thread(monkeypatch):
    """torch on one thread (on a busy 2-core machine a tiny model runs ~25x faster than on two), restored after."""
    import torch

    threads = torch.get_num_threads()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def task(tmp_path):
    return load_task(str(write_task(tmp_path / "t.jsonl", 10)))


def _audit(path: Path, task, **kw):
    with Store(path) as store:
        return run_audit(store, FakeRunner(), model_name="fake", task=task, protocol=PROTOCOL, batch_size=4, **kw)


@pytest.mark.parametrize("times,message,said", [
    (1, FULL, "disk holding the store .* is full"),
    (None, FULL, "disk holding the store .* is full"),
    (None, "attempt to write a readonly database", "cannot be written"),
], ids=["one-commit-fails", "every-commit-fails-until-freed", "read-only-until-fixed"])
def test_a_full_disk_mid_audit_is_resumable_with_nothing_lost_or_duplicated(tmp_path, task, monkeypatch, times,
                                                                            message, said):
    ref = tmp_path / "ref.sqlite"
    _audit(ref, task)
    want = attempts(ref)

    path = tmp_path / "s.sqlite"
    fail = FailingCommits(monkeypatch, after=9, times=times, message=message)
    with pytest.raises(EnvironmentFault, match=f"{said}.*run 1 stopped") as info:
        _audit(path, task)
    assert "\n" not in str(info.value) and info.value.exit_code == 3
    got = attempts(path)
    assert 0 < len(got[0]) < len(want[0])            # stopped mid-run, with whole interventions stored
    assert got[2] == [("failed",)] if times == 1 else [("running",)]    # 'failed' where that could be written
    assert set(got[0]) <= set(want[0])
    fail.heal()
    result = _audit(path, task)
    assert result.resumed and result.status == "complete"
    assert attempts(path) == want


def test_a_damaged_page_met_mid_audit_is_the_damaged_store_line_and_nothing_is_written(tmp_path, task, monkeypatch):
    """A read that meets a damaged page mid-run: the run is not marked failed (no write into a damaged store)."""
    from reachtui.errors import DamagedStore

    path = tmp_path / "s.sqlite"
    _audit(path, task, limit=2)
    real = Store.done_keys

    seen, after = [], []

    def malformed(self, *a, **k):
        seen.append(1)
        raise sqlite3.DatabaseError("database disk image is malformed")

    def commit(self):
        if seen:
            after.append(1)
        self.conn.execute("COMMIT")

    monkeypatch.setattr(Store, "done_keys", malformed)
    monkeypatch.setattr(Store, "_commit", commit)
    with pytest.raises(DamagedStore, match=r"is damaged \(database disk image is malformed\).*\.recover"):
        _audit(path, task, new=True)
    assert seen and not after        # nothing written once the damage showed
    assert attempts(path)[2] == [("complete",), ("running",)]
    monkeypatch.setattr(Store, "done_keys", real)


def test_a_failed_commit_leaves_nothing_of_its_transaction(tmp_path, task, monkeypatch):
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        FailingCommits(monkeypatch, after=1, times=1)
        with pytest.raises(EnvironmentFault, match="is full"):
            store.upsert_task(task)
        assert store.conn.execute("SELECT count(*) FROM questions").fetchone()[0] == 0
        assert not store.conn.in_transaction
        store.upsert_task(task)          # the next transaction works
        assert store.conn.execute("SELECT count(*) FROM questions").fetchone()[0] == 10


def test_a_full_disk_during_import_writes_nothing(tmp_path, monkeypatch, capsys):
    from reachtui.cli import main

    task_file = write_task(tmp_path / "t.jsonl", 4)
    gens = tmp_path / "g.jsonl"
    gens.write_text("".join(json.dumps({"question_id": f"q{i:03d}", "probe": p, "attempt": 0, "output": "#### 8"})
                            + "\n" for i in range(4) for p in ("realized", "sample")))
    store = tmp_path / "s.sqlite"
    Store(store).close()
    argv = ["import", str(gens), "--task", str(task_file), "--store", str(store)]
    fail = FailingCommits(monkeypatch, after=1)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 3 and err.count("\n") == 1 and "is full" in err
    assert attempts(store) == ([], [], [])
    fail.heal()
    main(argv)
    assert attempts(store)[2] == [("complete",)] and len(attempts(store)[0]) == 8


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


def _unmount(mnt: Path) -> None:
    """umount; if a file there is still held (a connection not yet collected), collect and retry, then
    detach it lazily: no mount outlives the test."""
    import gc

    for args in (["umount"], ["umount"], ["umount", "-l"]):
        if subprocess.run([*args, str(mnt)], capture_output=True).returncode == 0:
            return
        gc.collect()


def test_a_real_full_disk_then_resume(tmp_path):
    """A small tmpfs filled up mid-audit; the same audit, once space is freed, finishes the run exactly."""
    task = load_task(str(write_task(tmp_path / "t.jsonl", 30)))
    ref = tmp_path / "ref.sqlite"
    with Store(ref) as store:
        run_audit(store, FakeRunner(), model_name="fake", task=task, protocol=PROTOCOL, batch_size=4)
        wal = Path(str(ref) + "-wal").stat().st_size      # what the run wrote (WAL mode: to the -wal file)
    want = attempts(ref)
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "4m"):
        pytest.skip("cannot mount a tmpfs here (not root, or no mount)")
    try:
        path = mnt / "s.sqlite"
        Store(path).close()
        free = shutil.disk_usage(mnt).free
        filler = mnt / "filler"
        with open(filler, "wb") as fh:              # leave room for about a third of the run
            fh.write(b"\0" * max(0, free - wal // 3))
        with pytest.raises(EnvironmentFault, match="is full.*stopped"):
            _audit(path, task)
        got = attempts(path)
        assert 0 < len(got[0]) < len(want[0]) and set(got[0]) <= set(want[0])
        filler.unlink()
        result = _audit(path, task)
        assert result.resumed and result.status == "complete"
        assert attempts(path) == want
    finally:
        _unmount(mnt)


@pytest.mark.skipif(not HAVE_DEMO, reason="no demo model in assets/")
def test_the_audit_command_after_a_full_disk_finishes_the_run(tmp_path, monkeypatch, capsys, one_thread):
    from reachtui.cli import main

    task = write_task(tmp_path / "t.jsonl", 5)
    common = ["audit", "demo", "--task", str(task), "--probes", "sample,routes", "--budget", "2",
              "--max-new-tokens", "8", "--batch-size", "2", "--device", "cpu"]
    main(common + ["--store", str(tmp_path / "ref.sqlite")])
    want = attempts(tmp_path / "ref.sqlite")
    capsys.readouterr()

    store = tmp_path / "s.sqlite"
    fail = FailingCommits(monkeypatch, after=12)
    with pytest.raises(SystemExit) as exit_:
        main(common + ["--store", str(store)])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert exit_.value.code == 3 and len(errors) == 1, err
    assert "is full" in errors[0] and "run 1 stopped" in errors[0] and "Traceback" not in err
    assert 0 < len(attempts(store)[0]) < len(want[0])
    fail.heal()
    main(common + ["--store", str(store)])
    out = capsys.readouterr().out
    assert "run 1: resumed and complete" in " ".join(out.split())
    assert attempts(store) == want


# ------------------------------------------------------------------------------------- the same audit again


@pytest.mark.skipif(not HAVE_DEMO, reason="no demo model in assets/")
def test_the_same_audit_again_shows_the_complete_run_and_generates_nothing(tmp_path, monkeypatch, capsys,
                                                                         one_thread):
    from reachtui.cli import main
    import reachtui.model.load as load

    task = write_task(tmp_path / "t.jsonl", 4)
    store = tmp_path / "s.sqlite"
    common = ["audit", "demo", "--task", str(task), "--probes", "sample", "--budget", "2", "--max-new-tokens", "8",
              "--store", str(store), "--device", "cpu"]
    main(common)
    first = capsys.readouterr().out
    before = attempts(store)

    def no_loading(*a, **k):
        raise AssertionError("the model was loaded")

    real_load = load.load_model
    monkeypatch.setattr(load, "load_model", no_loading)
    main(common)          # exit 0: no SystemExit
    again = capsys.readouterr().out
    said = " ".join(again.split())
    assert "run 1: already complete" in said and "nothing generated" in said and "--new starts another run" in said
    assert first.split("batch size")[0] == again.split("batch size")[0]      # the same closing table
    assert attempts(store) == before
    main(common + ["--run", "1"])
    assert "run 1: already complete" in " ".join(capsys.readouterr().out.split())
    monkeypatch.setattr(load, "load_model", real_load)

    main(common + ["--new-run"])
    assert "run 2: complete" in " ".join(capsys.readouterr().out.split())
    assert [r[0] for r in attempts(store)[2]] == ["complete", "complete"]
    # a complete run without the MLP scan asked for gets it added, no new run
    main(common + ["--mlp-scan"])
    out = " ".join(capsys.readouterr().out.split())
    assert "run 2: resumed and complete" in out and "MLP scan on failure:sample" in out
    with Store(store, readonly=True) as st:
        assert len(st.run_ids()) == 2
        assert len(st.mlp_scan(2)) == 8 and not st.mlp_scan(1)


# ------------------------------------------------------------------------------------- out of memory on a CPU

CPU_OOM = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
           "to allocate 204800000069632 bytes. Error code 12 (Cannot allocate memory)")


def _tiny_runner():
    from engine_tiny import loaded

    from reachtui.model.run import Runner

    return Runner(loaded("llama"))


PROMPTS = ["12+7=? A:", "What is 3*4?", "hello there, friend: 5-2", "9-4=?"]


@pytest.mark.parametrize("error", [RuntimeError(CPU_OOM), MemoryError()], ids=["cpu-allocator", "MemoryError"])
def test_out_of_memory_on_a_cpu_halves_the_batch(monkeypatch, error, one_thread):
    from reachtui.generation import Decoding

    r = _tiny_runner()
    want = [g.token_ids for g in r.generate(PROMPTS, decoding=Decoding(max_new_tokens=4))]
    real, sizes = r._generate_batch, []

    def small_memory(ids, *a, **k):
        sizes.append(len(ids))
        if len(ids) > 1:
            raise error
        return real(ids, *a, **k)

    monkeypatch.setattr(r, "_generate_batch", small_memory)
    gens = r.generate(PROMPTS, decoding=Decoding(max_new_tokens=4), batch_size=4)
    assert sizes[:3] == [4, 2, 1] and r.batch_size_hint == 1
    assert [g.token_ids for g in gens] == want


def test_one_prompt_that_does_not_fit_in_memory_is_an_error_line(monkeypatch, one_thread):
    from reachtui.generation import Decoding

    r = _tiny_runner()

    def no_memory(*a, **k):
        raise RuntimeError(CPU_OOM)

    monkeypatch.setattr(r, "_generate_batch", no_memory)
    with pytest.raises(EnvironmentFault, match=r"out of memory on cpu even for one prompt \(\d+ tokens \+ 4 new"):
        r.generate(PROMPTS, decoding=Decoding(max_new_tokens=4), batch_size=4)


def test_mixed_batches_out_of_memory_on_a_cpu_shrink_instead_of_looping(monkeypatch, one_thread):
    from reachtui.generation import Decoding
    from reachtui.routes import Route

    r = _tiny_runner()
    ivs = [(Route((0, 1, 1, 2, 3)), frozenset()), (None, frozenset({1})), (Route((0, 2, 3)), frozenset())]
    rows = [[0, 1], [2], [1, 3]]
    want = [[g.text for g in gens] for gens in r.generate_many(PROMPTS, ivs, decoding=Decoding(max_new_tokens=4),
                                                                rows=rows)]
    real, packs = r._decode_mixed, []

    def small(jobs, dec, **k):
        packs.append(len(jobs))
        if len(jobs) > 1:
            raise RuntimeError(CPU_OOM)
        return real(jobs, dec, **k)

    monkeypatch.setattr(r, "_decode_mixed", small)
    got = r.generate_many(PROMPTS, ivs, decoding=Decoding(max_new_tokens=4), rows=rows)
    assert packs[0] == 3 and max(packs[1:]) < 3 and len(packs) < 10
    assert [[g.text for g in gens] for gens in got] == want


# ------------------------------------------------------------------------------------- the position limit


def test_a_prompt_over_the_position_limit_is_refused_before_anything_is_stored(tmp_path, one_thread):
    from reachtui.generation import Decoding

    r = _tiny_runner()
    assert r.max_positions == 256
    with pytest.raises(ReachError, match="position limit of 256"):
        r.generate(["1+1=2. " * 40], decoding=Decoding(max_new_tokens=8))
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"id": "ok", "question": "What is 1 + 2?", "answer": "3"}) + "\n"
                    + json.dumps({"id": "long", "question": "What is 1 + 2? " * 20, "answer": "3"}) + "\n")
    store_path = tmp_path / "s.sqlite"
    with Store(store_path) as store:
        with pytest.raises(ReachError, match=r"1 of 2 questions does not fit the model's position limit of 256 tokens "
                                             r"with --max-new-tokens 48 \(question id long; the longest prompt is \d+ "
                                             r"tokens\); --skip-long audits the other 1$"):
            run_audit(store, r, model_name="tiny", task=load_task(str(path)), protocol=Protocol(probes=()))
        assert store.list_runs() == [] and store.model_id("tiny") is None
    with Store(store_path) as store:     # --limit 1 leaves the long question out: it runs
        res = run_audit(store, r, model_name="tiny", task=load_task(str(path)), protocol=Protocol(probes=()), limit=1)
        assert res.status == "complete"
    with pytest.raises(ReachError, match="--max-new-tokens 300 does not fit"):
        run_audit(Store(tmp_path / "t.sqlite"), r, model_name="tiny", task=load_task(str(path)),
                  protocol=Protocol(probes=(), max_new_tokens=300))


# ------------------------------------------------------------------------------------- the app


@pytest.mark.skipif(not HAVE_DEMO, reason="no demo model in assets/")
async def test_open_on_a_model_that_cannot_load_says_why_and_does_not_wait(tmp_path):
    from reachtui.commands.open import make_audit_job
    from reachtui.tui.app import Launch, ReachApp
    from reachtui.tui.widgets.layer_strip import LayerStrip

    model = tmp_path / "badtype"
    shutil.copytree(DEMO_MODEL_DIR, model)
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(dict(cfg, model_type="foozle")))
    task = load_task(str(write_task(tmp_path / "t.jsonl", 3)))
    job = make_audit_job(tmp_path / "s.sqlite", task, Protocol(), limit=None, batch_size=None, mlp_scan=None,
                         new_run=False)
    app = ReachApp(tmp_path / "s.sqlite", launch=Launch(model=str(model), audit_job=job))
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(120):
            await pilot.pause(0.25)
            if app.model_status.startswith("failed"):
                break
        await pilot.pause(0.2)
        assert app.model_status.startswith("failed to load:") and "foozle" in app.model_status
        strip = str(app.main.query_one(LayerStrip).render())
        assert "failed to load" in strip and "foozle" in strip and "not known yet" not in strip
        assert not app.audit_running
