"""`reachtui compare`: deltas, question-level transitions and McNemar p-values on hand-built runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from tables_fixtures import add_run, make_task

from reachtui import tables as T
from reachtui.cli import cli
from reachtui.store import Store

# Hand-built transitions over the 20 questions q000..q019 both runs have (A = run 1, B = run 2):
REALIZED = {"kept": range(0, 3), "lost": [3], "gained": range(4, 11), "never": range(11, 20)}
ROUTES = {"kept": range(0, 10), "lost": range(10, 15), "gained": [15], "never": range(16, 20)}
SAMPLE = {"kept": range(0, 12), "lost": [], "gained": [12, 13], "never": range(14, 20)}


def _side(cells, in_a: bool) -> set[int]:
    """The questions that count as in (realized/reachable) in run A, or in run B."""
    return {i for c in (("kept", "lost") if in_a else ("kept", "gained")) for i in cells[c]}


def _run_data(task, which: str, questions, extra_probe=None):
    real = _side(REALIZED, which == "a")
    routes = _side(ROUTES, which == "a")
    sample = _side(SAMPLE, which == "a")
    data = {}
    for i in questions:
        q = task.questions[i]
        gold = q.answer
        per = {"realized": [(i in real, gold if i in real else "-1", -0.5)],
               # the hit (if any) at attempt i % 4, so first hits differ
               "routes": [(i in routes and j == i % 4, gold if (i in routes and j == i % 4) else "-1", -1.0)
                          for j in range(4)],
               "sample": [(i in sample and j == 3, gold if (i in sample and j == 3) else "-2", -1.0)
                          for j in range(4)]}
        if extra_probe:
            per[extra_probe] = [(True, gold, -0.1)]
        data[q.id] = per
    return data


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("compare") / "audit.sqlite"
    task = make_task("arith", 22)
    with Store(path) as store:
        # A has q000..q020, B has q000..q019 and q021: they share q000..q019.
        add_run(store, "base", task, "proto1", _run_data(task, "a", list(range(21))))
        add_run(store, "trained", task, "proto1", _run_data(task, "b", list(range(20)) + [21], "mcts"))
        # another default deployment (shorter answers): not comparable
        add_run(store, "other", task, "proto2", _run_data(task, "b", list(range(20))),
                protocol={"answer_format": "number", "max_new_tokens": 32,
                          "probes": [{"name": "routes", "budget": 4}, {"name": "sample", "budget": 4}]})
    return path


def _json(store_path, *args):
    res = CliRunner().invoke(cli, ["compare", *args, "--store", str(store_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


def test_deltas_transitions_and_p_values(store_path):
    res = _json(store_path, "1", "2", "--format", "json")
    rows = {r["probe"]: r for r in json.loads(res.stdout)}
    assert set(rows) == {"sample", "routes"}  # mcts is only in run 2
    assert "probe(s) only in run 2, not compared: mcts" in res.stderr
    assert "compared on the 20 question(s) both runs have (run 1: 21, run 2: 21)" in res.stderr
    for probe, cells, a, b in (("routes", ROUTES, 0.75, 0.55), ("sample", SAMPLE, 0.60, 0.70)):
        r = rows[probe]
        assert r["n"] == 20 and r["matched"] is True
        assert r["realized_a"] == pytest.approx(0.20) and r["realized_b"] == pytest.approx(0.50)
        assert r["realized_delta"] == pytest.approx(0.30)
        assert [r[f"realized_{c}"] for c in T.CELLS] == [7, 1, 3, 9]
        assert r["realized_p"] == pytest.approx(2 * (1 + 8) / 2**8)  # gained 7, lost 1: 0.0703125
        assert r["reachable_a"] == pytest.approx(a) and r["reachable_b"] == pytest.approx(b)
        assert r["reachable_delta"] == pytest.approx(b - a)
        assert [r[f"reachable_{c}"] for c in T.CELLS] == [len(list(cells[c])) for c in T.CELLS]
    assert rows["routes"]["reachable_p"] == pytest.approx(14 / 64)  # gained 1, lost 5
    assert rows["sample"]["reachable_p"] == pytest.approx(0.5)  # gained 2, lost 0


def test_terminal_output_shows_signed_deltas_and_transitions(store_path):
    out = _json(store_path, "1", "2").stdout
    assert "+30.0" in out and "-20.0" in out and "+10.0" in out
    assert "reachable routes" in out and "0.0703" in out and "0.219" in out


def test_list_prints_question_ids_of_a_cell(store_path):
    out = _json(store_path, "1", "2", "--list", "routes:lost").stdout
    assert out.split() == [f"q{i:03d}" for i in ROUTES["lost"]]
    out = _json(store_path, "1", "2", "--list", "realized:gained").stdout
    assert out.split() == [f"q{i:03d}" for i in REALIZED["gained"]]
    out = _json(store_path, "1", "2", "--list", "reachable:gained").stdout
    assert out.splitlines() == [f"sample\tq{i:03d}" for i in SAMPLE["gained"]] + \
        [f"routes\tq{i:03d}" for i in ROUTES["gained"]]
    recs = json.loads(_json(store_path, "1", "2", "--list", "reachable:lost", "--format", "json").stdout)
    assert {(r["probe"], r["question_id"]) for r in recs} == {("routes", f"q{i:03d}") for i in ROUTES["lost"]}


def _main(*args):
    return subprocess.run([sys.executable, "-m", "reachtui", *args], capture_output=True, text=True)


def test_unmatched_protocols_are_refused_with_one_line(store_path):
    out = _main("compare", "1", "3", "--store", str(store_path))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "different default deployments (max_new_tokens 48 vs 32)" in out.stderr
    assert "--allow-unmatched" in out.stderr


def test_allow_unmatched_marks_every_output(store_path):
    out = _main("compare", "1", "3", "--store", str(store_path), "--allow-unmatched", "--format", "json")
    assert out.returncode == 0
    assert "WARNING: UNMATCHED PROTOCOLS" in out.stderr
    assert all(r["matched"] is False for r in json.loads(out.stdout))
    for fmt, mark in (("md", "**WARNING: UNMATCHED PROTOCOLS"), ("latex", r"\textbf{WARNING: UNMATCHED PROTOCOLS"),
                      ("table", "WARNING: UNMATCHED PROTOCOLS")):
        out = _main("compare", "1", "3", "--store", str(store_path), "--allow-unmatched", "--format", fmt)
        assert out.returncode == 0
        assert out.stdout.count(mark) == 3, fmt  # every table (scores, transitions, categories) is marked
        assert out.stderr.count("WARNING") == 1, fmt     # and stderr says it once
    out = _main("compare", "1", "3", "--store", str(store_path), "--allow-unmatched", "--list", "routes:kept")
    assert out.stderr.count("WARNING: UNMATCHED PROTOCOLS") == 1


def test_bad_list_and_runs_are_one_line(store_path):
    for args, msg in ((["1", "2", "--list", "routes"], "MEASURE:CELL"),
                      (["1", "2", "--list", "routes:sideways"], "unknown transition"),
                      (["1", "2", "--list", "mcts:lost"], "not in both runs"),
                      (["1", "7"], "no run 7")):
        out = _main("compare", *args, "--store", str(store_path))
        assert out.returncode == 2 and msg in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_compare_table_via_export_equals_compare(store_path):
    res = CliRunner().invoke(cli, ["export", "compare", "--run", "1", "--run", "2", "--json", "--store",
                                   str(store_path)])
    assert res.exit_code == 0
    assert json.loads(res.stdout) == json.loads(_json(store_path, "1", "2", "--format", "json").stdout)


def test_a_run_against_itself_changes_nothing(store_path):
    rows = json.loads(_json(store_path, "2", "2", "--format", "json").stdout)
    for r in rows:
        assert r["realized_delta"] == 0 and r["reachable_delta"] == 0
        assert r["realized_gained"] == r["realized_lost"] == r["reachable_gained"] == r["reachable_lost"] == 0
        assert r["realized_p"] == 1.0 and r["reachable_p"] == 1.0


def test_categories_and_the_questions_table(store_path):
    """Reach transitions under their names in the literature (preserved, expanded, shrunk, out-of-reach):
    the categories view, `--list PROBE:CATEGORY`, and one row per question with both runs' status."""
    from reachtui import tables as T
    from reachtui.store import Store

    with Store(store_path, readonly=True) as store:
        comparison = T.compare_runs(store, 1, 2)
    scores, trans, cats = T.compare_views(comparison)
    row = dict(zip(cats.column_names, next(r for r in cats.rows if r[0] == "routes")))
    cell = comparison.cells[("reachable", "routes")]
    assert (row["preserved"], row["expanded"], row["shrunk"], row["out-of-reach"]) == (
        len(cell["kept"]), len(cell["gained"]), len(cell["lost"]), len(cell["never"]))
    assert comparison.list_table("routes:shrunk").rows == comparison.list_table("routes:lost").rows
    qs = comparison.questions_table().dicts()
    assert [r["question_id"] for r in qs] == list(comparison.status)
    for r in qs:
        expected = T.compare.CATEGORIES[next(c for c, ids in cell.items() if r["question_id"] in ids)]
        assert r["category_routes"] == expected
        assert r["reachable_routes_a"] == (expected in ("preserved", "shrunk"))
    ids = _json(store_path, "1", "2", "--list", "routes:expanded").stdout.split()
    assert ids == cell["gained"]


