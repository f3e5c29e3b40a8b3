"""reachtui.tables and `reachtui export`: every table in every format equals what plain SQL over the attempts says.

Stores are synthetic (the store API and random attempts, no model). Expected numbers are computed here
independently: plain SQL per question, the probes' own pass@k and answer-blind selectors in Python.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from tables_fixtures import add_run, make_task, random_data

from reachtui.tables import formats as F
from reachtui.tables import table as TV
from reachtui import stats
from reachtui import tables as T
from reachtui.cli import cli
from reachtui.errors import ReachError
from blind_reference import Candidate, blind_correct
from reachtui.curves import pass_at_k
from reachtui.store import Store
import reference  # noqa: E402

PROBES = ("sample", "routes", "mcts", "mcts-blind")
LAYERS = (0, 1, 2, 3)


def _add_mlp_scan(store: Store, run_id: int, seed: int) -> None:
    """mlp:<L> attempts on the failure:routes set and the realized set, and the scan rows counted from
    them with plain SQL (what the audit engine records)."""
    rng = random.Random(seed)
    con = store.db.conn
    fs = con.execute("SELECT id FROM failure_sets WHERE run_id = ? AND name = 'failure:routes'",
                     (run_id,)).fetchone()[0]
    members = [r[0] for r in con.execute("SELECT question_id FROM failure_set_members WHERE set_id = ?", (fs,))]
    realized = [r[0] for r in con.execute(
        "SELECT question_id FROM attempts WHERE run_id = ? AND probe = 'realized' AND correct = 1", (run_id,))]
    rows = []
    for layer in LAYERS:
        p_fix, p_keep = rng.random(), rng.random()
        for q in set(members) | set(realized):
            ok = rng.random() < (p_fix if q in members else p_keep)
            rows.append({"question_id": q, "probe": f"mlp:{layer}", "attempt": 0, "correct": ok,
                         "answer": "x", "silenced": str(layer)})
    store.insert_attempts(run_id, rows)
    scan = []
    for layer in LAYERS:
        repaired = con.execute(
            "SELECT count(*) FROM attempts a JOIN failure_set_members m ON m.question_id = a.question_id "
            "WHERE m.set_id = ? AND a.run_id = ? AND a.probe = ? AND a.correct = 1",
            (fs, run_id, f"mlp:{layer}")).fetchone()[0]
        broken = con.execute(
            "SELECT count(*) FROM attempts a JOIN attempts r ON r.question_id = a.question_id "
            "AND r.run_id = a.run_id AND r.probe = 'realized' AND r.correct = 1 "
            "WHERE a.run_id = ? AND a.probe = ? AND a.correct = 0", (run_id, f"mlp:{layer}")).fetchone()[0]
        scan.append({"set_id": fs, "layer": layer, "failure_n": len(members), "repaired": repaired,
                     "realized_n": len(realized), "broken": broken})
    store.write_mlp_scan(run_id, scan)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("tables") / "audit.sqlite"
    task = make_task("arith", 40)
    with Store(path) as store:
        r1 = add_run(store, "base", task, "abc123", random_data(task, 1, probes=PROBES, k=6))
        _add_mlp_scan(store, r1, 7)
        # A second run with uneven budgets (question 0 has only 3 samples), unfinished.
        data = random_data(task, 2, probes=("sample", "routes"), k=5)
        data["q000"]["sample"] = data["q000"]["sample"][:3]
        add_run(store, "trained", task, "abc123", data, status="running")
    return path


# -- expected numbers, computed independently --------------------------------------------------------


def _q(store, sql, *params):
    return store.db.conn.execute(sql, params).fetchall()


def expected_summary(store, run_id):
    n = _q(store, "SELECT count(*) FROM run_questions WHERE run_id = ?", run_id)[0][0]
    realized = _q(store, "SELECT count(*) FROM attempts WHERE run_id = ? AND probe = 'realized' AND correct = 1",
                  run_id)[0][0] / n
    out = {}
    for (probe,) in _q(store, "SELECT DISTINCT probe FROM attempts WHERE run_id = ? AND probe NOT IN "
                              "('realized') AND probe NOT LIKE 'mlp:%'", run_id):
        reach = _q(store, "SELECT count(*) FROM (SELECT question_id FROM attempts WHERE run_id = ? AND probe = ? "
                          "GROUP BY question_id HAVING max(correct) = 1)", run_id, probe)[0][0] / n
        cands: dict[int, list] = {}
        for q, ans, lp, ok in _q(store, "SELECT question_id, answer, mean_logprob, correct FROM attempts "
                                        "WHERE run_id = ? AND probe = ? ORDER BY question_id, attempt", run_id, probe):
            cands.setdefault(q, []).append(Candidate(ans, lp, bool(ok)))
        vote = sum(blind_correct("vote", c) for c in cands.values()) / n
        lp = sum(blind_correct("logprob", c) for c in cands.values()) / n
        size = _q(store, "SELECT count(*) FROM failure_set_members m JOIN failure_sets f ON f.id = m.set_id "
                         "WHERE f.run_id = ? AND f.name = ?", run_id, f"failure:{probe}")[0][0]
        gap = reach - realized
        out[probe] = {"n": n, "realized": realized, "reachable": reach, "gap": gap, "blind_vote": vote,
                      "blind_logprob": lp, "retained": (vote - realized) / gap if gap else math.nan,
                      "retained_logprob": (lp - realized) / gap if gap else math.nan, "failure_set_size": size}
    return out


def expected_questions(store, run_id):
    out = {}
    for qid, gold, q in _q(store, "SELECT q.qid, q.gold, q.id FROM run_questions r JOIN questions q "
                                  "ON q.id = r.question_id WHERE r.run_id = ?", run_id):
        row = {"gold": gold}
        ans, ok = _q(store, "SELECT answer, correct FROM attempts WHERE run_id = ? AND question_id = ? "
                            "AND probe = 'realized'", run_id, q)[0]
        row["answer"], row["realized"] = ans, bool(ok)
        for probe, hit, first in _q(store, "SELECT probe, max(correct), min(CASE WHEN correct THEN attempt END) "
                                           "FROM attempts WHERE run_id = ? AND question_id = ? AND probe <> "
                                           "'realized' AND probe NOT LIKE 'mlp:%' GROUP BY probe", run_id, q):
            s = probe.replace("-", "_")
            row[f"reachable_{s}"], row[f"first_hit_{s}"] = bool(hit), None if first is None else first + 1
        out[qid] = row
    return out


def expected_passk(store, run_id):
    out = {}
    for (probe,) in _q(store, "SELECT DISTINCT probe FROM attempts WHERE run_id = ? AND probe <> 'realized' "
                              "AND probe NOT LIKE 'mlp:%'", run_id):
        per_q = _q(store, "SELECT count(*), sum(correct), min(CASE WHEN correct THEN attempt END) FROM attempts "
                          "WHERE run_id = ? AND probe = ? GROUP BY question_id", run_id, probe)
        big_k = max(n for n, _, _ in per_q)
        for k in range(1, big_k + 1):
            if probe == "sample":
                vals = [pass_at_k(n, c, k) for n, c, _ in per_q if n >= k]
            else:
                vals = [1.0 if f is not None and f < k else 0.0 for n, _, f in per_q
                        if (f is not None and f < k) or n >= k]
            out[(probe, k)] = (sum(vals) / len(vals), len(vals))
    return out


# -- helpers: run the CLI, parse every format -----------------------------------------------------------


def export(store_path, *args):
    res = CliRunner().invoke(cli, ["export", *args, "--store", str(store_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def parse(text, fmt):
    """Records (dicts of strings/values) from an export."""
    if fmt == "json":
        return json.loads(text)
    if fmt == "ndjson":
        return [json.loads(line) for line in text.splitlines()]
    if fmt in ("csv", "tsv"):
        return list(csv.DictReader(io.StringIO(text), delimiter="," if fmt == "csv" else "\t"))
    if fmt == "md":
        lines = [ln for ln in text.splitlines() if ln.startswith("|")]
        head = [h.strip() for h in lines[0].strip("|").split("|")]
        return [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[2:]]
    if fmt == "latex":
        body = text.split("\\midrule\n", 1)[1].split("\\bottomrule", 1)[0]
        head_line = text.split("\\toprule\n", 1)[1].split(" \\\\", 1)[0]
        head = [h.strip() for h in head_line.split(" & ")]
        return [dict(zip(head, (c.strip() for c in ln.rstrip(" \\").split(" & "))))
                for ln in body.splitlines() if ln.strip()]
    raise AssertionError(fmt)


def value_of(cell, kind, fmt):
    """The number a cell stands for; for md/latex, fractions come back as percentages."""
    if fmt in ("json", "ndjson"):
        return cell
    if cell in ("", "–", "--"):
        return None
    if fmt in ("md", "latex"):
        cell = cell.replace("$-$", "-")
        if kind == "bool":
            return cell == "yes"
        if kind == "frac":
            return float(cell) / 100
    if kind == "bool":
        return cell == "1"
    if kind == "int":
        return int(cell)
    if kind in ("frac", "float", "pvalue"):
        return float(cell)
    return cell


def close(got, want, fmt, kind):
    if want is None or (isinstance(want, float) and math.isnan(want)):
        return got is None
    if kind == "frac" and fmt in ("md", "latex"):
        return got is not None and abs(got - want) <= 0.0005 + 1e-12
    if isinstance(want, float):
        return got is not None and math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)
    return got == want


def header_key(fmt, col):
    return F.human_header(col).replace("%", "\\%").replace("_", "\\_") if fmt == "latex" else (
        F.human_header(col) if fmt == "md" else col.name)


ALL_FORMATS = ("csv", "tsv", "json", "ndjson", "md", "latex")


# -- round trips --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_summary_round_trips(store_path, fmt):
    with Store(store_path, readonly=True) as store:
        want = {1: expected_summary(store, 1), 2: expected_summary(store, 2)}
    recs = parse(export(store_path, "summary", "--run", "all", "--format", fmt), fmt)
    cols = {c.name: c for c in T.SUMMARY_COLUMNS}
    assert len(recs) == len(want[1]) + len(want[2]) == 6
    for rec in recs:
        run = value_of(rec[header_key(fmt, cols["run"])], "int", fmt)
        probe = rec[header_key(fmt, cols["probe"])]
        for name, expected in want[run][probe].items():
            c = cols[name]
            got = value_of(rec[header_key(fmt, c)], c.kind, fmt)
            assert close(got, expected, fmt, c.kind), (fmt, run, probe, name, got, expected)


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_questions_round_trip(store_path, fmt):
    with Store(store_path, readonly=True) as store:
        want = expected_questions(store, 1)
    table = T.questions_table(Store(store_path, readonly=True), [1])
    recs = parse(export(store_path, "questions", "--run", "1", "--format", fmt), fmt)
    assert len(recs) == len(want) == 40
    qcol = header_key(fmt, table.column("question_id"))
    for rec in recs:
        exp = want[rec[qcol]]
        for name, expected in exp.items():
            c = table.column(name)
            assert close(value_of(rec[header_key(fmt, c)], c.kind, fmt), expected, fmt, c.kind), (name, rec)


@pytest.mark.parametrize("fmt", ("csv", "json", "ndjson", "tsv"))
def test_attempts_round_trip(store_path, fmt):
    recs = parse(export(store_path, "attempts", "--run", "1", "--format", fmt), fmt)
    with Store(store_path, readonly=True) as store:
        rows = _q(store, "SELECT q.qid, a.probe, a.attempt, a.answer, a.correct, a.mean_logprob, a.text "
                         "FROM attempts a JOIN questions q ON q.id = a.question_id WHERE a.run_id = 1")
    assert len(recs) == len(rows)
    got = {(r["question_id"], r["probe"], value_of(r["attempt"], "int", fmt)): r for r in recs}
    for qid, probe, attempt, ans, ok, lp, text in rows:
        r = got[(qid, probe, attempt)]
        assert value_of(r["correct"], "bool", fmt) == bool(ok)
        assert close(value_of(r["mean_logprob"], "float", fmt), lp, fmt, "float")
        assert (r["answer"] or None) == ans and (r["text"] or None) == text


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_passk_round_trips(store_path, fmt):
    cols = {c.name: c for c in T.PASSK_COLUMNS}
    for run in (1, 2):
        with Store(store_path, readonly=True) as store:
            want = expected_passk(store, run)
        recs = parse(export(store_path, "passk", "--run", str(run), "--format", fmt), fmt)
        assert len(recs) == len(want)
        for rec in recs:
            probe = rec[header_key(fmt, cols["probe"])]
            k = value_of(rec[header_key(fmt, cols["k"])], "int", fmt)
            value = value_of(rec[header_key(fmt, cols["value"])], "frac", fmt)
            counted = value_of(rec[header_key(fmt, cols["questions"])], "int", fmt)
            assert close(value, want[(probe, k)][0], fmt, "frac"), (probe, k)
            assert counted == want[(probe, k)][1]
            est = rec[header_key(fmt, cols["estimator"])]
            assert est.replace("@", "@") == ("pass@k" if probe == "sample" else "reachable@k")


def test_passk_ends_at_reachable_and_starts_at_mean_accuracy(store_path):
    with Store(store_path, readonly=True) as store:
        table = T.passk_table(store, [1])
        summary = {r["probe"]: r for r in T.summary_table(store, [1]).dicts()}
        acc = _q(store, "SELECT avg(correct) FROM attempts WHERE run_id = 1 AND probe = 'sample'")[0][0]
    rows = [r for r in table.dicts() if r["probe"] == "sample"]
    assert math.isclose(rows[0]["value"], acc)  # pass@1 = mean accuracy when every n is equal
    for probe in PROBES:
        last = [r for r in table.dicts() if r["probe"] == probe][-1]
        assert last["k"] == 6 and math.isclose(last["value"], summary[probe]["reachable"])


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_mlp_scan_round_trips(store_path, fmt):
    with Store(store_path, readonly=True) as store:
        want = {}
        for layer, f_n, rep, r_n, brk in _q(store, "SELECT layer, failure_n, repaired, realized_n, broken "
                                                   "FROM mlp_scan WHERE run_id = 1"):
            # recount from the attempts themselves
            rep2 = _q(store, "SELECT count(*) FROM attempts a JOIN failure_set_members m ON m.question_id = "
                             "a.question_id JOIN failure_sets f ON f.id = m.set_id AND f.name = 'failure:routes' "
                             "AND f.run_id = 1 WHERE a.run_id = 1 AND a.probe = ? AND a.correct = 1",
                      f"mlp:{layer}")[0][0]
            assert rep2 == rep
            want[layer] = {"failure_n": f_n, "repaired": rep, "repair_rate": rep / f_n, "realized_n": r_n,
                           "broken": brk, "break_rate": brk / r_n}
        best = max(want, key=lambda L: (want[L]["repair_rate"], -want[L]["break_rate"], -L))
    cols = {c.name: c for c in T.MLP_COLUMNS}
    recs = parse(export(store_path, "mlp-scan", "--run", "1", "--format", fmt), fmt)
    assert len(recs) == len(LAYERS)
    for rec in recs:
        layer = value_of(rec[header_key(fmt, cols["layer"])], "int", fmt)
        for name, expected in want[layer].items():
            c = cols[name]
            assert close(value_of(rec[header_key(fmt, c)], c.kind, fmt), expected, fmt, c.kind)
        assert value_of(rec[header_key(fmt, cols["best"])], "bool", fmt) == (layer == best)
        assert rec[header_key(fmt, cols["set"])] == "failure:routes"


# -- filtering, columns, output files, errors ---------------------------------------------------------------


def test_where_columns_order_limit(store_path):
    out = export(store_path, "questions", "--run", "1", "--where", "realized = 0 and reachable_routes = 1",
                 "--columns", "question_id,first_hit_routes", "--json")
    recs = json.loads(out)
    with Store(store_path, readonly=True) as store:
        members = {r[0] for r in _q(store, "SELECT q.qid FROM failure_set_members m JOIN failure_sets f ON "
                                           "f.id = m.set_id JOIN questions q ON q.id = m.question_id "
                                           "WHERE f.run_id = 1 AND f.name = 'failure:routes'")}
    assert {r["question_id"] for r in recs} == members
    assert all(set(r) == {"question_id", "first_hit_routes"} for r in recs)
    recs = json.loads(export(store_path, "summary", "--run", "1", "-c", "probe", "-c", "gap", "--order",
                             "gap desc", "--limit", "2", "--json"))
    assert len(recs) == 2 and recs[0]["gap"] >= recs[1]["gap"]
    recs = json.loads(export(store_path, "summary", "--run", "1", "--where", "probe = :p", "-p", "p", "mcts",
                             "--json"))
    assert [r["probe"] for r in recs] == ["mcts"]


def test_latest_run_is_the_default(store_path):
    recs = json.loads(export(store_path, "summary", "--json"))
    assert {r["run"] for r in recs} == {2}


def test_output_file_is_written_atomically_and_format_follows_suffix(store_path, tmp_path):
    target = tmp_path / "table1.tex"
    target.write_text("old")
    res = CliRunner().invoke(cli, ["export", "summary", "--run", "1", "--store", str(store_path), "-o",
                                   str(target)])
    assert res.exit_code == 0, res.output
    text = target.read_text()
    assert text.startswith("% Realized vs reachable") and "\\toprule" in text and "\\bottomrule" in text
    assert [p.name for p in tmp_path.iterdir()] == ["table1.tex"]  # no temp file left behind
    res = CliRunner().invoke(cli, ["export", "summary", "--store", str(store_path), "-o",
                                   str(tmp_path / "missing" / "x.csv")])
    assert res.exit_code != 0


def _main(*args):
    return subprocess.run([sys.executable, "-m", "reachtui", *args], capture_output=True, text=True)


@pytest.mark.parametrize("args, message", [
    (["export", "nope"], "unknown table 'nope'"),
    (["export", "summary", "--run", "99"], "no run 99"),
    (["export", "summary", "--run", "x"], "no run 'x': not a run id, 'latest', or a model with a complete run"),
    (["export", "summary", "--columns", "probe,nope"], "unknown column 'nope'"),
    (["export", "summary", "--where", "nope = 1"], "bad --where"),
    (["export", "summary", "--where", "1); DROP TABLE runs; --"], "bad --where"),
    (["export", "summary", "--format", "xml"], "unknown format 'xml'"),
    (["export", "summary", "--csv", "--json"], "choose one output format"),
    (["export", "compare", "--run", "1"], "needs two runs"),
])
def test_bad_requests_fail_with_one_line(store_path, args, message):
    out = _main(*args, "--store", str(store_path))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    with Store(store_path, readonly=True) as store:
        assert _q(store, "SELECT count(*) FROM runs")[0][0] == 2


def test_missing_store_is_one_line(tmp_path):
    out = _main("export", "summary", "--store", str(tmp_path / "none.sqlite"))
    assert out.returncode == 2 and out.stderr.startswith("error: no audit store")
    assert not (tmp_path / "none.sqlite").exists()


def test_unfinished_run_is_noted(store_path):
    res = CliRunner().invoke(cli, ["export", "passk", "--run", "2", "--csv", "--store", str(store_path)])
    assert res.exit_code == 0
    assert "run 2 is running" not in res.stdout  # notes never pollute the data
    with Store(store_path, readonly=True) as store:
        table = T.passk_table(store, [2])
        summary = T.summary_table(store, [2])
    assert any("fewer than 5 attempts" in n for n in table.notes)
    assert any("run 2 is running" in n for n in summary.notes)


def test_export_does_not_import_heavy_libraries(store_path, tmp_path):
    code = (
        "import sys\n"
        "from reachtui.cli import main\n"
        "try:\n"
        f"    main(['export', 'summary', '--run', '1', '--store', {str(store_path)!r}, '--format', 'latex',"
        f" '-o', {str(tmp_path / 'x.tex')!r}])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        f"main(['compare', '1', '2', '--store', {str(store_path)!r}, '--format', 'md', '-o', "
        f"{str(tmp_path / 'c.md')!r}])\n"
        "print(','.join(m for m in ('torch', 'transformers', 'textual') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
    assert (tmp_path / "x.tex").exists() and (tmp_path / "c.md").exists()


# -- formats and statistics, directly -------------------------------------------------------------------


def test_formatters_escape_and_mark():
    t = TV.Table("x", "A & B_1 50%", [TV.Column("name"), TV.Column("share", "frac"), TV.Column("d", "frac", signed=True),
                                    TV.Column("p", "pvalue"), TV.Column("ok", "bool")],
                [("a|b_c & $#{}~^\\", 0.125, -0.0333, 0.00001, True), ("z", math.nan, 0.0, 1.0, None)],
                notes=["a note"], warnings=["protocols differ"])
    md = F.render(t, "md")
    assert "a\\|b_c" in md and "| 12.5 |" in md and "-3.3" in md and "<0.001" in md and "**WARNING" in md
    tex = F.render(t, "latex")
    assert r"a|b\_c \& \$\#\{\}\textasciitilde{}\textasciicircum{}\textbackslash{}" in tex
    assert r"$-$3.3" in tex and r"share (\%)" in tex and r"\textbf{WARNING: protocols differ}" in tex
    assert tex.count("\\\\\n") == 4  # warning row, header, 2 rows
    assert json.loads(F.render(t, "json"))[1] == {"name": "z", "share": None, "d": 0.0, "p": 1.0, "ok": None}
    rows = list(csv.reader(io.StringIO(F.render(t, "csv"))))
    assert rows[1][1:] == ["0.125", "-0.0333", "1e-05", "1"] and rows[2][1] == ""
    assert "WARNING: protocols differ" in F.render(t, "table")


def test_mcnemar_against_hand_computed_values():
    # p = min(1, 2 * sum_{i<=min(b,c)} C(b+c, i) / 2^(b+c))
    assert stats.mcnemar_exact(0, 0) == 1.0
    assert stats.mcnemar_exact(1, 5) == pytest.approx(14 / 64)  # 2*(1+6)/64 = 0.21875
    assert stats.mcnemar_exact(5, 1) == pytest.approx(14 / 64)
    assert stats.mcnemar_exact(0, 3) == pytest.approx(0.25)  # 2*1/8
    assert stats.mcnemar_exact(0, 10) == pytest.approx(2 / 1024)
    assert stats.mcnemar_exact(2, 2) == 1.0  # 2*11/16 > 1
    assert stats.mcnemar_exact(3, 12) == pytest.approx(2 * (1 + 15 + 105 + 455) / 2**15)  # 0.03515625
    assert stats.mcnemar_exact(14, 5) == pytest.approx(2 * sum(math.comb(19, i) for i in range(6)) / 2**19)
    assert stats.mcnemar_exact(0, 1000) == pytest.approx(2.0**-999)  # exact for large counts, no overflow


def test_blind_sql_agrees_with_the_selectors_on_ties(tmp_path):
    """Vote ties broken by log-prob, then first appearance; NULL log-probs lowest; no answers don't vote."""
    task = make_task("ties", 6)
    g = [q.answer for q in task.questions]
    data = {
        "q000": {"realized": [(False, "9", -1.0)],
                 "sample": [(False, "9", -0.5), (True, g[0], -0.5), (True, g[0], -0.9), (False, "9", -0.2)]},
        "q001": {"realized": [(False, "9", -1.0)],
                 "sample": [(False, "9", -0.5), (True, g[1], -0.5)]},  # tie count & lp: first appearance
        "q002": {"realized": [(False, "9", -1.0)],
                 "sample": [(True, g[2], None), (False, "9", None), (False, None, -0.1)]},
        "q003": {"realized": [(True, g[3], -1.0)], "sample": [(False, None, None), (False, None, None)]},
        "q004": {"realized": [(True, g[4], -1.0)],
                 "sample": [(False, "7", -0.3), (True, g[4], -0.3), (True, g[4], -2.0), (False, "7", -0.1)]},
        # the same answer graded differently (not from the grader, but the store allows it): the pick
        # is that answer's highest-log-prob candidate, which is the correct one here
        "q005": {"realized": [(False, "9", -1.0)],
                 "sample": [(False, "5", -0.5), (True, "5", -0.1), (False, "6", -0.01)]},
    }
    with Store(tmp_path / "t.sqlite") as store:
        run = add_run(store, "m", task, "h", data)
        row = T.summary_table(store, [run]).dicts()[0]
        want = expected_summary(store, run)["sample"]
    assert row["blind_vote"] == pytest.approx(want["blind_vote"])
    assert row["blind_logprob"] == pytest.approx(want["blind_logprob"])
    # by hand: vote picks q000 "9"(wrong: count 2 vs 2, best lp -0.2 > -0.5), q001 "9" (first), q002 gold
    # (first appearance, both NULL), q003 nothing, q004 "7" (lp -0.1), q005 "5" at -0.1 (correct) -> 2/6
    assert row["blind_vote"] == pytest.approx(2 / 6)
    # logprob: q000 -0.2 "9" wrong, q001 tie -> first (wrong), q002 -0.1 no answer wrong, q003 first (wrong),
    # q004 -0.1 wrong, q005 -0.01 "6" wrong -> 0
    assert row["blind_logprob"] == 0.0


