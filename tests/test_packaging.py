"""reachtui installs as a package: pyproject lists every package of reachtui/, and a built wheel carries
the demo model, task and import examples (as reachtui.bundled) and the app's stylesheet, and stays small. (`.ci/run` also
installs the wheel in a fresh venv and runs a demo audit from another folder.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_lists_every_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "reachtui").rglob("__init__.py")}
    assert set(config["packages"]) == found | {"reachtui.bundled"}
    assert config["package-dir"] == {"reachtui.bundled": "assets"}


@pytest.mark.slow
def test_the_wheel_carries_the_demo(tmp_path):
    shutil.rmtree(ROOT / "build", ignore_errors=True)     # setuptools' scratch folder: no stale modules
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("reachtui-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for need in ("reachtui/bundled/models/demo/model.safetensors", "reachtui/bundled/models/demo/tokenizer.json",
                 "reachtui/bundled/models/demo/config.json", "reachtui/bundled/tasks/demo.jsonl",
                 "reachtui/bundled/models/demo-tuned/model.safetensors",
                 "reachtui/bundled/models/demo-tuned/README.md",
                 "reachtui/bundled/examples/base.jsonl", "reachtui/bundled/examples/samples_demo.jsonl",
                 "reachtui/bundled/examples/demo_inspect.eval", "reachtui/bundled/examples/broken.jsonl",
                 "reachtui/bundled/examples/fewshot_demo.jsonl", "reachtui/presets/gsm8k-cot.toml",
                 "reachtui/presets/math-boxed.toml", "reachtui/presets/mc-letters.toml",
                 "reachtui/bundled/examples/demo_subjects.csv",
                 "reachtui/tui/app.tcss", "reachtui/cli.py"):
        assert need in names, need
    assert not any(n.startswith(("tests/", "store/")) or n.endswith((".svg", ".png")) for n in names)  # README art
    assert wheel.stat().st_size < 20 * 2**20      # two 7.3 MiB float32 models
