"""The command palette (ctrl+p): every action by a namespaced name, as Posting does (`filter: failure set
(routes)`, `layer: silence MLP 5`, `export: questions as CSV`, `run: open …`). Fixed entries come from the
action registry; the rest from the open run (its probes, layers, runs)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from reachtui.tables.registry import TABLE_SPECS
from reachtui.tui.actions import ACTIONS
from reachtui.tui.state import meta_text

Command = tuple[str, Callable[[], object], str]


def palette_commands(app) -> list[Command]:
    """(title, callback, help) for the current state of `app` (a ReachApp)."""
    main = app.main
    cmds: list[Command] = [(a.palette, partial(app.run_action, a.action, main if a.scope == "main" else app),
                            a.tooltip) for a in ACTIONS if a.palette]
    add = lambda title, cb, text="": cmds.append((title, cb, text))  # noqa: E731
    run = app.run_info
    probes = run.probes if run else ()
    for probe in probes:
        add(f"filter: failure set ({probe})", partial(main.set_filter, "failure", probe),
            f"reachable under {probe}, not realized (the frozen set when stored)")
        add(f"run: apply the intervention to failure set ({probe}) and the realized set",
            partial(app.apply_intervention, probe), "repaired / broken counts, stored as an exploration")
    n = main.intervention.num_layers if main.intervention else 0
    for i in range(n):
        add(f"layer: silence MLP {i}", partial(main.edit_layer, "silence", i), f"toggle silencing layer {i}'s MLP")
        add(f"layer: skip layer {i}", partial(main.edit_layer, "skip", i), f"toggle skipping layer {i}")
        add(f"layer: repeat layer {i}", partial(main.edit_layer, "repeat", i), f"run layer {i} twice")
    if app.audit_running:
        add("run: stop the audit", app.stop_audit, "after the current batch; the run stays resumable")
    for key, values in main.meta_values().items():
        for value in values:
            add(f"filter: {meta_text(key, value)}", partial(main.set_meta_filter, key, value),
                "the questions with this value (the task's metadata)")
    if app.last_exploration is not None:
        add(f"filter: changed by exploration #{app.last_exploration}",
            partial(main.show_changed, app.last_exploration), "the questions it repaired or broke")
    for r in app.store_runs():
        add(f"run: open run {r['id']} · {r['model']} · {r['task']} · {r['protocol_hash'][:8]} · {r['status']}",
            partial(app.open_run, r["id"]), f"browse run {r['id']} of this store")
    formats = {"csv": "CSV", "json": "JSON", "md": "Markdown", "latex": "LaTeX"}
    for table in TABLE_SPECS:         # the tables of one run the palette offers, from the tables' registry
        for fmt in table.app_formats:
            add(f"export: {table.name} as {formats[fmt]}", partial(app.export, table.name, fmt),
                f"{table.help} (the questions as filtered now), written as `reachtui export {table.name} --format "
                f"{fmt}` writes it" if table.name == "questions" else
                f"{table.help}, written as `reachtui export {table.name} --format {fmt}` writes it")
    for tab, title, text in (("mlp", "MLP scan", "repair % and break % per layer"),
                             ("reach", "reachable@k", "the reach probes' curves beside their chance control"),
                             ("passk", "pass@k", "unbiased pass@k of the sampling probes")):
        add(f"view: charts ({title})", partial(app.action_charts, tab), text)
    return cmds


class ReachCommands(Provider):
    """Commands are listed once per palette opening (`startup`), not once per keystroke."""

    async def startup(self) -> None:
        self._commands = palette_commands(self.app)

    def _all(self) -> list[Command]:
        cmds = getattr(self, "_commands", None)
        return cmds if cmds is not None else palette_commands(self.app)

    async def discover(self) -> Hits:
        for title, cb, text in self._all():
            yield DiscoveryHit(title, cb, help=text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, cb, text in self._all():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), cb, help=text)
