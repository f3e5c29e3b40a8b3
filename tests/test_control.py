"""The chance control (reachtui.control) and the honest columns it feeds: derangement, strata, control
re-scoring from stored answers, robust reachability, answer scatter, intervals, and their round trips
through the exports."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import random
from collections import Counter
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from tables_fixtures import add_run, make_task, random_data

from reachtui import control as C
from reachtui import stats
from reachtui import tables as T
from reachtui.cli import cli
from reachtui.store import Store


def task_with_golds(name: str, golds: list[str]) -> SimpleNamespace:
    questions = tuple(SimpleNamespace(id=f"{name}{i:03d}", question=f"question {i} of {name}", answer=g,
                                      solution=None) for i, g in enumerate(golds))
    sha = hashlib.sha256(f"{name}:{golds}".encode()).hexdigest()
    return SimpleNamespace(name=name, path=f"/tmp/{name}.jsonl", sha256=sha, questions=questions)


# -- strata and the derangement ------------------------------------------------------------------------


def test_strata_of_numbers_choice_and_text():
    assert C.stratum("14") == "+int:2" and C.stratum("7") == "+int:1" and C.stratum("1,200") == "+int:4"
    assert C.stratum("-3") == "-int:1" and C.stratum("0.75") == "+dec:1" and C.stratum("12.5") == "+dec:2"
    assert C.stratum("3/4") == "+dec:1" and C.stratum("1/3") == "+dec:1" and C.stratum("0") == "+int:1"
    assert C.stratum("$1,234") == C.stratum("1234") == "+int:4"
    assert C.stratum("B", "choice") == C.stratum("D", "choice") == "choice"
    assert C.stratum("\\frac{\\pi}{2}", "math") == "expr" and C.stratum("2", "math") == "+int:1"
    assert C.stratum("seven") == "text" and C.stratum("anything", "exact") == "exact"


def test_singleton_strata_join_a_neighbour():
    golds = ["3", "5", "12", "40", "99", "1234"]  # one 4-digit gold: it joins the 2-digit stratum
    names = C.assign_strata(golds)
    assert names[:2] == ["+int:1"] * 2 and len(set(names[2:])) == 1 and names[5] == "+int:2|+int:4"
    names = C.assign_strata(["-8", "3", "5"])  # a lone negative (first in order) joins the next stratum
    assert names == ["-int:1|+int:1"] * 3
    assert C.assign_strata(["3", "12", "40"], scheme="none") == [C.ALL] * 3
    assert C.derangement(["5"]) == [None]


@pytest.mark.parametrize("seed", range(6))
def test_derangement_never_maps_to_itself_and_stays_in_its_stratum(seed):
    rng = random.Random(seed)
    golds = [str(rng.choice([rng.randint(0, 9), rng.randint(10, 99), rng.randint(100, 999), -rng.randint(1, 9),
                             rng.randint(1000, 99999)])) for _ in range(rng.randint(2, 80))]
    golds += ["2.5", "0.125", "7"]
    partner = C.derangement(golds, "number", seed=seed)
    names = C.assign_strata(golds, "number")
    assert all(p is not None and p != i for i, p in enumerate(partner))
    assert all(names[p] == names[i] for i, p in enumerate(partner))
    # each stratum is merged only when it is a singleton: every raw stratum with 2+ members is kept whole
    raw = Counter(C.stratum(g) for g in golds)
    for i, p in enumerate(partner):
        if raw[C.stratum(golds[i])] >= 2 and raw[C.stratum(golds[p])] >= 2:
            assert C.stratum(golds[i]) == C.stratum(golds[p])
    assert sorted(partner) == list(range(len(golds)))  # a bijection: every question is someone's partner
    assert partner == C.derangement(golds, "number", seed=seed)  # fixed by the seed
    assert all(p != i for i, p in enumerate(C.derangement(golds, "number", seed=seed, scheme="none")))


def test_derangement_depends_on_the_control_seed():
    golds = [str(i % 10) for i in range(30)]
    maps = {tuple(C.derangement(golds, seed=s)) for s in range(5)}
    assert len(maps) == 5


# -- control re-scoring from the store ------------------------------------------------------------------


def _constant_run(store, task, constant: str, *, k: int = 4, fmt: str = "number", protocol_extra=None):
    data = {}
    for q in task.questions:
        ok = q.answer == constant
        data[q.id] = {"realized": [(ok, constant, -0.1)],
                      "routes": [(ok, constant, -0.5)] * k, "sample": [(ok, constant, -0.5)] * k}
    protocol = {"answer_format": fmt, "probes": [{"name": "sample", "budget": k}, {"name": "routes", "budget": k}]}
    protocol.update(protocol_extra or {})
    return add_run(store, "const", task, hashlib.md5(repr(protocol).encode()).hexdigest()[:12], data,
                   protocol=protocol)


@pytest.mark.parametrize("strata", ["format", "none"])
def test_a_constant_answer_is_control_reachable_on_the_share_of_golds_equal_to_it(tmp_path, strata):
    golds = ["7", "7", "7", "3", "9", "12", "7", "45", "7", "120", "8", "7", "66"]  # 6 of 13 are 7
    task = task_with_golds("const", golds)
    with Store(tmp_path / "c.sqlite") as store:
        run = _constant_run(store, task, "7", protocol_extra={"control": {"seed": 3, "strata": strata}})
        rows = {r["probe"]: r for r in T.summary_rows(store, run, intervals=True)}
        share = golds.count("7") / len(golds)
        for probe in ("realized", "sample", "routes"):
            assert rows[probe]["control"] == pytest.approx(share), probe
            assert rows[probe]["reachable"] == pytest.approx(share)
            assert rows[probe]["excess"] == pytest.approx(0.0)
        assert rows["routes"]["control_robust"] == pytest.approx(share)  # 4 identical answers: 4 hits
        assert rows["routes"]["answers"] == 1.0 and rows["routes"]["no_answer"] == 0.0
        assert rows["routes"]["control_lo"] == pytest.approx(stats.wilson(6, 13)[0])
        # the table, the curve and the hit counts say the same
        summary = {r["probe"]: r for r in T.summary_table(store, [run]).dicts()}
        assert summary["routes"]["control"] == pytest.approx(share) and summary["routes"]["excess"] == 0.0
        passk = [r for r in T.passk_table(store, [run]).dicts() if r["probe"] == "sample"]
        assert [r["control"] for r in passk] == pytest.approx([share] * 4)
        hits = {(r["probe"], r["hits"]): r for r in T.hits_table(store, [run]).dicts()}
        assert hits[("routes", 4)]["control_questions"] == 6 and hits[("routes", 0)]["control_questions"] == 7


def test_a_constant_choice_letter(tmp_path):
    golds = list("ABCDABCDAA")  # A is the gold of 4 of 10
    task = task_with_golds("mc", golds)
    with Store(tmp_path / "c.sqlite") as store:
        run = _constant_run(store, task, "A", fmt="choice", protocol_extra={"choices": 4})
        rows = {r["probe"]: r for r in T.summary_rows(store, run, intervals=True)}
        assert rows["routes"]["control"] == pytest.approx(0.4)
        assert rows["routes"]["chance"] == pytest.approx(1 - 0.75**4)  # the closed form beside it
        assert rows["realized"]["chance"] == pytest.approx(0.25)


def test_control_uses_the_graders_equivalence_and_stored_answers_only(tmp_path):
    """Answers are compared with grading.equivalent ("7.0" is "7"), from the `answer` column (the text is
    never re-graded), against the partner the seeded derangement gives."""
    golds = ["7", "8", "9", "6", "5"]
    task = task_with_golds("eq", golds)
    partner = C.derangement(golds, "number", seed=0)
    data = {}
    for i, q in enumerate(task.questions):
        p_gold = golds[partner[i]]
        # attempt 2 writes the partner's gold as a decimal; the text says something else entirely
        data[q.id] = {"realized": [(False, None, None)],
                      "routes": [(False, "1", -1.0), (False, None, -1.0), (False, f"{p_gold}.0", -1.0)]}
    with Store(tmp_path / "e.sqlite") as store:
        run = add_run(store, "m", task, "h", data)
        store.conn.execute("UPDATE attempts SET text = 'no number here' WHERE run_id = ?", (run,))
        store.conn.commit()
        rows = {r["probe"]: r for r in T.summary_rows(store, run, intervals=True)}
        assert rows["routes"]["control"] == 1.0 and rows["routes"]["reachable"] == 0.0
        assert rows["routes"]["excess"] == -1.0
        assert rows["routes"]["answers"] == 2.0 and rows["routes"]["no_answer"] == pytest.approx(1 / 3)
        assert rows["realized"]["control"] == 0.0 and rows["realized"]["no_answer"] == 1.0
        curve = rows["routes"]["control_at_k"]
        assert curve == [0.0, 0.0, 1.0]  # routes are ordered: the control's first hit is attempt 2
        q = {r["question_id"]: r for r in T.questions_table(store, [run]).dicts()}
        for i, qq in enumerate(task.questions):
            assert q[qq.id]["partner"] == task.questions[partner[i]].id
            assert q[qq.id]["control_routes"] is True and q[qq.id]["answers_routes"] == 2
            assert q[qq.id]["hits_routes"] == 0


def test_control_numbers_equal_plain_recounts_on_random_runs(tmp_path):
    task = make_task("arith", 60)
    with Store(tmp_path / "r.sqlite") as store:
        run = add_run(store, "m", task, "h", random_data(task, 4, probes=("sample", "routes", "mcts"), k=6))
        con = store.conn
        golds = [g for (g,) in con.execute("SELECT q.gold FROM run_questions r JOIN questions q ON q.id = "
                                           "r.question_id WHERE r.run_id = ? ORDER BY q.idx", (run,))]
        ids = [i for (i,) in con.execute("SELECT q.id FROM run_questions r JOIN questions q ON q.id = "
                                         "r.question_id WHERE r.run_id = ? ORDER BY q.idx", (run,))]
        partner = C.derangement(golds, "number", seed=0)
        rows = {r["probe"]: r for r in T.summary_rows(store, run, intervals=True, bootstrap=500, seed=1)}
        for probe in ("sample", "routes", "mcts"):
            ctrl = robust = 0
            hist = Counter()
            for i, q in enumerate(ids):
                answers = [a for (a,) in con.execute("SELECT answer FROM attempts WHERE run_id = ? AND "
                                                     "question_id = ? AND probe = ?", (run, q, probe))]
                ctrl += any(a == golds[partner[i]] for a in answers)
                c = con.execute("SELECT sum(correct) FROM attempts WHERE run_id = ? AND question_id = ? AND "
                                "probe = ?", (run, q, probe)).fetchone()[0]
                robust += c >= 2
                hist[c] += 1
            r = rows[probe]
            assert r["control"] == pytest.approx(ctrl / 60) and r["robust"] == pytest.approx(robust / 60)
            assert r["excess"] == pytest.approx(r["reachable"] - ctrl / 60)
            assert r["hits"] == [hist.get(i, 0) for i in range(len(r["hits"]))] and sum(r["hits"]) == 60
            for key in ("reachable", "control", "robust", "realized"):
                assert r[f"{key}_lo"] <= r[key] <= r[f"{key}_hi"]
            for key in ("gap", "excess"):
                assert r[f"{key}_lo"] <= r[key] + 1e-9 and r[key] - 1e-9 <= r[f"{key}_hi"]
        # seeded: the same numbers again, another seed moves the bootstrap only
        again = {r["probe"]: r for r in T.summary_rows(store, run, intervals=True, bootstrap=500, seed=1)}
        other = {r["probe"]: r for r in T.summary_rows(store, run, intervals=True, bootstrap=500, seed=2)}
        assert again["routes"]["gap_lo"] == rows["routes"]["gap_lo"]
        assert other["routes"]["reachable_lo"] == rows["routes"]["reachable_lo"]
        # the legacy keys are untouched by intervals=True
        plain = {r["probe"]: r for r in T.summary_rows(store, run)}
        same = lambda a, b: a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))  # noqa: E731
        assert all(same(plain[p][k], rows[p][k]) for p in plain for k in plain[p])
        assert "control" not in plain["routes"]
        lines = T.summary_lines(list(rows.values()))
        assert len(lines) == 3 and lines[1].startswith("routes K=6: reachable ") and "control" in lines[1]
        assert all(("beats chance" in ln) or ("not above chance" in ln) for ln in lines)


# -- the new columns through every export ------------------------------------------------------------------


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("control") / "audit.sqlite"
    task = make_task("arith", 30)
    with Store(path) as store:
        add_run(store, "base", task, "p1", random_data(task, 11, probes=("sample", "routes"), k=5))
        add_run(store, "tuned", task, "p1", random_data(task, 12, probes=("sample", "routes"), k=5, p_real=0.6))
    return path


def _export(store_path, *args):
    res = CliRunner().invoke(cli, [*args, "--store", str(store_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def _same(got, want, kind):
    if want is None or (isinstance(want, float) and math.isnan(want)):
        return got in (None, "")
    if kind == "int":
        return int(got) == want
    if kind in ("frac", "float", "pvalue"):
        return math.isclose(float(got), want, rel_tol=1e-12, abs_tol=1e-12)
    if kind == "bool":
        return got in (want, str(int(want)))
    return str(got) == str(want)


NEW_SUMMARY = ["realized_lo", "realized_hi", "reachable_lo", "reachable_hi", "control", "control_lo",
               "control_hi", "excess", "excess_lo", "excess_hi", "gap_lo", "gap_hi", "robust", "robust_lo",
               "robust_hi", "retained_lo", "retained_hi", "retained_logprob_lo", "retained_logprob_hi", "answers",
               "no_answer"]


@pytest.mark.parametrize("fmt", ["csv", "json"])
@pytest.mark.parametrize("name, runs, new", [
    ("summary", ["--run", "1", "--run", "2"], NEW_SUMMARY),
    ("passk", ["--run", "1"], ["value_lo", "value_hi", "control", "control_lo", "control_hi", "excess"]),
    ("hits", ["--run", "2"], ["hits", "questions", "share", "control_questions", "control_share"]),
    ("compare", ["--run", "1", "--run", "2"], ["realized_delta_lo", "realized_delta_hi", "reachable_delta_lo",
                                               "reachable_delta_hi"]),
    ("questions", ["--run", "1"], ["partner", "hits_routes", "answers_routes", "control_routes", "hits_sample"]),
])
def test_new_columns_round_trip_through_csv_and_json(store_path, fmt, name, runs, new):
    with Store(store_path, readonly=True) as store:
        table = T.build_table(store, name, [int(r) for r in runs[1::2]])
    out = _export(store_path, "export", name, *runs, "--format", fmt)
    recs = json.loads(out) if fmt == "json" else list(csv.DictReader(io.StringIO(out)))
    assert len(recs) == len(table.rows) > 0
    assert all(c in recs[0] for c in new)
    for rec, want in zip(recs, table.dicts()):
        for c in new:
            assert _same(rec[c], want[c], table.column(c).kind), (name, c, rec[c], want[c])
    if fmt == "json":  # numbers stay numbers
        numeric = [c for c in new if table.column(c).kind in ("int", "frac", "float")]
        assert all(isinstance(r[c], (int, float)) or r[c] is None for r in recs for c in numeric)
        assert any(isinstance(r[numeric[0]], (int, float)) for r in recs)


def test_compare_deltas_have_paired_bootstrap_intervals(store_path):
    recs = json.loads(_export(store_path, "compare", "1", "2", "--format", "json", "--bootstrap", "400"))
    for r in recs:
        assert r["realized_delta_lo"] <= r["realized_delta"] <= r["realized_delta_hi"]
        assert r["reachable_delta_lo"] <= r["reachable_delta"] <= r["reachable_delta_hi"]
        assert 0 <= r["reachable_p"] <= 1
    assert len({(r["realized_delta_lo"], r["realized_delta_hi"]) for r in recs}) == 1  # one realized Δ
    off = json.loads(_export(store_path, "compare", "1", "2", "--format", "json", "--bootstrap", "0"))
    assert all(r["reachable_delta_lo"] is None for r in off)
    again = json.loads(_export(store_path, "compare", "1", "2", "--format", "json", "--bootstrap", "400"))
    assert again == recs


def test_people_formats_fold_intervals(store_path):
    md = _export(store_path, "export", "summary", "--run", "1", "--format", "md")
    head = md.splitlines()[0]
    assert "| excess (%) | excess CI |" in head and "excess_lo" not in head and "excess lo" not in head
    assert "| 95% intervals" not in head and "Wilson" in md
    text = _export(store_path, "export", "summary", "--run", "1", "--format", "table")
    assert "Reachable vs chance control" in text and "Answer-blind selection" in text
    assert "[" in text and "control" in text
    tex = _export(store_path, "export", "passk", "--run", "1", "--format", "latex")
    assert "value CI" in tex and "control CI" in tex and all(ord(ch) < 128 for ch in tex)
    cmp_md = _export(store_path, "compare", "1", "2", "--format", "md")
    assert "Δ realized CI" in cmp_md and "Δ reachable CI" in cmp_md


def test_imported_runs_get_the_control_too(tmp_path):
    """An imported run (no model, answers extracted by the importer) has its control from the stored
    answers: each question's sample attempt 1 writes its partner's gold."""
    golds = {"a1": "10", "a2": "20", "a3": "30", "a4": "40", "a5": "50"}
    task = tmp_path / "five.jsonl"
    task.write_text("".join(json.dumps({"id": q, "question": f"q {q}?", "answer": a}) + "\n"
                            for q, a in golds.items()))
    ids, values = list(golds), list(golds.values())
    partner = C.derangement(values, "number", seed=0)
    lines = []
    for i, q in enumerate(ids):
        outs = {"realized": [f"#### {values[i]}" if i == 0 else "#### 7"],
                "sample": ["#### 99", f"so #### {values[partner[i]]}", f"#### {values[i]}" if i < 2 else "#### 98"]}
        lines += [json.dumps({"question_id": q, "probe": p, "attempt": j, "output": o})
                  for p, os_ in outs.items() for j, o in enumerate(os_)]
    gens = tmp_path / "gens.jsonl"
    gens.write_text("\n".join(lines) + "\n")
    store_path = tmp_path / "s.sqlite"
    res = CliRunner().invoke(cli, ["import", str(gens), "--task", str(task), "--model", "m", "--store",
                                   str(store_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    with Store(store_path, readonly=True) as store:
        rows = {r["probe"]: r for r in T.summary_table(store, [1]).dicts()}
    r = rows["sample"]
    assert r["reachable"] == pytest.approx(0.4) and r["control"] == 1.0 and r["excess"] == pytest.approx(-0.6)
    assert r["answers"] == 3.0 and r["no_answer"] == 0.0
    assert r["realized"] == pytest.approx(0.2) and r["robust"] == 0.0


def test_retained_gets_no_interval_when_the_gap_may_be_zero(tmp_path):
    """retained = (blind - realized) / (reachable - realized): when the gap's interval holds 0 the ratio
    is unbounded, so it gets no interval rather than a meaningless one; with no gap it has no value."""
    golds = [str(10 + i) for i in range(20)]
    task = task_with_golds("ret", golds)

    def data(n_gap):
        out = {}
        for i, q in enumerate(task.questions):
            hit = i < n_gap
            out[q.id] = {"realized": [(False, "1", -1.0)],
                         "routes": [(hit, q.answer if hit else "2", -0.5), (False, "3", -0.1)]}
        return out

    with Store(tmp_path / "r.sqlite") as store:
        wide = add_run(store, "a", task, "h1", data(20))
        narrow = add_run(store, "b", task, "h2", data(1))
        rows = {r["probe"]: r for r in T.summary_rows(store, wide, intervals=True)}
        assert rows["routes"]["gap_lo"] == rows["routes"]["gap_hi"] == 1.0
        assert rows["routes"]["retained_logprob"] == 0.0  # log-prob picks the wrong attempt everywhere
        assert rows["routes"]["retained_logprob_lo"] == rows["routes"]["retained_logprob_hi"] == 0.0
        rows = {r["probe"]: r for r in T.summary_rows(store, narrow, intervals=True)}
        assert rows["routes"]["gap"] == pytest.approx(0.05) and rows["routes"]["gap_lo"] == 0.0
        assert math.isnan(rows["routes"]["retained_vote_lo"]) and math.isnan(rows["routes"]["retained_logprob_hi"])
        # the gap is a gain (+5.0), so retained is what the definition gives, with or without intervals
        assert rows["routes"]["retained_vote"] == rows["routes"]["retained_logprob"] == 0.0
        raw = {r["probe"]: r for r in T.summary_rows(store, narrow)}
        assert raw["routes"]["retained_vote"] == pytest.approx((0.0 - 0.0) / 0.05)
        # no gap, no gain to retain: no number at all
        none = add_run(store, "c", task, "h3", data(0))
        rows = {r["probe"]: r for r in T.summary_rows(store, none, intervals=True)}
        assert rows["routes"]["gap"] == 0.0 and math.isnan(rows["routes"]["retained_vote"])
        assert math.isnan(rows["routes"]["retained_logprob"]) and math.isnan(rows["routes"]["retained_vote_lo"])
