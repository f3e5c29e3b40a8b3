"""`reachtui compare` and `reachtui export` on runs the audit engine made (a fake runner: no torch).

Run A is the fake "base model"; run B a "trained" one that realizes more questions by default but whose
probes are unchanged. Every number of the comparison is recomputed here from the attempts with plain SQL.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from reachtui.generation import Decoding
from fake_runner import FakeRunner, _h, write_task

from reachtui import tables as T
from reachtui.engine.audit import run_audit
from reachtui.cli import cli
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tasks import load_task


class TrainedRunner(FakeRunner):
    """The same fake model, except that its default decoding also gets questions with hash % 3 == 1 right."""

    def generate(self, prompts, intervention=None, *, decoding=Decoding(), seeds=None, batch_size=64):
        out = super().generate(prompts, intervention, decoding=decoding, seeds=seeds, batch_size=batch_size)
        if (intervention is None or intervention.is_default) and decoding.temperature == 0:
            for prompt, gen in zip(prompts, out):
                if _h(prompt) % 3 == 1:
                    a, b = map(int, re.findall(r"(\d+) \+ (\d+)", prompt)[0])
                    gen.text = f" {a}+{b}={a + b}. #### {a + b}"
        return out


PROTOCOL = Protocol(probes=(ProbeSpec("sample", budget=4), ProbeSpec("routes", budget=4)), seed=3)


@pytest.fixture(scope="module")
def audits(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audits")
    task = load_task(str(write_task(tmp / "t.jsonl", 30)))
    path = tmp / "s.sqlite"
    with Store(path) as store:
        a = run_audit(store, FakeRunner(), model_name="base", task=task, protocol=PROTOCOL).run_id
        b = run_audit(store, TrainedRunner(), model_name="trained", task=task, protocol=PROTOCOL).run_id
        c = run_audit(store, FakeRunner(), model_name="base-seed4", task=task,
                      protocol=Protocol(probes=PROTOCOL.probes, seed=4)).run_id
    return path, a, b, c


def _per_question(con, run, measure):
    if measure == "realized":
        sql = ("SELECT q.qid, a.correct FROM attempts a JOIN questions q ON q.id = a.question_id "
               "WHERE a.run_id = ? AND a.probe = 'realized'")
        return dict(con.execute(sql, (run,)).fetchall())
    sql = ("SELECT q.qid, max(a.correct) FROM attempts a JOIN questions q ON q.id = a.question_id "
           "WHERE a.run_id = ? AND a.probe = ? GROUP BY q.qid")
    return dict(con.execute(sql, (run, measure)).fetchall())


def test_compare_of_two_audits_equals_plain_sql(audits):
    path, a, b, _ = audits
    res = CliRunner().invoke(cli, ["compare", str(a), str(b), "--store", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["probe"]: r for r in json.loads(res.stdout)}
    assert set(rows) == {"sample", "routes"}
    with Store(path, readonly=True) as store:
        con = store.conn
        ra, rb = _per_question(con, a, "realized"), _per_question(con, b, "realized")
        for probe, r in rows.items():
            ha, hb = _per_question(con, a, probe), _per_question(con, b, probe)
            assert r["n"] == len(ra) == 30
            cells = {"gained": 0, "lost": 0, "kept": 0, "never": 0}
            for q in ha:
                cells[T.transition(bool(ha[q]), bool(hb[q]))] += 1
            assert [r[f"reachable_{c}"] for c in cells] == list(cells.values())
            assert r["reachable_a"] == pytest.approx(sum(ha.values()) / 30)
            assert r["reachable_b"] == pytest.approx(sum(hb.values()) / 30)
            assert r["reachable_p"] == pytest.approx(T.mcnemar_exact(cells["gained"], cells["lost"]))
        real = {c: 0 for c in T.CELLS}
        for q in ra:
            real[T.transition(bool(ra[q]), bool(rb[q]))] += 1
    r = rows["sample"]
    assert [r[f"realized_{c}"] for c in T.CELLS] == [real[c] for c in T.CELLS]
    # the trained runner only adds realized questions, and its probes are the base model's
    assert real["lost"] == 0 and real["gained"] > 0
    assert r["realized_delta"] == pytest.approx(real["gained"] / 30) and r["realized_delta"] > 0
    assert rows["sample"]["reachable_delta"] == 0 and rows["routes"]["reachable_delta"] == 0
    assert rows["sample"]["matched"] is True


def test_summary_export_of_an_audit_equals_the_closing_summary(audits):
    from reachtui.tables import summary_rows as summarize

    path, a, b, _ = audits
    res = CliRunner().invoke(cli, ["export", "summary", "--run", str(b), "--store", str(path), "--json"])
    got = {r["probe"]: r for r in json.loads(res.stdout)}
    with Store(path, readonly=True) as store:
        want = {r["probe"]: r for r in summarize(store, b)}
    for probe in ("sample", "routes"):
        for mine, theirs in (("realized", "realized"), ("reachable", "reachable"), ("gap", "gap"),
                             ("blind_vote", "blind_vote"), ("blind_logprob", "blind_logprob"),
                             ("failure_set_size", "failure"), ("budget", "budget")):
            assert got[probe][mine] == pytest.approx(want[probe][theirs]), (probe, mine)


def test_two_seeds_are_not_a_matched_pair(audits):
    path, a, _, c = audits
    out = subprocess.run([sys.executable, "-m", "reachtui", "compare", str(a), str(c), "--store", str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "different default deployments (seed 3 vs 4)" in out.stderr
    out = subprocess.run([sys.executable, "-m", "reachtui", "compare", str(a), str(c), "--store", str(path),
                          "--allow-unmatched"], capture_output=True, text=True)
    assert out.returncode == 0 and "UNMATCHED PROTOCOLS" in out.stdout and "UNMATCHED PROTOCOLS" in out.stderr
