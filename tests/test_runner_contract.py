"""One Runner contract: `reachtui.generation.Runner` declares everything the engine and the app ask of a runner,
and every runner has all of it — the model's, the server's, Ray's and the tests' fakes. Checked twice: at run
time (every member there, every method taking the contract's arguments as the contract passes them) and by
type (mypy on tests/runner_types.py, which assigns each runner to a `Runner`).

A runner with nothing to say about a member takes `RunnerDefaults`' (no limit, no notes, nothing kept, no
trace): a runner that cannot trace says so in one line."""

from __future__ import annotations

import inspect
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fake_runner import FakeRunner
from test_tui import FakeRunner as AppFakeRunner

from reachtui.errors import ReachError
from reachtui.generation import Runner, RunnerDefaults

ROOT = Path(__file__).resolve().parents[1]

#: The contract's members: its methods, and its data (properties: a runner may hold them as attributes).
METHODS = sorted(n for n, v in vars(Runner).items() if not n.startswith("_") and inspect.isfunction(v))
DATA = sorted(n for n, v in vars(Runner).items() if not n.startswith("_") and isinstance(v, property))


def test_the_contract_names_what_the_engine_calls():
    assert METHODS == ["continuation", "forget_prefixes", "generate", "generate_many", "inspect", "lens",
                       "prompt_lengths", "ranks", "resolve", "suggest_batch_size", "take_notes", "token_texts"]
    assert DATA == ["batch_size_hint", "info", "lock", "losses", "max_positions", "num_layers", "tokenizer"]
    engine = "\n".join(p.read_text() for p in (ROOT / "reachtui" / "engine").glob("*.py"))
    assert "getattr(runner" not in engine and "getattr(self.runner" not in engine


def takes_what_the_contract_passes(impl, contract) -> list[str]:
    """Why `impl` cannot be called as the contract's `contract` is (empty: it can): every parameter of the
    contract is there, of a kind that takes it as the contract passes it (by position or by keyword), with a
    default where the contract has one; any other parameter has a default."""
    want = list(inspect.signature(contract).parameters.values())[1:]
    got = list(inspect.signature(impl).parameters.values())
    if got and got[0].name == "self":
        got = got[1:]
    by_name = {p.name: p for p in got}
    varkw = any(p.kind is p.VAR_KEYWORD for p in got)
    problems = []
    for k, w in enumerate(want):
        g = by_name.get(w.name)
        if g is None:
            if not (varkw and w.kind is w.KEYWORD_ONLY):
                problems.append(f"no parameter {w.name}")
            continue
        if w.kind is w.POSITIONAL_OR_KEYWORD and (g.kind is not g.POSITIONAL_OR_KEYWORD or got.index(g) != k):
            problems.append(f"{w.name} is not the contract's positional parameter {k}")
        if w.kind is w.KEYWORD_ONLY and g.kind not in (g.KEYWORD_ONLY, g.POSITIONAL_OR_KEYWORD):
            problems.append(f"{w.name} is not a keyword parameter")
        if w.default is not w.empty and g.default is g.empty:
            problems.append(f"{w.name} has no default")
    named = {w.name for w in want}
    problems += [f"{g.name} is not the contract's and has no default" for g in got
                 if g.name not in named and g.default is g.empty and g.kind not in (g.VAR_POSITIONAL, g.VAR_KEYWORD)]
    return problems


def test_the_signature_check_finds_what_does_not_fit():
    class Wrong:
        def generate(self, prompts, route, *, decoding=None):          # no seeds; route where intervention is
            ...

        def ranks(self, key, step, ids, extra):                          # an extra argument without a default
            ...

    assert takes_what_the_contract_passes(Wrong.generate, Runner.generate) == [
        "no parameter intervention", "no parameter seeds", "no parameter batch_size",
        "route is not the contract's and has no default"]
    assert takes_what_the_contract_passes(Wrong.ranks, Runner.ranks) == ["extra is not the contract's and has no default"]
    assert takes_what_the_contract_passes(FakeRunner.generate, Runner.generate) == []


def _runner_classes():
    from reachtui.cluster import RayRunner
    from reachtui.model.run import Runner as ModelRunner
    from reachtui.serving.runner import ServerRunner

    return [ModelRunner, ServerRunner, RayRunner, FakeRunner, AppFakeRunner]


@pytest.mark.parametrize("cls", _runner_classes(), ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_runner_has_every_method_of_the_contract(cls):
    assert issubclass(cls, RunnerDefaults)
    for name in METHODS:
        assert callable(getattr(cls, name, None)), name
        assert takes_what_the_contract_passes(getattr(cls, name), getattr(Runner, name)) == [], (cls, name)


def _model_runner():
    from engine_tiny import loaded

    from reachtui.model.run import Runner as ModelRunner

    return ModelRunner(loaded("llama"))


def test_every_runner_holds_the_contracts_data(tmp_path):
    """The data members, on runners as they are made (the Ray runner's are checked by type: its workers take a
    cluster to start)."""
    from stub_server import StubServer

    from reachtui.serving import ServerOptions, connect

    with StubServer() as stub, connect("demo", ServerOptions(stub.url)) as server:
        for runner in (_model_runner(), server, FakeRunner(), AppFakeRunner()):
            for name in DATA:
                assert hasattr(runner, name), (type(runner), name)
            assert isinstance(runner.num_layers, int) and isinstance(runner.lock, type(threading.RLock()))
            assert {"name", "path", "model_class", "device", "dtype", "load_report"} <= set(runner.info)
            assert list(runner.losses) == [] and runner.take_notes() == [] and runner.forget_prefixes() is None


def test_a_runner_that_cannot_trace_says_so_in_one_line():
    from reachtui.cluster import RayRunner
    from reachtui.serving.runner import ServerRunner

    with pytest.raises(ReachError, match=r"^this runner cannot read a generation token by token$"):
        AppFakeRunner().inspect("What is 1 + 2?", [None])
    assert ServerRunner.cannot_trace.startswith("tracing with --server: it reads the model's layers")
    assert RayRunner.cannot_trace == "tracing with --ray: a trace runs in-process, without --ray"
    for name in ("ranks", "lens"):
        with pytest.raises(ReachError, match="cannot read a generation"):
            getattr(AppFakeRunner(), name)(1, 0, [5])


def test_every_runner_is_a_runner_by_type(tmp_path):
    """mypy: tests/runner_types.py assigns every runner to a `Runner` without an error, and a runner whose
    method wants another argument is refused there (its `type: ignore` would be unused otherwise: an error)."""
    pytest.importorskip("mypy")
    # pyproject's [tool.mypy] (the one config of every type check; its mypy_path finds the tests' fakes),
    # run from the repository root on this one file, with a cold cache of its own
    out = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-color-output",
                          "tests/runner_types.py"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("Success: no issues found in 1 source file"), \
        out.stdout + out.stderr
