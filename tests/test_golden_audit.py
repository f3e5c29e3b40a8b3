"""The golden demo audit: the engine, the store and every table give the very attempts and numbers they gave
before a refactor. `tests/golden/demo_audit.json` was written by `python tests/test_golden_audit.py --write`
(run once, on the code before the refactor); the test audits the same questions again, in a fresh process
(one torch thread, as the golden was made), and compares every stored row the audit decides (attempts,
failure sets, MLP scan, the tables' stored pass) and every exported table in every data format.

Everything the audit decides (texts, answers, grades, routes, counts, the tables' cells other than log-probs)
must be equal. Floating-point values are compared within FLOAT_TOLERANCE: torch picks its float32 kernels
(and so the order of each sum) by CPU, and a reordered float32 sum of n terms may differ by up to about
n·u relative (u = 2**-24, the unit roundoff). The demo model's longest reduction is its MLP's 448 terms, so
one layer may move a value by 448·u ≈ 2.7e-5 relative in the worst case and typically by √448·u ≈ 1.3e-6;
over 8 layers the typical drift is about 1e-5 (a second CPU gave 3.3e-6: golden −0.09889960, got
−0.09889927). 1e-4 relative lies above that drift and far below any change a code change makes (a token
more or less moves a mean log-prob by whole percents). abs 1e-6 covers log-probs near 0.

The audit runs twice: as this CPU runs it, and as a CPU without SIMD would (PLAIN_CPU: torch's, MKL's and
oneDNN's plain kernels), so every run of the slow set checks a second CPU flavour too."""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).with_name("golden") / "demo_audit.json"
AUDIT = ["audit", "demo", "--task", "demo", "--probes", "realized,sample,routes,mcts", "--budget", "4",
         "--mlp-scan", "--limit", "8", "--threads", "1"]
#: float32 reordering across CPUs (see the module's docstring): relative and absolute.
FLOAT_TOLERANCE = {"rel_tol": 1e-4, "abs_tol": 1e-6}
TABLES = ("summary", "questions", "attempts", "passk", "hits", "mlp-scan")
FORMATS = ("csv", "json", "md", "latex")
#: The stored rows an audit decides (not its times, ids of the store's own making, or versions).
ROWS = {
    "runs": "SELECT protocol_json, protocol_hash, status, source, n_questions, limit_n, batch_size FROM runs",
    "attempts": "SELECT question_id, probe, attempt, route, silenced, text, answer, rule, correct, mean_logprob, "
                "new_tokens, layers_executed, compute FROM attempts ORDER BY question_id, probe, attempt",
    "failure_sets": "SELECT fs.name, fs.probe, fs.protocol_hash, fs.size, m.question_id FROM failure_sets fs "
                    "LEFT JOIN failure_set_members m ON m.set_id = fs.id ORDER BY fs.name, m.question_id",
    "mlp_scan": "SELECT f.name, s.layer, s.failure_n, s.repaired, s.realized_n, s.broken, s.repair_rate, "
                "s.break_rate FROM mlp_scan s JOIN failure_sets f ON f.id = s.set_id ORDER BY f.name, s.layer",
    "outcomes": "SELECT * FROM outcomes ORDER BY probe, question_id",
}


def audit_and_dump(folder: Path, env: dict | None = None) -> dict:
    """Run the golden audit into a new store in `folder` (a fresh process, `env` added to its environment)
    and read back what it decided."""
    store = folder / "golden.sqlite"
    subprocess.run([sys.executable, "-m", "reachtui", *AUDIT, "--store", str(store)], check=True,
                   capture_output=True, cwd=folder, env={**os.environ, **(env or {})})
    con = sqlite3.connect(store)
    out: dict = {name: [list(r) for r in con.execute(sql)] for name, sql in ROWS.items()}
    con.close()
    from reachtui.cli import main

    for table in TABLES:
        for fmt in FORMATS:
            target = folder / f"{table}.{fmt}"
            try:
                main(["export", table, "--store", str(store), "--run", "1", "--format", fmt, "-o", str(target)])
            except SystemExit as exc:
                assert exc.code in (0, None), (table, fmt)
            out[f"export {table} {fmt}"] = target.read_text(encoding="utf-8")
    return out


