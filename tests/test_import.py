"""`reachtui import`: recorded generations (jsonl, lm-eval --log_samples) become a graded run, or nothing."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from reachtui import tables as T
from reachtui.cli import cli
from reachtui.store import Store

GOLD = {"a1": "10", "a2": "20", "a3": "30", "a4": "40", "a5": "50"}

# question -> probe -> outputs (attempt 0, 1, ...)
JSONL = {
    "a1": {"realized": ["5+5=10. #### 10"], "sample": ["#### 11", "#### 12", "#### 10"], "routes": ["#### 1", "#### 2"]},
    "a2": {"realized": ["#### 7"], "sample": ["#### 3", "The answer is 20.", "#### 4"], "routes": ["#### 20", "#### 20"]},
    "a3": {"realized": ["#### 31"], "sample": ["#### 1", "#### 2", "no idea"], "routes": ["#### 3", "#### 3"]},
    "a4": {"realized": ["The answer is 40."], "sample": ["#### 41", "#### 42", "#### 43"], "routes": ["#### 1", "#### 40"]},
    "a5": {"realized": ["19-5=14 #### 14"], "sample": ["#### 50", "#### 5", "#### 50"], "routes": ["#### 9", "#### 9"]},
}


@pytest.fixture()
def task_file(tmp_path):
    path = tmp_path / "five.jsonl"
    path.write_text("".join(json.dumps({"id": q, "question": f"q {q}?", "answer": a}) + "\n" for q, a in GOLD.items()))
    return path


def write_jsonl(path, data=JSONL, extra=()):
    lines = [json.dumps({"question_id": q, "probe": p, "attempt": j, "output": out})
             for q, per in data.items() for p, outs in per.items() for j, out in enumerate(outs)]
    path.write_text("\n".join(list(lines) + list(extra)) + "\n")
    return path


def invoke(*args):
    return CliRunner().invoke(cli, [*args], catch_exceptions=False)


def test_jsonl_import_gives_realized_reachable_and_failure_sets(tmp_path, task_file):
    store_path = tmp_path / "s.sqlite"
    gens = write_jsonl(tmp_path / "gens.jsonl")
    res = invoke("import", str(gens), "--task", str(task_file), "--model", "m1", "--store", str(store_path))
    assert res.exit_code == 0, res.output
    assert res.stdout.strip().endswith("run 1")
    with Store(store_path, readonly=True) as store:
        run = store.get_run(1)
        assert run["source"] == "import" and run["status"] == "complete" and run["n_questions"] == 5
        assert run["model"] == "m1"
        rows = {r["probe"]: r for r in T.summary_table(store, [1]).dicts()}
        q = {r["question_id"]: r for r in T.questions_table(store, [1]).dicts()}
        sets = {f["name"]: set(store.conn.execute(
            "SELECT q.qid FROM failure_set_members m JOIN questions q ON q.id = m.question_id WHERE m.set_id = ?",
            (f["id"],)).fetchall()) for f in store.failure_sets(1)}
        n_attempts = store.conn.execute("SELECT count(*) FROM attempts WHERE run_id = 1").fetchone()[0]
        protocol = json.loads(run["protocol_json"])
    assert n_attempts == 5 * (1 + 3 + 2)
    assert rows["sample"]["realized"] == pytest.approx(2 / 5)  # a1, a4
    assert rows["sample"]["reachable"] == pytest.approx(3 / 5)  # a1, a2, a5
    assert rows["routes"]["reachable"] == pytest.approx(2 / 5)  # a2, a4
    assert rows["sample"]["budget"] == 3 and rows["routes"]["budget"] == 2
    assert sets == {"failure:sample": {("a2",), ("a5",)}, "failure:routes": {("a2",)}}
    assert rows["sample"]["failure_set_size"] == 2 and rows["routes"]["failure_set_size"] == 1
    assert q["a5"]["answer"] == "14" and q["a5"]["realized"] is False and q["a5"]["first_hit_sample"] == 1
    assert q["a1"]["first_hit_sample"] == 3 and q["a4"]["first_hit_routes"] == 2   # k, 1-based
    assert q["a2"]["reachable_routes"] is True and q["a3"]["reachable_sample"] is False
    assert protocol["template"].startswith("[imported") and protocol["answer_format"] == "number"
    assert [(p["name"], p["budget"]) for p in protocol["probes"]] == [("sample", 3), ("routes", 2)]


def test_two_imports_with_the_same_settings_compare_as_matched(tmp_path, task_file):
    store_path = tmp_path / "s.sqlite"
    a = write_jsonl(tmp_path / "a.jsonl")
    better = {q: dict(per, realized=[f"#### {GOLD[q]}"]) for q, per in JSONL.items()}
    b = write_jsonl(tmp_path / "b.jsonl", better)
    for f, m in ((a, "base"), (b, "tuned")):
        assert invoke("import", str(f), "--task", str(task_file), "--model", m, "--store", str(store_path)).exit_code == 0
    res = invoke("compare", "1", "2", "--store", str(store_path), "--format", "json")
    rows = {r["probe"]: r for r in json.loads(res.stdout)}
    assert rows["sample"]["realized_delta"] == pytest.approx(3 / 5) and rows["sample"]["realized_gained"] == 3
    assert rows["sample"]["reachable_delta"] == 0 and rows["sample"]["matched"] is True


def lm_eval_rows(docs, filters=("strict-match", "flexible-extract")):
    """Rows as lm-eval's --log_samples writes them: one per doc per filter, same resps for each filter."""
    rows = []
    for doc_id, (target, resps) in docs.items():
        for flt in filters:
            filtered = [r.split("####")[-1].strip() if flt == "strict-match" else r.split()[-1] for r in resps]
            rows.append({"doc_id": doc_id, "doc": {"question": "..."}, "target": target, "arguments": {},
                         "resps": [resps], "filtered_resps": filtered, "filter": flt, "metrics": ["exact_match"],
                         "doc_hash": "x", "prompt_hash": "y", "target_hash": "z", "exact_match": 0.0})
    return rows


