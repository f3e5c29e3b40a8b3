"""`reachtui trace` and `reachtui export lens` on the demo model: what they print, that a stored run is traced
under its own protocol, one error line for bad input, and a store left byte-identical.

The numbers themselves are tested against plain transformers in test_trace.py; here the commands must print
what the engine computes (probabilities within 1e-6: the command loads its own copy of the model, which may
run on another thread count, so float32 sums may differ in the last bits)."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
from conftest import run_main
from trace_store import twelve_question_audit

from reachtui.assets import DEMO_MODEL_DIR

pytestmark = pytest.mark.skipif(not (DEMO_MODEL_DIR / "config.json").is_file(), reason="no demo model in assets/")
torch = pytest.importorskip("torch")

TEMPLATE = "Q: {question}\nA:"


@pytest.fixture(scope="module")
def runner():
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner

    return Runner(load_model("demo", device="cpu"))


@pytest.fixture(scope="module")
def stored(tmp_path_factory, runner):
    """A small audit of twelve demo questions (demo-0026 among them) under a protocol of its own template."""
    return twelve_question_audit(tmp_path_factory.mktemp("trace"), runner, TEMPLATE)


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _close(a, b, path="") -> None:
    """Equal JSON values, floats within 1e-6."""
    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=0, abs_tol=1e-6), (path, a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


def _question(qid: str) -> dict:
    from reachtui.tasks import load_task

    q = next(q for q in load_task("demo").questions if q.id == qid)
    return dict(qid=q.id, question=q.question, gold=q.answer)


def test_trace_prints_the_divergence_the_top_k_and_the_lens():
    code, out, err = run_main(["trace", "demo", "demo-0026", "--silence", "4"])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "demo-0026 · gold 14 · demo · greedy under the protocol"
    assert lines[1].startswith("default  ✗ 28      3*7=21. 21+7=28. #### 28")
    assert "edited   ✓ 14      3*7=21. 21-7=14. #### 14↵" in lines
    assert "divergence at token 11: default '+', edited '-'" in lines
    assert "gold token '1': the gold's first token, where the default output leaves it, at token 23" in lines
    assert lines[lines.index("at token 11") + 2].split()[:3] == ["chosen", "'+'", "0.606"]
    for name, route in (("default", "route 0-7"), ("edited", "route 0-7, silence MLP 4")):
        head = lines.index(f"logit lens at token 11, {name} ({route}): rank (probability) after each route position")
        rows = [line.split() for line in lines[head + 2: head + 10]]
        assert [int(r[0]) for r in rows] == list(range(8)) == [int(r[1]) for r in rows]
        assert rows[-1][2] == ("'+'" if name == "default" else "'-'")       # the last position: the token chosen


def test_trace_json_is_what_the_engine_computes(runner):
    from reachtui.engine.trace import trace_json, trace_question
    from reachtui.intervention import Intervention
    from reachtui.protocol import Protocol

    code, out, err = run_main(["trace", "demo", "demo-0026", "--route", "0-3,3,5-7", "--position", "20", "--json"])
    assert code == 0, err
    got = json.loads(out)
    want = trace_json(trace_question(runner, Protocol(), _question("demo-0026"),
                                     Intervention.parse("0-3,3,5-7", None, 8), position=20))
    assert got.pop("model") == "demo"
    _close(got, want)
    assert got["position"] == 20 and got["outputs"]["edited"]["route"] == "0-3,3,5-7"
    assert [r["layer"] for r in got["at"]["edited"]["lens"]] == [0, 1, 2, 3, 3, 5, 6, 7]


def test_trace_of_a_stored_run_uses_its_protocol_and_leaves_the_store_alone(stored, runner):
    from reachtui.engine.trace import trace_json, trace_question
    from reachtui.intervention import Intervention

    path, run_id, protocol, _ = stored
    before = _digest(path)
    code, out, err = run_main(["trace", "--store", str(path), "demo-0026", "--silence", "4", "--json"])
    assert code == 0, err
    got = json.loads(out)
    assert got["prompt"].startswith("Q: Sofia has 3 shelves") and got["prompt"].endswith("\nA:")
    _close({k: v for k, v in got.items() if k != "model"},
           trace_json(trace_question(runner, protocol, _question("demo-0026"), Intervention(None, frozenset({4})))))
    code, out2, err = run_main(["trace", "demo", "demo-0026", "--store", str(path), "--run", str(run_id), "--silence",
                                "4", "--json"])
    assert code == 0, err
    got2 = json.loads(out2)
    assert got2.pop("model") == "demo" and got.pop("model") == str(DEMO_MODEL_DIR)    # MODEL, else the run's path
    _close(got2, got)
    assert _digest(path) == before


@pytest.mark.parametrize("args, line", [
    (["trace", "demo", "demo-9999"], "error: no question 'demo-9999' in task demo (320 questions, ids demo-0001 … "
                                     "demo-0320)"),
    (["trace", "demo-0026"], "error: give MODEL and QUESTION_ID (or QUESTION_ID alone with --store/--run: the run's "
                             "model)"),
    (["trace", "demo", "demo-0026", "--position", "-1"], "error: --position must be 0 or more, not -1"),
    (["trace", "demo", "demo-0026", "--route", "0-9"], "error: route '0-9': layer 9 is out of range (the model has 8 "
                                                       "layers: 0-7)"),
    (["trace", "demo", "demo-0026", "--silence", "4", "--position", "26"],
     "error: position 26 is out of range: the outputs have 26 and 26 tokens (positions 0-25)"),
])
def test_bad_input_is_one_line(args, line):
    code, out, err = run_main(args)
    assert (code, out, err) == (2, "", line + "\n")


def test_bad_route_syntax_and_stored_run_errors_are_one_line(stored):
    path, run_id, _, _ = stored
    before = _digest(path)
    code, out, err = run_main(["trace", "demo", "demo-0026", "--route", "3-1"])
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1
    for args, line in (
            (["trace", "--store", str(path), "demo-0026", "--task", "demo"],
             "error: --task cannot be combined with --store/--run: a stored run is traced under its own protocol and "
             "questions"),
            (["trace", "--store", str(path), "--run", str(run_id), "demo-0999"],
             f"error: no question 'demo-0999' in run {run_id} (12 questions, ids demo-0026 … demo-0011)")):
        assert run_main(args) == (2, "", line + "\n")
    assert _digest(path) == before


def test_export_lens_tabulates_the_frozen_failure_set(stored, runner):
    from reachtui.engine.trace import lens_rows

    path, run_id, protocol, members = stored
    before = _digest(path)
    code, out, err = run_main(["export", "lens", str(run_id), "--probe", "sample", "--store", str(path), "--json"])
    assert code == 0, err
    rows = json.loads(out)
    assert [r["qid"] for r in rows] == members
    want = lens_rows(runner, protocol, [_question(q) for q in members])
    for got, w in zip(rows, want):
        assert got["run"] == run_id and got["set"] == "failure:sample"
        _close({k: got[k] for k in w if k in got}, {k: w[k] for k in w if k in got})
        if got["best_rank"] is not None:
            assert got["best_rank"] <= got["final_rank"]
            assert got["pushed_out"] == (got["last_topk_position"] is not None
                                         and got["last_topk_position"] < got["positions"] - 1)
    assert "note: token = the index (from 0) of the default output's token where it leaves the gold answer" in err
    assert "members: the gold token is in the top-5 at some route position" in err
    code, out, err = run_main(["export", "lens", str(run_id), "--store", str(path), "--csv", "--columns",
                               "qid,best_rank,last_topk_layer"])
    assert code == 0 and out.splitlines()[0] == "qid,best_rank,last_topk_layer" and len(out.splitlines()) == len(rows) + 1
    assert _digest(path) == before


def test_export_lens_errors_are_one_line(stored):
    path, run_id, _, _ = stored
    assert run_main(["export", "lens", str(run_id), "--probe", "routes", "--store", str(path)]) == (
        2, "", f"error: run {run_id} has no frozen failure set failure:routes (its sets: failure:sample)\n")
    assert run_main(["export", "summary", "--probe", "sample", "--store", str(path)]) == (
        2, "", "error: --probe is for `reachtui export inspect` and `reachtui export lens`\n")


def test_the_readme_walk_through_is_what_trace_prints():
    """The README's `reachtui trace demo demo-0209 --silence 6` block, line for line: every token, rank and
    word exact; its probabilities within 2e-3 (3 printed decimals: another CPU's float32 sums may round the
    last one the other way), or 2% of a small one printed as 4.6e-07."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ reachtui trace demo demo-0209 --silence 6\n", 1)[1].split("```", 1)[0].splitlines()
    code, out, err = run_main(["trace", "demo", "demo-0209", "--silence", "6"])
    assert code == 0, err
    number = re.compile(r"\d+\.\d+(?:e-\d+)?")
    lines = out.splitlines()
    assert len(lines) == len(block)
    for got, shown in zip(lines, block):
        assert number.sub("#", got) == number.sub("#", shown), (got, shown)
        for a, b in zip(number.findall(got), number.findall(shown)):
            assert abs(float(a) - float(b)) <= 2e-3 + 0.02 * float(b), (got, shown)