def same(a, b, where: str = "") -> list[str]:
    """Where `a` and `b` differ (floats within FLOAT_TOLERANCE; JSON texts compared as parsed values)."""
    if isinstance(a, float) and isinstance(b, float):
        return [] if math.isclose(a, b, **FLOAT_TOLERANCE) or (a != a and b != b) else [where]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in same(x, y, f"{where}[{i}]")]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a.keys() ^ b.keys())}"]
        return [d for k in a for d in same(a[k], b[k], f"{where}.{k}")]
    return [] if a == b else [where]


def compare(golden: dict, got: dict) -> list[str]:
    diffs = []
    for key in golden:
        a, b = golden[key], got.get(key)
        if key.endswith(" json"):
            a, b = json.loads(a), json.loads(b)
        elif key.startswith("export ") and not key.endswith(" json") and a != b:
            # csv/md/latex write the log-probs too: compare their cells, floats within FLOAT_TOLERANCE
            a, b = _cells(a), _cells(b or "")
        diffs += same(a, b, key)
    return diffs


def _cells(text: str) -> list[list]:
    """A csv, Markdown or LaTeX table as rows of cells (split at `,`, `|` or `&`), numbers parsed."""
    return [[_num(c.strip().removesuffix("\\\\").strip()) for c in re.split(r"[,|&]", line)]
            for line in text.splitlines()]


def _num(cell: str):
    try:
        return float(cell) if any(ch in cell for ch in ".e") else cell
    except ValueError:
        return cell


#: A second CPU flavour on this machine: torch's kernels without SIMD (ATen's "default" capability), MKL's
#: matrix products on SSE4.2 and oneDNN's on SSE4.1: other kernels, so other orders of each float32 sum.
PLAIN_CPU = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"}


@pytest.mark.slow
@pytest.mark.parametrize("cpu", [{}, PLAIN_CPU], ids=["this-cpu", "plain-cpu"])
def test_the_golden_demo_audit_gives_the_same_attempts_and_tables(tmp_path, cpu):
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = audit_and_dump(tmp_path, cpu)
    assert len(got["attempts"]) == len(golden["attempts"]) > 100
    assert compare(golden, got) == []


def test_the_golden_comparison_forgives_float32_reordering_and_nothing_else():
    """The tolerance takes the drift a second CPU gave and refuses what a code change gives."""
    golden = {"attempts": [["q1", "realized", 0, "the answer is 6", -0.09889960]],
              "export attempts csv": "id,text,mean_logprob\nq1,six,-0.09889960\n",
              "export attempts md": "| id | mean_logprob |\n| q1 | -0.09889960 |\n"}
    drift = {"attempts": [["q1", "realized", 0, "the answer is 6", -0.09889927]],
             "export attempts csv": "id,text,mean_logprob\nq1,six,-0.09889927\n",
             "export attempts md": "| id | mean_logprob |\n| q1 | -0.09889927 |\n"}
    assert compare(golden, drift) == []
    changed = {"attempts": [["q1", "realized", 0, "the answer is 7", -0.0990]],
               "export attempts csv": "id,text,mean_logprob\nq1,seven,-0.09889960\n",
               "export attempts md": "| id | mean_logprob |\n| q1 | -0.0990 |\n"}
    assert compare(golden, changed) == ["attempts[0][3]", "attempts[0][4]", "export attempts csv[1][1]",
                                        "export attempts md[1][2]"]


if __name__ == "__main__":     # python tests/test_golden_audit.py --write: the golden, from the code as it is
    import tempfile

    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/test_golden_audit.py --write")
    with tempfile.TemporaryDirectory() as tmp:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(audit_and_dump(Path(tmp)), indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