def test_select_rejects_unknown_columns():
    t = TV.Table("x", "x", [TV.Column("a", "int")], [(1,), (2,)])
    assert TV.select(t, where="a > 1").rows == [(2,)]
    with pytest.raises(ReachError, match="unknown column"):
        TV.select(t, columns=["b"])
    with pytest.raises(ReachError, match="bad --where"):
        TV.select(t, where="a >")


def test_summary_round_trip_values_match_store_queries(store_path):
    """reachtui.tables and the store's own probe_summary agree on reachable and failure counts."""
    with Store(store_path, readonly=True) as store:
        mine = {r["probe"]: r for r in T.summary_table(store, [1]).dicts()}
        theirs = {r["probe"]: r for r in reference.probe_summary(store, 1)}
    for probe in PROBES:
        assert mine[probe]["reachable"] == pytest.approx(theirs[probe]["reachable"] / theirs[probe]["n_questions"])
        assert mine[probe]["failure_set_size"] == theirs[probe]["failure"]


def _same(a, b):
    if isinstance(a, list) or isinstance(b, list):
        return a is not None and b is not None and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, float) or isinstance(b, float):
        return b is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def test_summary_rows_recomputed_with_plain_sql(store_path, tmp_path):
    """The closing summary's numbers (tables.summary_rows) equal a plain-SQL recomputation, including the
    closed-form chance 1 - (1 - 1/m)^K of a multiple-choice run."""
    task = make_task("mc", 12)
    data = random_data(task, 5, probes=("sample", "routes"), k=4)
    with Store(tmp_path / "mc.sqlite") as store:
        mc = add_run(store, "m", task, "h", data, protocol={
            "answer_format": "choice", "choices": 4,
            "probes": [{"name": "sample", "budget": 4}, {"name": "routes", "budget": 4}]})
        with Store(store_path, readonly=True) as main:
            for s, run, chance in ((store, mc, 1 - (1 - 1 / 4) ** 4), (main, 1, None)):
                budget = json.loads(s.get_run(run)["protocol_json"])["probes"][0]["budget"]
                sql = lambda q, *a: s.conn.execute(q, (run, *a)).fetchone()[0]  # noqa: E731
                n = sql("SELECT count(*) FROM run_questions WHERE run_id = ?")
                realized = sql("SELECT count(*) FROM attempts WHERE run_id = ? AND probe = 'realized' "
                               "AND attempt = 0 AND correct = 1") / n
                rows = {r["probe"]: r for r in T.summary_rows(s, run)}
                assert rows["realized"]["realized"] == pytest.approx(realized)
                for probe in ("sample", "routes"):
                    reach = sql("SELECT count(DISTINCT question_id) FROM attempts WHERE run_id = ? AND probe = ? "
                                "AND correct = 1", probe) / n
                    r = rows[probe]
                    assert (r["n"], r["budget"]) == (n, budget)
                    assert r["reachable"] == pytest.approx(reach)
                    assert r["gap"] == pytest.approx(reach - realized)
                    assert r["chance"] == (pytest.approx(chance) if chance else None)


