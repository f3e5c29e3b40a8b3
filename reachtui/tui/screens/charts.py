"""Charts: the MLP scan (repair % and break % per layer), reachable@k curves on one plot, pass@k."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static, TabbedContent, TabPane
from textual_plotext import PlotextPlot

from reachtui.probes import registry
from reachtui.tables.mlp import best_of
from reachtui.tui.widgets.footer import FittingFooter


@dataclass
class ChartData:
    title: str
    mlp: list[dict[str, Any]] = field(default_factory=list)  # mlp_scan rows of one set
    mlp_set: str | None = None
    curves: dict[str, list[float]] = field(default_factory=dict)  # probe -> its budget curve, k = 1..K
    controls: dict[str, list[float]] = field(default_factory=dict)  # probe -> chance control@k, k = 1..K
    passk: dict[str, list[float]] = field(default_factory=dict)  # unordered probes -> pass@k, k = 1..K
    realized: float | None = None  # realized fraction
    running: str | None = None  # the audit's phase while it runs (its figures are so far)


def chart_data(data, run, running: str | None = None) -> ChartData:
    """Everything the charts show for `run`, from an `AuditData`: the MLP scan as stored, and each reach
    probe's budget curve (reachable@k or pass@k, `reachtui.curves`) and chance control@k as the summary
    table computes them."""
    from reachtui.tables import summary_rows

    from reachtui.tables.mlp import mlp_scan_table

    out = ChartData(title=run.label, running=running)
    rows = mlp_scan_table(data.store, [run.id]).dicts()
    if rows:
        sets: dict[str, list] = {}
        for r in rows:
            sets.setdefault(r["set"], []).append(r)
        out.mlp_set, out.mlp = max(sets.items(), key=lambda kv: len(kv[1]))
    summary = summary_rows(data.store, run.id, intervals=True, bootstrap=0)   # control@k, no intervals
    for row in summary[1:]:
        curve = row["reachable_at_k"] or row["pass_at_k"]
        if not curve:
            continue
        out.curves[row["probe"]] = list(curve)
        if row["pass_at_k"]:
            out.passk[row["probe"]] = [v for v in row["pass_at_k"] if not math.isnan(v)]
        if row.get("control_at_k"):
            out.controls[row["probe"]] = list(row["control_at_k"])
    if summary[0]["n_attempted"]:
        out.realized = summary[0]["realized"]
    return out


class _Chart(PlotextPlot):
    """A chart of one run's `ChartData`; `draw` fills the plot once mounted. Its title is a caption above
    it (`caption`), which wraps at words where plotext would cut a title at the plot's width; `texts` are
    the words the plot itself shows (its labels), for the tests that check nothing on screen is cut."""

    def __init__(self, cd: ChartData, **kw) -> None:
        super().__init__(**kw)
        self.cd = cd
        self.texts = ""

    def on_mount(self) -> None:
        self.draw(self.plt)

    def caption(self) -> str:
        raise NotImplementedError

    def draw(self, plt) -> None:
        raise NotImplementedError

    def label(self, plt, x: str, y: str = "%") -> None:
        plt.xlabel(x)
        plt.ylabel(y)
        self.texts += f" {x} {y}"

    def curves(self, plt, curves: dict[str, list[float]], estimator=None) -> None:
        """Curves over k = 1..K (whole numbers on the axis), the realized level beside them, 0-100%."""
        kmax = max((len(c) for c in curves.values()), default=1)
        labels = []
        for probe, curve in curves.items():
            labels.append(f"{probe} {estimator(probe) if estimator else 'pass@k (unbiased)'}")
            plt.plot(list(range(1, len(curve) + 1)), [100 * v for v in curve], marker="braille",
                     label=labels[-1], color=registry.get(probe).colour)
            control = self.cd.controls.get(probe) if estimator else None
            if control:
                labels.append(f"{probe} chance control@k")
                plt.plot(list(range(1, len(control) + 1)), [100 * v for v in control],
                         label=labels[-1], marker="dot", color=registry.get(probe).colour)
        if self.cd.realized is not None:
            labels.append("realized")
            plt.plot([1, kmax], [100 * self.cd.realized] * 2, label="realized", color="green")
        self.texts += " " + " ".join(labels)
        plt.xticks(_whole_ticks(kmax))
        self.label(plt, "k (attempts)")
        plt.ylim(0, 100)


def _whole_ticks(kmax: int, most: int = 12) -> list[int]:
    """Whole-number ticks 1..kmax, at most `most` of them."""
    step = max(1, -(-kmax // most))
    return list(range(1, kmax + 1, step))


class MlpChart(_Chart):
    def caption(self) -> str:
        cd = self.cd
        if not cd.mlp:
            if cd.running:
                return f"no MLP scan yet: the audit is still running ({cd.running}); press v again when it is done"
            return "no MLP scan in this run (reachtui audit … --mlp-scan)"
        title = f"MLP silencing scan on {cd.mlp_set} (|F|={cd.mlp[0]['failure_n']}, |R|={cd.mlp[0]['realized_n']})"
        best = best_of(cd.mlp)
        if best is None:
            return title + " · empty failure set: no best block"
        most, net = best
        return (title + f" · most repairs: layer {most['layer']} ({most['repaired']} repaired, {most['broken']} "
                f"broken) · best net: layer {net['layer']} ({net['net']:+d})")

    def draw(self, plt) -> None:
        cd = self.cd
        if not cd.mlp:
            return
        layers = [str(r["layer"]) for r in cd.mlp]
        repair = [100.0 * (r["repair_rate"] or 0.0) for r in cd.mlp]
        brk = [100.0 * (r["break_rate"] or 0.0) for r in cd.mlp]
        labels = ["repair % (failure set)", "break % (realized set)"]
        plt.multiple_bar(layers, [repair, brk], labels=labels, color=["green", "red"])
        self.texts += " " + " ".join(labels)
        self.label(plt, "silenced MLP (layer)")
        plt.ylim(0, 100)


class ReachChart(_Chart):
    def caption(self) -> str:
        if not self.cd.curves:
            return "no reach probe attempts yet"
        return "reachable@k / pass@k (braille) vs chance control@k (dots): a probe beats luck where they part"

    def draw(self, plt) -> None:
        if self.cd.curves:
            self.curves(plt, self.cd.curves,
                        estimator=lambda probe: "reachable@k" if registry.is_ordered(probe) else "pass@k")


class PassChart(_Chart):
    def caption(self) -> str:
        if not self.cd.passk:
            return "no sampling probe in this run: pass@k needs exchangeable attempts (sample)"
        return "pass@k: 1 − C(n−c,k)/C(n,k), averaged over questions"

    def draw(self, plt) -> None:
        if self.cd.passk:
            self.curves(plt, self.cd.passk)


class ChartsScreen(Screen):
    """Three tabs of charts for the open run; `1`/`2`/`3` switch, escape goes back."""

    BINDINGS = [
        Binding("escape,q,v", "app.pop_screen", "Back", id="charts.back"),
        Binding("1", "tab('mlp')", "MLP scan", id="charts.mlp"),
        Binding("2", "tab('reach')", "reachable@k", id="charts.reach"),
        Binding("3", "tab('passk')", "pass@k", id="charts.passk"),
    ]

    def __init__(self, cd: ChartData, initial: str = "mlp") -> None:
        super().__init__()
        self.cd = cd
        self.initial = initial

    def compose(self) -> ComposeResult:
        yield Static(self.cd.title, id="charts-title")
        with TabbedContent(initial=self.initial):
            for tab, name, chart in (("mlp", "MLP scan", MlpChart), ("reach", "reachable@k", ReachChart),
                                     ("passk", "pass@k", PassChart)):
                with TabPane(name, id=tab):
                    plot = chart(self.cd)
                    yield Static(plot.caption(), classes="chart-caption")
                    yield plot
        yield FittingFooter()

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab


class ComparisonChart(PlotextPlot):
    """Both runs' budget curves per common probe on one plot (A braille, B dots), so a crossover shows."""

    def __init__(self, curves: dict[str, tuple[list[float], list[float]]], **kw) -> None:
        super().__init__(**kw)
        self.curves = curves
        self.texts = "k (attempts) %"

    def on_mount(self) -> None:
        plt = self.plt
        if not self.curves:
            return
        kmax = 1
        for probe, (a, b) in self.curves.items():
            estimator = "reachable@k" if registry.is_ordered(probe) else "pass@k"
            for curve, who, marker in ((a, "A", "braille"), (b, "B", "dot")):
                if curve:
                    kmax = max(kmax, len(curve))
                    label = f"{probe} {estimator} run {who}"
                    self.texts += f" {label}"
                    plt.plot(list(range(1, len(curve) + 1)), [100 * v for v in curve], marker=marker,
                             label=label, color=registry.get(probe).colour)
        plt.xticks(_whole_ticks(kmax))
        plt.xlabel("k (attempts)")
        plt.ylabel("%")
        plt.ylim(0, 100)


