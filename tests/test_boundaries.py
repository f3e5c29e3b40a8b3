"""The house's walls, checked on the source: every module under reachtui/ is parsed (AST) and each import,
at module level or inside a function, must respect where its library may be used:

- torch, transformers, accelerate, safetensors, tokenizers: only in reachtui/model/ (the model room);
- textual, textual_plotext, textual_serve, plotext: only in reachtui/tui/ (the app);
- ray: only in reachtui/cluster.py;
- the optional extras of what goes out (issue 28): matplotlib only in reachtui/plots.py, pyarrow only in
  reachtui/tables/parquet.py, pandas only in reachtui/api.py, inspect_ai only in the Inspect log's reader
  and writer (engine/inspect_log.py, inspect_export.py).

And the probe names are written in one module: the registry (`reachtui/probes/registry.py`)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "reachtui"

ALLOWED = {
    "torch": "model/", "transformers": "model/", "accelerate": "model/", "safetensors": "model/",
    "tokenizers": "model/", "trl": "model/", "datasets": "model/",
    "textual": "tui/", "textual_plotext": "tui/", "plotext": "tui/", "textual_serve": "tui/",
    "ray": "cluster.py",
    "matplotlib": "plots.py", "pyarrow": "tables/parquet.py", "pandas": "api.py",
    "inspect_ai": ("engine/inspect_log.py", "inspect_export.py"),
}
#: Modules that read the store only through its public reads and the tables: no SQL of their own.
NO_SQL = ("plots.py", "commands/plot.py", "api.py", "inspect_export.py", "tables/parquet.py")
PROBE_NAMES = {"realized", "sample", "routes", "mcts", "mcts-blind"}
REGISTRY = "probes/registry.py"
#: Strings equal to a probe name that mean something else (a protocol table, a table column, a filter).
NOT_PROBES = {
    ("protocol.py", "mcts"),                       # the protocol's [mcts] settings table
    ("tui/actions.py", "filter('realized')"),      # the app's "realized" filter (a view, not the probe)
    # the comparison view's realized transitions (the measure `compare --list realized:CELL` names)
    ("tui/actions.py", "compare_filter('realized', 'gained')"),
    ("tui/actions.py", "compare_filter('realized', 'lost')"),
    ("tui/actions.py", "compare_filter('realized', 'never')"),
}


def _imported(tree: ast.AST) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name.split(".")[0], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module.split(".")[0], node.lineno))
    return out


def boundary_violations(root: Path = ROOT) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for module, line in _imported(ast.parse(path.read_text(encoding="utf-8"))):
            room = ALLOWED.get(module)
            if room is not None and not rel.startswith(room):
                rooms = " or ".join(f"reachtui/{r}" for r in ((room,) if isinstance(room, str) else room))
                bad.append(f"reachtui/{rel}:{line}: imports {module} (allowed only in {rooms})")
    return bad


def _prose(tree: ast.AST) -> set[int]:
    """Docstrings and help texts (`help=` of click options): documentation, where names may be written."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
        if isinstance(node, ast.keyword) and node.arg == "help":
            ids |= {id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    return ids


def probe_literals(root: Path = ROOT) -> list[str]:
    """String constants outside the registry that are a probe name, or hold one quoted for SQL."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == REGISTRY:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _prose(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
                continue
            text = node.value
            if (rel, text) in NOT_PROBES:
                continue
            exact = text in PROBE_NAMES - {"realized"}
            quoted = any(f"'{name}'" in text for name in PROBE_NAMES) or any(
                f"'{prefix}:" in text for prefix in ("mlp", "explore"))
            if exact or quoted:
                bad.append(f"reachtui/{rel}:{node.lineno}: {text[:60]!r}")
    return bad


def test_libraries_stay_in_their_rooms():
    assert boundary_violations() == []


def test_a_torch_import_in_the_tables_is_caught(tmp_path):
    copy = tmp_path / "reachtui"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = next(p for p in sorted(copy.rglob("*.py")) if p.relative_to(copy).as_posix().startswith("tables"))
    target.write_text(target.read_text() + "\n\ndef _f():\n    import torch\n")
    ray = copy / "engine" / "plan.py"
    ray.write_text(ray.read_text() + "\nfrom ray import get\n")
    found = boundary_violations(copy)
    assert any(target.relative_to(copy).as_posix() in b and "imports torch" in b for b in found), found
    assert any("engine/plan.py" in b and "imports ray" in b for b in found), found


def test_probe_names_are_written_in_the_registry_only():
    assert probe_literals() == []


def test_a_probe_name_written_elsewhere_is_caught(tmp_path):
    copy = tmp_path / "reachtui"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "engine" / "plan.py"
    target.write_text(target.read_text() + '\nX = "routes"\nY = "SELECT 1 WHERE probe = \'realized\'"\n')
    found = probe_literals(copy)
    assert len([b for b in found if "engine/plan.py" in b]) == 2, found


def test_every_probe_has_its_phase_function():
    from reachtui.engine import phases
    from reachtui.probes import registry

    for probe in registry.PROBES:
        assert callable(getattr(phases, probe.phase)), probe.name


def sql_calls(root: Path = ROOT) -> list[str]:
    """`.execute(` / `.executemany(` calls in the NO_SQL modules."""
    bad = []
    for rel in NO_SQL:
        tree = ast.parse((root / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("execute", "executemany", "executescript"):
                bad.append(f"reachtui/{rel}:{node.lineno}: {node.func.attr}(")
    return bad


def test_the_output_modules_hold_no_sql():
    assert sql_calls() == []


def test_an_sql_call_in_an_output_module_is_caught(tmp_path):
    copy = tmp_path / "reachtui"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "api.py"
    target.write_text(target.read_text() + "\n\ndef _f(store):\n    return store.conn.execute('SELECT 1')\n")
    plot = copy / "plots.py"
    plot.write_text(plot.read_text() + "\n\ndef _g():\n    import pandas\n")
    assert [b for b in sql_calls(copy) if "api.py" in b and "execute(" in b]
    assert any("plots.py" in b and "imports pandas (allowed only in reachtui/api.py)" in b
               for b in boundary_violations(copy))