LM_DOCS = {  # doc_id -> (target, responses): the first response is the realized one
    0: ("Some steps. #### 3", ["#### 3", "#### 4", "#### 3", "#### 5"]),
    1: ("#### 8", ["#### 7", "#### 8", "#### 9", "#### 1"]),
    2: ("#### 12", ["#### 1", "#### 2", "#### 3", "#### 4"]),
    3: ("#### 6", ["#### 0", "#### 0", "#### 0", "#### 6"]),
}


@pytest.fixture()
def idless_task(tmp_path):
    path = tmp_path / "gsm_like.jsonl"
    path.write_text("".join(json.dumps({"question": f"doc {i}?", "answer": t.split("####")[-1].strip()}) + "\n"
                            for i, (t, _r) in LM_DOCS.items()))
    return path


@pytest.mark.parametrize("extra", [[], ["--filter", "flexible-extract"], ["--format", "lm-eval"]])
def test_lm_eval_import_counts_each_doc_once(tmp_path, idless_task, extra):
    store_path = tmp_path / "s.sqlite"
    samples = tmp_path / "samples_gsm_like_2026-01-01T00-00-00.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in lm_eval_rows(LM_DOCS)))
    res = CliRunner().invoke(cli, ["import", str(samples), "--task", str(idless_task), "--store", str(store_path),
                                   *extra], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "2 filters in the file" in res.stderr and "4 row(s) of other filters skipped" in res.stderr
    with Store(store_path, readonly=True) as store:
        counts = dict(store.conn.execute("SELECT probe, count(*) FROM attempts GROUP BY probe").fetchall())
        rows = {r["probe"]: r for r in T.summary_table(store, [1]).dicts()}
        members = [r[0] for r in store.conn.execute(
            "SELECT q.qid FROM failure_set_members m JOIN failure_sets f ON f.id = m.set_id "
            "JOIN questions q ON q.id = m.question_id WHERE f.name = 'failure:sample' ORDER BY q.idx")]
        run = store.get_run(1)
    assert counts == {"realized": 4, "sample": 16}  # not 8 and 32: one filter's rows only
    assert rows["sample"]["realized"] == pytest.approx(1 / 4)  # doc 0
    assert rows["sample"]["reachable"] == pytest.approx(3 / 4)  # docs 0, 1, 3
    assert members == ["1", "3"]
    assert run["model"] == "samples_gsm_like_2026-01-01T00-00-00"
    if "--filter" in extra:
        assert "'flexible-extract'" in run["note"]


def test_lm_eval_doc_ids_are_positions_in_a_task_with_own_ids(tmp_path, task_file):
    samples = tmp_path / "samples.jsonl"
    docs = {i: (f"#### {g}", [f"#### {g}"]) for i, g in enumerate(GOLD.values())}
    samples.write_text("".join(json.dumps(r) + "\n" for r in lm_eval_rows(docs, filters=("none",))))
    res = invoke("import", str(samples), "--task", str(task_file), "--store", str(tmp_path / "s.sqlite"))
    assert res.exit_code == 0, res.output
    assert "0-based position" in res.stderr
    with Store(tmp_path / "s.sqlite", readonly=True) as store:
        assert T.summary_table(store, [1]).dicts()[0]["realized"] == 1.0


def test_lm_eval_targets_that_disagree_with_the_task_are_reported(tmp_path, idless_task):
    samples = tmp_path / "samples.jsonl"
    docs = {i: ("#### 999", r) for i, (_t, r) in LM_DOCS.items()}
    samples.write_text("".join(json.dumps(r) + "\n" for r in lm_eval_rows(docs)))
    res = invoke("import", str(samples), "--task", str(idless_task), "--store", str(tmp_path / "s.sqlite"))
    assert res.exit_code == 0
    assert "4 of 4 lm-eval targets differ" in res.stderr and "is --task the right file?" in res.stderr


# -- malformed files: file:line, and nothing written -----------------------------------------------------------


def _digest(path):
    """What the store holds: every table's rows (the file itself may be checkpointed by a reader)."""
    con = sqlite3.connect(path)
    try:
        h = hashlib.sha256()
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            for row in con.execute(f'SELECT * FROM "{name}" ORDER BY 1'):
                h.update(repr(row).encode())
        return h.hexdigest()
    finally:
        con.close()


def _main(*args):
    return subprocess.run([sys.executable, "-m", "reachtui", *args], capture_output=True, text=True)


BAD_JSONL = [
    ('{"question_id": "a1", "probe": "sample", "attempt": 3, "output": "x"', "bad JSON"),
    ('{"question_id": "zz", "probe": "sample", "attempt": 3, "output": "x"}', "unknown question id 'zz'"),
    ('{"question_id": "a1", "probe": "sample", "attempt": 3}', "missing field 'output'"),
    ('{"question_id": "a1", "probe": "beam", "attempt": 0, "output": "x"}', "unknown probe 'beam'"),
    ('{"question_id": "a1", "probe": "sample", "attempt": 1, "output": "x"}', "duplicate attempt 1"),
    ('{"question_id": "a1", "probe": "sample", "attempt": 5, "output": "x"}', "must be numbered 0, 1, 2"),
    ('{"question_id": "a1", "probe": "realized", "attempt": 1, "output": "x"}', "realized probe has one attempt"),
    ('{"question_id": "a1", "probe": "sample", "attempt": -1, "output": "x"}', "attempt must be an integer"),
    ('["a1", "sample", 3, "x"]', "expected a JSON object"),
    ('{"question_id": "a1", "probe": "sample", "attempt": 3, "output": 7}', "output must be text"),
]


@pytest.mark.parametrize("bad, message", BAD_JSONL)
def test_malformed_jsonl_fails_with_file_line_and_writes_nothing(tmp_path, task_file, bad, message):
    store_path = tmp_path / "s.sqlite"
    good = write_jsonl(tmp_path / "good.jsonl")
    assert _main("import", str(good), "--task", str(task_file), "--store", str(store_path)).returncode == 0
    before = _digest(store_path)
    gens = write_jsonl(tmp_path / "gens.jsonl", extra=[bad])
    bad_line = len(gens.read_text().splitlines())  # the bad line is the last one
    out = _main("import", str(gens), "--task", str(task_file), "--store", str(store_path))
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"error: {gens}:{bad_line}: ") and message in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1 and out.stdout == ""
    assert _digest(store_path) == before


