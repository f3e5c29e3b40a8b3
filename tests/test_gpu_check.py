"""tests/bench/gpu_check.py runs end to end at tiny sizes on a CPU (`--smoke --device cpu`), without the
packages the lent GPU machine's image lacks (textual, platformdirs, math-verify, click-default-group, plotext:
imports of them fail here, as they would there), and writes figures that say what they should: on a CPU
the identity route equals `generate`, the offloaded model equals the whole one, the (simulated) OOM backoff
halves to 1 and completes, and the demo audit on "both" devices agrees attempt for attempt. ~10 s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("accelerate")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "bench" / "gpu_check.py"

BOOT = """
import runpy, sys
BLOCKED = {"textual", "platformdirs", "math_verify", "click_default_group", "plotext", "textual_plotext"}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked (not in the GPU image)")
        return None
sys.meta_path.insert(0, Block())
sys.argv = [sys.argv[1]] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow
def test_gpu_check_smoke(tmp_path):
    out = subprocess.run([sys.executable, "-c", BOOT, str(SCRIPT), "--smoke", "--device", "cpu", "--out",
                          str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    text = (tmp_path / "gpu_check.txt").read_text()
    assert text.splitlines() == out.stdout.splitlines()
    assert "errors" not in res and "skipped" not in res

    ident = res["identity"]
    assert ident["tokens_agree"] == ident["prompts"] == 8
    assert ident["runner_s"] > 0 and ident["generate_s"] > 0
    assert "identity tokens agree: 8/8 prompts" in text
    assert [r["name"] for r in res["routes"]] == ["skip one layer", "repeat one layer", "repeat a block"]
    assert [(r["route"], r["length"]) for r in res["routes"]] == [("0-2,4-5", 5), ("0-3,3-5", 7), ("0-3,2-5", 8)]

    dm = res["device_map"]
    assert dm["devices"] == "cpu+disk" and dm["hooked_modules"] > 20
    assert dm["all_agree"] and [c["agree"] for c in dm["checks"]] == [4, 4, 4]

    oom = res["oom"]
    assert oom["simulated"] and oom["completed"] and oom["final_batch_size"] == 1
    assert oom["tried"][:3] == [6, 3, 1]

    audit = res["demo_audit"]
    assert audit["device_status"] == audit["cpu_status"] == "complete"
    assert audit["greedy_n"] == 6 * (1 + 2) and audit["greedy_identical"] == audit["greedy_n"]
    assert audit["sampled_n"] == 6 * 2 and audit["sampled_identical"] == audit["sampled_n"]
    assert audit["figures"]["device"] == audit["figures"]["cpu"]
    assert set(audit["figures"]["cpu"]) == {"realized", "sample", "routes"}