def test_latex_is_plain_ascii_booktabs(store_path):
    tex = export(store_path, "summary", "--run", "1", "--format", "latex")
    assert re.search(r"\\begin\{tabular\}\{[lr]+\}", tex)
    assert all(ord(ch) < 128 for ch in tex), "LaTeX output must not need unicode support"


def test_the_table_registry_is_what_export_builds_lists_and_refuses(store_path, capsys):
    """One record per table: `build_table` builds each of them, `reachtui export --help` lists each with its
    help, and a name not in it is one line naming them all."""
    from reachtui.cli import main
    from reachtui.tables.registry import TABLE_SPECS

    names = [t.name for t in TABLE_SPECS]
    assert tuple(names) == T.TABLES
    with Store(store_path, readonly=True) as store:
        for spec in TABLE_SPECS:
            runs = [1, 2] if spec.pair else [1]
            assert T.build_table(store, spec.name, runs, allow_unmatched=True, bootstrap=0).name == spec.name
        with pytest.raises(ReachError, match="the compare table needs two runs"):
            T.build_table(store, "compare", [1])
    main(["export", "--help"])
    out = capsys.readouterr().out
    for spec in TABLE_SPECS:
        assert f"{spec.name:<18} {spec.help}" in out
    with pytest.raises(SystemExit) as exc:
        main(["export", "tallies", "--store", str(store_path)])
    assert exc.value.code == 2
    # `inspect` is no table but a run written as an Inspect log, `lens` a table computed with the run's model:
    # export names them too
    assert capsys.readouterr().err == (f"error: unknown table 'tallies'; choose one of {', '.join(names)}, inspect, "
                                       f"lens\n")
