"""The probe names are written in one module, the registry (`reachtui/probes/registry.py`): every other module
is parsed (AST) and may not hold a probe's name as a string. (Where torch, textual and ray may be imported is an
import-linter contract: tests/test_layers.py.)"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "reachtui"

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
