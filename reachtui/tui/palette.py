"""The command palette (ctrl+p): every action by a namespaced name, as Posting does
(`filter: failure set (routes)`, `layer: silence MLP 5`, `export: questions as CSV`, `run: open …`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from reachtui.tui.app import ReachApp


def palette_commands(app: ReachApp) -> list[tuple[str, Callable[[], object], str]]:
    """(title, callback, help) for the current state of the app."""
    cmds: list[tuple[str, Callable[[], object], str]] = []
    add = lambda title, cb, text="": cmds.append((title, cb, text))  # noqa: E731
    add("filter: all questions", partial(app.set_filter, "all"), "show every question of the run")
    add("filter: realized", partial(app.set_filter, "realized"), "the default output is right")
    add("filter: unreachable", partial(app.set_filter, "unreachable"), "wrong by default and under every probe")
    run = app.run_info
    for probe in run.probes if run else ():
        add(f"filter: failure set ({probe})", partial(app.set_filter, "failure", probe),
            f"reachable under {probe}, not realized (the frozen set when stored)")
    add("filter: search…", app.action_search, "full-text search in questions and outputs")
    n = app.intervention.num_layers if app.intervention else 0
    for i in range(n):
        add(f"layer: silence MLP {i}", partial(app.edit_layer, "silence", i), f"toggle silencing layer {i}'s MLP")
    for i in range(n):
        add(f"layer: skip layer {i}", partial(app.edit_layer, "skip", i), f"toggle skipping layer {i}")
        add(f"layer: repeat layer {i}", partial(app.edit_layer, "repeat", i), f"run layer {i} twice")
    if n:
        add("layer: reset to the default route", app.action_reset_layers, "identity route, nothing silenced")
        add("layer: type a route…", app.action_edit_route, "e.g. 0-3,3,5-7 and silenced MLPs")
    add("run: live run on the selected question", app.action_live_run, "the edited intervention, now")
    for probe in run.probes if run else ():
        add(f"run: apply the intervention to failure set ({probe}) and the realized set",
            partial(app.apply_intervention, probe), "repaired / broken counts, stored as an exploration")
    add("run: explorations…", app.action_explorations, "re-open a stored exploration")
    if app._audit_running:
        add("run: stop the audit", app.stop_audit, "after the current batch; the run stays resumable")
    if app.last_exploration is not None:
        add(f"filter: changed by exploration #{app.last_exploration}",
            partial(app.show_changed, app.last_exploration), "the questions it repaired or broke")
    for r in app.store_runs():
        add(f"run: open run {r['id']} · {r['model']} · {r['task']} · {r['protocol_hash'][:8]} · {r['status']}",
            partial(app.open_run, r["id"]), f"browse run {r['id']} of this store")
    for fmt, label in (("csv", "CSV"), ("json", "JSON")):
        add(f"export: questions as {label}", partial(app.export, "questions", fmt),
            "the table as filtered now, through reachtui.tables")
    add("export: mlp-scan as CSV", partial(app.export, "mlp-scan", "csv"), "the run's MLP scan")
    add("export: summary as CSV", partial(app.export, "summary", "csv"), "one row per probe")
    add("view: charts (MLP scan)", partial(app.action_charts, "mlp"), "repair % and break % per layer")
    add("view: charts (reachable@k)", partial(app.action_charts, "reach"), "sample / routes / mcts curves")
    add("view: charts (pass@k)", partial(app.action_charts, "passk"), "unbiased pass@k of the sample probe")
    add("view: help", app.action_help, "every key")
    return cmds


class ReachCommands(Provider):
    """Commands are listed once per palette opening (`startup`), not once per keystroke."""

    async def startup(self) -> None:
        self._commands = palette_commands(self.app)  # type: ignore[arg-type]

    def _all(self) -> list[tuple[str, Callable[[], object], str]]:
        cmds = getattr(self, "_commands", None)
        return cmds if cmds is not None else palette_commands(self.app)  # type: ignore[arg-type]

    async def discover(self) -> Hits:
        for title, cb, text in self._all():
            yield DiscoveryHit(title, cb, help=text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, cb, text in self._all():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), cb, help=text)
