"""The messages the app's workers post to it (workers never touch widgets)."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from reachtui.engine.progress import Progress


class RowsLoaded(Message):
    """A run's question rows and frozen sets, read in a worker."""

    def __init__(self, run, rows: list, frozen: dict[str, dict[str, Any]], progress: Progress | None = None) -> None:
        super().__init__()
        self.run, self.rows, self.frozen = run, rows, frozen
        self.progress = progress    # the audit's event the rows were read after (None: not an audit's reload)


class EngineProgress(Message):
    """A progress event of an engine job: the background audit, or an apply."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress


class ModelState(Message):
    """The model's state for the header (loading, ready, failed) and, once known, its layer count."""

    def __init__(self, text: str, num_layers: int | None = None, failed: bool = False, loading: bool = False) -> None:
        super().__init__()
        self.text, self.num_layers, self.failed, self.loading = text, num_layers, failed, loading


class LiveDone(Message):
    """A live run's result (`LivePane.result`'s fields)."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__()
        self.result = result


class TraceDone(Message):
    """A trace of the selected question (`reachtui.engine.trace.Trace`) for the trace pane."""

    def __init__(self, trace) -> None:
        super().__init__()
        self.trace = trace


class LensSorted(Message):
    """The logit lens over a failure set's members (`reachtui.engine.trace.lens_rows`), to sort it by."""

    def __init__(self, run_id: int, probe: str, rows: list[dict[str, Any]]) -> None:
        super().__init__()
        self.run_id, self.probe, self.rows = run_id, probe, rows
