"""How `reachtui open MODEL` starts the app (`Launch`): made by the command before the UI, read by the app.
No textual here: the command builds it before anything of the app is imported."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reachtui.settings import ModelAccess, Placement


@dataclass
class Launch:
    """How `reachtui open MODEL` started the app: the model to load (where `placement` says, as `access`
    allows) and, if no finished run exists, the audit job to run (a callable `job(get_runner, on_event,
    cancel) -> run_id`)."""

    model: str | None = None
    placement: Placement = field(default_factory=Placement)
    access: ModelAccess = field(default_factory=ModelAccess)
    audit_job: Any = None
    runner: Any = None      # --server: the runner, connected before the app started (reachtui.serving)
