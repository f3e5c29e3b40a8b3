"""Every runner is a `reachtui.generation.Runner`, by type: mypy checks the assignments below
(tests/test_runner_contract.py runs it on this file). Never imported by the tests themselves."""

from __future__ import annotations

from fake_runner import FakeRunner
from test_tui import FakeRunner as AppFakeRunner

from reachtui.cluster import RayRunner
from reachtui.generation import Runner
from reachtui.model.run import Runner as ModelRunner
from reachtui.serving.runner import ServerRunner


def every_runner(model: ModelRunner, server: ServerRunner, ray: RayRunner, fake: FakeRunner,
                 app_fake: AppFakeRunner) -> list[Runner]:
    return [model, server, ray, fake, app_fake]


class Forgetful(FakeRunner):
    """Not a runner: its `take_notes` wants an argument the engine does not pass."""

    def take_notes(self, since: int) -> list[str]:  # type: ignore[override]
        return []


def not_a_runner(runner: Forgetful) -> Runner:
    # refused: the check can fail (mypy runs with warn_unused_ignores, so this line errs if it is not refused)
    return runner  # type: ignore[return-value]
