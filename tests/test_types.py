"""The type check: mypy, with pyproject's [tool.mypy] (the commands, the engine, the typed settings and the
runner contract), reports no error. Skipped only where mypy is not installed (it is in the `test` extra).

The second test shows the check bites where the typed settings are meant to help: a renamed field of
`ProtocolOptions` (what --temperature fills) is a type error at each place that uses it by name."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parents[1]


def mypy(cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    """`python -m mypy` run from `cwd`, its config and file list from cwd's pyproject.toml; a cache of its own
    (the repository's is left alone, and each run starts cold: no stale result)."""
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--no-color-output",
                           "--no-error-summary"], cwd=cwd, capture_output=True, text=True)


def test_the_config_checks_the_commands_the_engine_and_the_settings():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert {"reachtui/commands", "reachtui/engine", "reachtui/settings.py", "reachtui/generation.py"} <= set(
        config["files"])
    assert config["check_untyped_defs"] is True      # a function without annotations is checked too


def test_mypy_reports_no_error(tmp_path):
    result = mypy(ROOT, tmp_path / "cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "", result.stdout


def test_a_renamed_setting_is_a_type_error(tmp_path):
    shutil.copytree(ROOT / "reachtui", tmp_path / "reachtui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    settings = tmp_path / "reachtui" / "settings.py"
    text = settings.read_text(encoding="utf-8")
    field = "    temperature: float | None = None\n"
    assert text.count(field) == 1
    settings.write_text(text.replace(field, "    sample_temperature: float | None = None\n"), encoding="utf-8")
    result = mypy(tmp_path, tmp_path / "cache")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    # where the option's value becomes ProtocolOptions, and where preflight reads it into the protocol
    assert 'reachtui/commands/options.py' in out and 'Unexpected keyword argument "temperature" for ' \
        '"ProtocolOptions"' in out, out
    assert 'reachtui/commands/preflight.py' in out and '"ProtocolOptions" has no attribute "temperature"' in out, out