def test_a_question_missing_a_probe_is_refused_before_the_store_is_made(tmp_path, task_file):
    data = {q: dict(per) for q, per in JSONL.items()}
    del data["a3"]["routes"]
    gens = write_jsonl(tmp_path / "gens.jsonl", data)
    out = _main("import", str(gens), "--task", str(task_file), "--store", str(tmp_path / "new.sqlite"))
    assert out.returncode == 2 and "question a3 has no attempt of probe routes" in out.stderr
    assert f"{gens}:" in out.stderr
    assert not (tmp_path / "new.sqlite").exists()


@pytest.mark.parametrize("mutate, message", [
    (lambda rows: rows[5].update(resps=[[1.5]]), "resps must hold generated text"),
    (lambda rows: rows[5].pop("filtered_resps"), "missing field 'filtered_resps'"),
    (lambda rows: rows[5].update(doc_id=17), "doc_id 17 is not a question"),
    (lambda rows: rows[5].update(doc_id="x"), "doc_id must be an integer"),
    (lambda rows: rows[5].update(filter="strict-match", doc_id=0), "doc_id 0 appears twice"),
])
def test_malformed_lm_eval_fails_with_file_line(tmp_path, idless_task, mutate, message):
    rows = lm_eval_rows(LM_DOCS)
    mutate(rows)
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = _main("import", str(samples), "--task", str(idless_task), "--store", str(tmp_path / "s.sqlite"))
    assert out.returncode == 2 and out.stderr.startswith(f"error: {samples}:6: ") and message in out.stderr, out.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_unknown_filter_and_bad_options_are_one_line(tmp_path, idless_task):
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in lm_eval_rows(LM_DOCS)))
    for args, message in ((["--filter", "nope"], "no rows for filter 'nope'"),
                          (["--format", "csv"], "unknown import format"),
                          (["--answer-format", "words"], "unknown answer format"),
                          (["--format", "jsonl"], "missing field 'question_id'")):
        out = _main("import", str(samples), "--task", str(idless_task), "--store", str(tmp_path / "s.sqlite"), *args)
        assert out.returncode == 2 and message in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_import_does_not_load_heavy_libraries(tmp_path, task_file):
    gens = write_jsonl(tmp_path / "gens.jsonl")
    code = (
        "import sys\n"
        "from reachtui.cli import main\n"
        f"main(['import', {str(gens)!r}, '--task', {str(task_file)!r}, '--store', {str(tmp_path / 's.sqlite')!r}])\n"
        "print('HEAVY=' + ','.join(m for m in ('torch', 'transformers', 'textual') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "HEAVY="


def test_declared_protocol_and_mean_logprob(tmp_path, task_file):
    from reachtui.protocol import load_protocol_file

    proto = tmp_path / "p.toml"
    proto.write_text('answer_format = "number"\n[[probes]]\nname = "sample"\nbudget = 4\ntemperature = 0.7\n'
                     '[[probes]]\nname = "routes"\nbudget = 2\n')
    data = {q: {p: outs for p, outs in per.items()} for q, per in JSONL.items()}
    lines = [json.dumps({"question_id": q, "probe": p, "attempt": j, "output": out,
                         "mean_logprob": -1.0 if (p == "sample" and j == 2) else -2.0})
             for q, per in data.items() for p, outs in per.items() for j, out in enumerate(outs)]
    gens = tmp_path / "gens.jsonl"
    gens.write_text("\n".join(lines) + "\n")
    res = invoke("import", str(gens), "--task", str(task_file), "--protocol", str(proto),
                 "--store", str(tmp_path / "s.sqlite"))
    assert res.exit_code == 0, res.output
    with Store(tmp_path / "s.sqlite", readonly=True) as store:
        assert store.get_run(1)["protocol_hash"] == load_protocol_file(proto).hash()
        row = {r["probe"]: r for r in T.summary_table(store, [1]).dicts()}["sample"]
        assert row["budget"] == 4  # the declared budget, not the 3 attempts in the file
    # the log-prob selector picks attempt 2 of sample: correct for a1 ("#### 10") and a5 ("#### 50")
    assert row["blind_logprob"] == pytest.approx(2 / 5)
    proto.write_text('[[probes]]\nname = "sample"\nbudget = 2\n[[probes]]\nname = "routes"\nbudget = 2\n')
    out = _main("import", str(gens), "--task", str(task_file), "--protocol", str(proto),
                "--store", str(tmp_path / "s.sqlite"))
    assert out.returncode == 2 and "more than the protocol's budget 2" in out.stderr


async def test_an_imported_run_is_browsable_in_the_app(tmp_path, task_file):
    from reachtui.tui.app import ReachApp

    gens = write_jsonl(tmp_path / "gens.jsonl")
    assert invoke("import", str(gens), "--task", str(task_file), "--store", str(tmp_path / "s.sqlite")).exit_code == 0
    app = ReachApp(tmp_path / "s.sqlite")
    async with app.run_test(size=(150, 42)) as pilot:
        await pilot.pause()
        assert app.table.row_ids == list(GOLD)
        assert app.counters.n == 5 and app.counters.realized == 2
        assert app.counters.failure == {"sample": 2, "routes": 1}


def test_a_failure_inside_the_write_leaves_the_store_as_it_was(tmp_path, task_file, monkeypatch):
    """The model, task, run, attempts and failure sets are one transaction: a failure at its last step
    (after the sets are frozen) leaves nothing behind."""
    from reachtui.engine.importing import import_file

    store_path = tmp_path / "s.sqlite"
    gens = write_jsonl(tmp_path / "gens.jsonl")
    with Store(store_path):
        pass
    before = _digest(store_path)

    def fail(self, *args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Store, "set_run_status", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        import_file(gens, str(task_file), store_path=store_path)
    assert _digest(store_path) == before


def test_an_import_stores_the_tables_pass_over_its_attempts(tmp_path, task_file):
    """Like an audit, an import leaves the tables' pass stored with the run (`outcome_runs`), and the tables
    read from it are the ones the pass makes."""
    from reachtui.engine.importing import import_file
    from reachtui.tables import build_table

    store_path = tmp_path / "s.sqlite"
    import_file(write_jsonl(tmp_path / "gens.jsonl"), str(task_file), store_path=store_path)
    with Store(store_path) as store:
        (run_id, attempts), = store.conn.execute("SELECT run_id, attempts FROM outcome_runs").fetchall()
        assert attempts == store.conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
        stored = build_table(store, "questions", [run_id]).rows
        store.conn.execute("DELETE FROM outcome_runs")
        store.conn.commit()
        assert build_table(store, "questions", [run_id]).rows == stored


def test_examples_copies_the_bundled_files_and_never_overwrites_another(tmp_path):
    """`reachtui examples DIR` copies assets/examples/ (what the README's imports read); again, it changes
    nothing; a different file of the same name stops it before it copies anything."""
    from reachtui.assets import EXAMPLES_DIR

    names = sorted(f.name for f in EXAMPLES_DIR.glob("*.*"))
    assert names == ["base.jsonl", "broken.jsonl", "demo_inspect.eval", "demo_subjects.csv", "fewshot_demo.jsonl",
                     "samples_demo.jsonl", "tuned.jsonl"]
    out = subprocess.run([sys.executable, "-m", "reachtui", "examples", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == f"copied {', '.join(names)} to {tmp_path}\n"
    assert all((tmp_path / n).read_bytes() == (EXAMPLES_DIR / n).read_bytes() for n in names)
    again = subprocess.run([sys.executable, "-m", "reachtui", "examples", str(tmp_path)], capture_output=True, text=True)
    assert again.returncode == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "tuned.jsonl").write_text("mine\n")
    out = subprocess.run([sys.executable, "-m", "reachtui", "examples", str(other)], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr == (f"error: {other / 'tuned.jsonl'} exists and is not reachtui's "
                                                  f"example: nothing copied (give another DIR)\n")
    assert sorted(p.name for p in other.iterdir()) == ["tuned.jsonl"]
    out = subprocess.run([sys.executable, "-m", "reachtui", "examples", str(tmp_path / "nope")], capture_output=True,
                         text=True)
    assert out.returncode == 2 and out.stderr == f"error: {tmp_path / 'nope'}: no such folder\n"
