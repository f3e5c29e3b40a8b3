"""The house's layers, checked by import-linter (`lint-imports`, the contracts in pyproject.toml): every module
and package of reachtui/ is in a layer, and the rooms import downward only (cli | api -> commands -> tui |
reports -> cluster | serving -> engine | tables | model -> control -> store | importers -> presets |
tasks -> protocol -> the core floor), rooms on one line never importing each other; torch, textual and ray
stay in their rooms, and the optional extras of what goes out (matplotlib, pyarrow, pandas, inspect_ai) in
the module that writes it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(cwd: Path) -> subprocess.CompletedProcess:
    """`lint-imports` over the package `reachtui` found first from `cwd` (the folder's own copy); its report
    without colours (older versions colour it whatever the terminal) and with lines unwrapped."""
    env = dict(os.environ, PYTHONPATH=str(cwd), NO_COLOR="1", COLUMNS="400")
    result = subprocess.run([str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True)
    result.stdout = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)
    return result


def test_every_contract_is_kept():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout
    assert "Contracts: 7 kept, 0 broken." in result.stdout


def test_every_module_is_in_a_layer():
    """A module or package of reachtui/ that no layer names could import any room: the contract would not see it."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in config if c["id"] == "layers"]
    named = {name.strip() for line in layers for name in re.split(r"[|:]", line)}
    found = {f"reachtui.{p.stem}" for p in (ROOT / "reachtui").glob("*.py") if p.name != "__init__.py"}
    found |= {f"reachtui.{p.parent.name}" for p in (ROOT / "reachtui").glob("*/__init__.py")}
    assert found - named == set()
    assert named - found == set()


def copy_of_the_package(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "reachtui", tmp_path / "reachtui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize("module, added, says", [
    # the tables importing the engine: an arrow up the layers
    ("tables/summary.py", "from reachtui.engine.plan import Work",
     ["reachtui.tables is not allowed to import reachtui.engine", "reachtui.tables.summary -> reachtui.engine.plan"]),
    # the core floor importing a room above it: the route syntax reading the store
    ("routes.py", "from reachtui.store import Store",
     ["reachtui.routes is not allowed to import reachtui.store", "reachtui.routes -> reachtui.store"]),
    # torch outside the model room
    ("store/__init__.py", "import torch",
     ["torch, transformers and their kin are imported only in reachtui/model/ BROKEN",
      "reachtui.store -> torch"]),
    # pandas outside reachtui.reports.api: the extras' wall
    ("reports/plots/files.py", "import pandas", ["reachtui.reports.plots.files -> pandas"]),
])
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, added, says):
    copy = copy_of_the_package(tmp_path)
    target = copy / "reachtui" / module
    target.write_text(target.read_text() + f"\n\ndef _late():\n    {added}\n")
    result = lint(copy)
    assert result.returncode == 1, result.stdout[-3000:]
    for line in says:
        assert line in result.stdout


#: Modules whose SQL runs on the store's connection: the store's own.
STORE_MODULES = {"store/__init__.py", "store/queries.py", "store/outcomes.py", "store/schema.py"}
#: Others that run SQL, and on what (never the store).
OWN_DATABASES = {"tables/table.py": "--where/--order run on a private in-memory copy of a built table"}
SQL_CALLS = {"execute", "executemany", "executescript", "create_function"}


def sql_outside_the_store(root: Path) -> list[str]:
    """Calls `.execute(...)` (and the other ways to run SQL on a connection) in modules outside the store's."""
    import ast

    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in STORE_MODULES or rel in OWN_DATABASES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
                bad.append(f"reachtui/{rel}:{node.lineno}: .{node.func.attr}(")
    return bad


def test_the_training_apart_contract_names_every_runtime_module_of_the_model_room():
    """import-linter's forbidden contract lists its sources one by one: a new module of model/ must join it."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (apart,) = [c for c in contracts if c["id"] == "training-apart"]
    runtime = {f"reachtui.model.{p.stem}" for p in (ROOT / "reachtui" / "model").glob("*.py") if p.stem != "__init__"}
    assert set(apart["source_modules"]) == runtime


@pytest.mark.parametrize("module", ["model/run.py", "model/load.py"])
def test_the_runtime_importing_a_training_script_breaks_the_contract(tmp_path, module):
    copy = copy_of_the_package(tmp_path)
    target = copy / "reachtui" / module
    target.write_text(target.read_text() + "\n\ndef _late():\n    from reachtui.model.training import examples\n")
    result = lint(copy)
    assert result.returncode == 1 and "the model room's runtime never imports its training scripts" in result.stdout


def test_no_sql_runs_on_the_store_outside_its_modules():
    assert sql_outside_the_store(ROOT / "reachtui") == []


def test_sql_written_in_the_tables_is_caught(tmp_path):
    copy = copy_of_the_package(tmp_path) / "reachtui"
    target = copy / "tables" / "mlp.py"
    target.write_text(target.read_text() + "\n\ndef _count(store):\n    return store.conn.execute('SELECT 1')\n")
    assert sql_outside_the_store(copy) == [f"reachtui/tables/mlp.py:{len(target.read_text().splitlines())}: .execute("]