# --------------------------------------------------------------------------------------------------
# Matched per probe: the deployment and the probe's own settings, whatever other probes a run has
# --------------------------------------------------------------------------------------------------


def _audit_like(store, model: str, task, spec, which: str, probes=("sample", "routes")) -> int:
    """A run recorded as an audit records it: its protocol and that protocol's own hash."""
    data = _run_data(task, which, list(range(20)))
    data = {q: {p: a for p, a in per.items() if p == "realized" or p in probes} for q, per in data.items()}
    for q, per in data.items():
        for p in probes:
            per[p] = (per.get(p) or [(True, "0", -0.1)])[:spec.probe(p).budget]
            per[p] += [(False, "-3", -1.0)] * (spec.probe(p).budget - len(per[p]))
    return add_run(store, model, task, spec.hash(), data, protocol=spec.to_dict())


@pytest.fixture(scope="module")
def matched_store(tmp_path_factory):
    """1: sample + routes (K = 4); 2: the same and mcts; 3: routes at K = 2; 4: max_new_tokens 32."""
    from dataclasses import replace

    from reachtui.protocol import ProbeSpec, Protocol, protocol_from_options

    base = protocol_from_options(Protocol(), probes="sample,routes", budget=4)
    path = tmp_path_factory.mktemp("matched") / "audit.sqlite"
    task = make_task("arith", 20)
    with Store(path) as store:
        _audit_like(store, "base", task, base, "a")
        _audit_like(store, "tuned", task, protocol_from_options(base, probes="sample,routes,mcts", budget=4), "b",
                    ("sample", "routes", "mcts"))
        routes2 = replace(base, probes=(base.probe("sample"), ProbeSpec("routes", budget=2)))
        _audit_like(store, "tuned-k2", task, routes2, "b")
        _audit_like(store, "tuned-short", task, protocol_from_options(base, max_new_tokens=32), "b")
    return path


