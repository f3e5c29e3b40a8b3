"""A small real audit store for the tests of what goes out (figures, parquet, Inspect logs, the Python API):
two runs of the audit engine with the deterministic FakeRunner (no torch), probes sample, routes and mcts,
the MLP scan on failure:sample; run B differs from run A only in the fake model's answers (another model
name and seed of the probes), under the same protocol, so the two compare as matched."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from fake_runner import FakeRunner, write_task
from reachtui.cli import cli
from reachtui.engine.audit import run_audit
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tasks import load_task

N = 10
K = 6


class OtherModel(FakeRunner):
    """The fake model with other answers: its prompts carry a mark the hash sees."""

    def generate(self, prompts, intervention=None, **kw):
        return super().generate([p + " " for p in prompts], intervention, **kw)


def make_audit_store(root: Path) -> tuple[Path, Path, int, int]:
    """(store path, task path, run A, run B) under `root`."""
    task_path = write_task(root / "t.jsonl", N)
    task = load_task(str(task_path))
    protocol = Protocol(probes=(ProbeSpec("sample", budget=K), ProbeSpec("routes", budget=K),
                                ProbeSpec("mcts", budget=4)), seed=1)
    store = root / "audit.sqlite"
    with Store(store) as s:
        a = run_audit(s, FakeRunner(), model_name="base", task=task, protocol=protocol, mlp_scan="sample").run_id
        b = run_audit(s, OtherModel(), model_name="tuned", task=task, protocol=protocol, mlp_scan="sample").run_id
    return store, task_path, a, b


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    """(folder, store path, run A, run B): one store per test module that imports this fixture."""
    root = tmp_path_factory.mktemp("outputs")
    store, _task, a, b = make_audit_store(root)
    return root, store, a, b


def export_json(store: Path, table: str, *runs: int, extra: tuple[str, ...] = ()) -> list[dict]:
    """What `reachtui export TABLE --run ... --json` prints, parsed: the numbers a figure must show."""
    args = ["export", table, "--store", str(store), "--json", *extra]
    for r in runs:
        args += ["--run", str(r)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def run_of(output: str) -> int:
    return int(re.search(r"^run (\d+)$", output, re.M).group(1))