def comparison_curves(data, comparison) -> dict[str, tuple[list[float], list[float]]]:
    """{probe: (run A's curve, run B's curve)} for the probes both runs have, as the summary computes them."""
    from reachtui.tables import summary_rows

    per_run = []
    for run in (comparison.run_a, comparison.run_b):
        rows = summary_rows(data.store, run["run"])
        per_run.append({r["probe"]: [v for v in (r["reachable_at_k"] or r["pass_at_k"] or []) if v == v]
                        for r in rows[1:]})
    return {p: (per_run[0].get(p, []), per_run[1].get(p, [])) for p in comparison.probes}


class ComparisonChartScreen(Screen):
    BINDINGS = [Binding("escape,q,v", "app.pop_screen", "Back", id="charts.back")]

    def __init__(self, data, comparison) -> None:
        super().__init__()
        self.curves = comparison_curves(data, comparison)
        a, b = comparison.run_a, comparison.run_b
        self.title_text = (f"run {a['run']} {a['model']} (braille) vs run {b['run']} {b['model']} (dots): "
                           f"where the curves cross, more attempts favour the other run")
        if not self.curves:
            self.title_text = "the runs share no probe with a budget curve"

    def compose(self) -> ComposeResult:
        yield Static(self.title_text, classes="chart-caption")
        yield ComparisonChart(self.curves)
        yield FittingFooter()