def test_an_extra_probe_does_not_block_the_shared_ones(matched_store):
    """Two runs that differ only by a probe one of them adds: different protocol hashes, yet matched on the
    probes both have (the deployment and each shared probe's own settings agree), without --allow-unmatched."""
    with Store(matched_store, readonly=True) as store:
        a, b = T.run_info(store, 1), T.run_info(store, 2)
    assert a["protocol_hash"] != b["protocol_hash"]
    res = _json(matched_store, "1", "2", "--format", "json")
    rows = {r["probe"]: r for r in json.loads(res.stdout)}
    assert set(rows) == {"sample", "routes"} and all(r["matched"] is True for r in rows.values())
    assert "WARNING" not in res.stderr and "probe(s) only in run 2, not compared: mcts" in res.stderr
    assert rows["routes"]["reachable_a"] == pytest.approx(0.75) and rows["routes"]["reachable_b"] == pytest.approx(0.55)


def test_a_probe_with_other_settings_is_left_out_and_named(matched_store):
    """routes at K = 2 against K = 4: sample is compared, routes is not (a note names why); --list on routes
    says so in one line; --allow-unmatched compares it, marked unmatched under a warning."""
    res = _json(matched_store, "1", "3", "--format", "json")
    rows = {r["probe"]: r for r in json.loads(res.stdout)}
    assert set(rows) == {"sample"} and rows["sample"]["matched"] is True
    assert "routes: not matched (budget 4 vs 2): not compared (--allow-unmatched to compare it anyway)" in res.stderr
    out = _main("compare", "1", "3", "--store", str(matched_store), "--list", "routes:lost")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "probe 'routes' is not matched in runs 1 and 3 (budget 4 vs 2)" in out.stderr
    res = _json(matched_store, "1", "3", "--format", "json", "--allow-unmatched")
    rows = {r["probe"]: r for r in json.loads(res.stdout)}
    assert rows["sample"]["matched"] is True and rows["routes"]["matched"] is False
    assert res.stderr.count("WARNING: UNMATCHED PROBES: routes (budget 4 vs 2)") == 1


def test_another_max_tokens_is_refused(matched_store):
    out = _main("compare", "1", "4", "--store", str(matched_store))
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1
    assert out.stderr == ("error: runs 1 and 4 have different default deployments (max_new_tokens 48 vs 32): not a "
                          "matched comparison (--allow-unmatched to compare anyway)\n")


def test_runs_and_protocol_show_the_match_keys(matched_store):
    """`runs` and `protocol` show each run's per-probe keys: equal where two runs match on that probe."""
    from reachtui.protocol import Protocol, protocol_from_options

    base = protocol_from_options(Protocol(), probes="sample,routes", budget=4)
    keys = base.match_keys()
    out = _main("runs", "--store", str(matched_store), "--json")
    runs = {r["id"]: r for r in json.loads(out.stdout)}
    assert runs[1]["match_keys"] == keys
    assert runs[2]["match_keys"]["sample"] == keys["sample"] and runs[2]["match_keys"]["routes"] == keys["routes"]
    assert runs[3]["match_keys"]["routes"] != keys["routes"] and runs[3]["match_keys"]["sample"] == keys["sample"]
    assert runs[4]["match_keys"]["realized"] != keys["realized"]
    table = _main("runs", "--store", str(matched_store)).stdout
    assert f"  run 1: realized {keys['realized'][:8]}, sample {keys['sample'][:8]}, routes {keys['routes'][:8]}" in table
    toml = _main("protocol", "1", "--store", str(matched_store)).stdout
    assert toml.splitlines()[1] == ("# match keys: " + ", ".join(f"{p} {k}" for p, k in keys.items()))


def test_compare_takes_what_open_compare_takes(matched_store):
    """Run ids, 'latest', and model names (the model's latest complete run), in `compare` and in
    `open --compare` alike; a name with no complete run is one line naming the models there are."""
    from reachtui.commands.open import compared_runs

    by_name = _json(matched_store, "base", "tuned", "--format", "json").stdout
    assert by_name == _json(matched_store, "1", "2", "--format", "json").stdout
    assert compared_runs(matched_store, ("base", "tuned"), False) == (1, 2)
    assert compared_runs(matched_store, ("1", "latest"), True) == (1, 4)
    for cmd in (["compare", "base", "nobody"], ["open", "--compare", "base", "nobody"]):
        out = _main(*cmd, "--store", str(matched_store))
        assert out.returncode == 2 and out.stderr.count("\n") == 1
        assert ("no run 'nobody': not a run id, 'latest', or a model with a complete run (models: base, tuned, "
                "tuned-k2, tuned-short)") in out.stderr


def test_score_columns_name_the_models_and_every_heading_is_distinct(store_path):
    """`compare base trained`: the columns say which model, not which run id, and no two headings repeat."""
    from reachtui import tables as T
    from reachtui.store import Store
    from reachtui.tables.compare import side_labels
    from reachtui.tables.formats import human_header

    with Store(store_path, readonly=True) as store:
        scores = T.compare_views(T.compare_runs(store, 1, 2))[0]
    heads = [human_header(c) for c in scores.columns]
    assert "realized base (%)" in heads and "reachable trained (%)" in heads
    assert "p realized" in heads and "p reachable" in heads
    assert len(heads) == len(set(heads))
    same = side_labels({"run": 1, "model": "demo"}, {"run": 3, "model": "demo"})
    assert same == ("run 1", "run 3")
