"""The comparison view (`reachtui open --compare A B`): two runs question by question, built by the same
`reachtui.tables.compare.compare_runs` as `reachtui compare` — its numbers in the header, its transition
cells as the filters (so a filter shows exactly the ids `compare --list` gives), both runs' outputs in the
detail pane, and both runs' budget curves on one chart."""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from reachtui.tables.formats import percent
from reachtui.tui.actions import bindings
from reachtui.tui.state import CompareFilter, CRow
from reachtui.tui.widgets.fitted import Fitted
from reachtui.tui.widgets.footer import FittingFooter
from reachtui.tui.widgets.panes import mark
from reachtui.tui.widgets.question_table import ID_WIDTH, QuestionTable

CELL = 15
#: category -> (glyph, table style part): expanded and shrunk stand out, the rest is quiet
GLYPH = {"preserved": ("=", "realized"), "expanded": ("+", "reached"), "shrunk": ("−", "unreached"),
         "out-of-reach": ("·", "pending"), None: ("…", "pending")}


class CompareTable(QuestionTable):
    """One line per compared question: id, realized A→B, the reach category per probe, the question."""

    def status_segments(self, row: CRow, cur: bool, styles) -> list[Segment]:
        a, b = row.realized
        both = {(True, True): "realized", (False, True): "reached", (True, False): "unreached"}.get((a, b), "pending")
        out = [Segment(f" {_tick(a)}→{_tick(b)} ", styles[(both, cur)])]
        for cat in row.categories:
            glyph, part = GLYPH[cat]
            out.append(Segment(f" {glyph} {cat or 'pending'}"[:CELL].ljust(CELL), styles[(part, cur)]))
        return out


def _tick(v: bool | None) -> str:
    return "…" if v is None else ("✓" if v else "✗")


def header_line(probes) -> str:
    return "".join(["id".ljust(ID_WIDTH), " R A→B "] + [f" {p}"[:CELL].ljust(CELL) for p in probes] + [" question"])


def score_lines(comparison) -> list[Text]:
    """The comparison's numbers, per probe: realized and reachable in A and B, Δ with its 95% paired-
    bootstrap interval, McNemar p (the rows of `reachtui compare`); the probes and questions it leaves out,
    and why."""
    a, b = comparison.run_a, comparison.run_b
    head = Text()
    head.append(f"B run {b['run']} {b['model']}", style="bold")
    head.append(" vs ", style="dim")
    head.append(f"A run {a['run']} {a['model']}", style="bold")
    head.append(f" on {a['task']} · Δ = B − A · {comparison.n_common} questions", style="dim")
    for w in comparison.table.warnings:
        head.append(f"  {w}", style="bold red")
    lines = [head]
    for note in comparison.table.notes:     # the probes left out: unmatched, or in one run only
        if "not compared" in note or "--skip-long" in note:
            lines.append(Text(note, style="yellow"))
    for r in comparison.table.dicts():
        t = Text()
        t.append(f"{r['probe'] or 'realized only'}: ", style="bold")
        for what in ("realized", "reachable"):
            if r[f"{what}_a"] is None or r[f"{what}_a"] != r[f"{what}_a"]:
                continue
            t.append(f"{what} {percent(r[f'{what}_a'])} → {percent(r[f'{what}_b'])} ", style="")
            t.append(f"Δ {percent(r[f'{what}_delta'], r[f'{what}_delta_lo'], r[f'{what}_delta_hi'], signed=True)}",
                     style="bold green" if r[f"{what}_delta"] > 0 else "bold red" if r[f"{what}_delta"] < 0 else "")
            t.append(f" McNemar p {r[f'{what}_p']:.3g}   ", style="dim")
        lines.append(t)
    return lines


class CompareScreen(Screen):
    BINDINGS = bindings("compare")
    #: under 110 columns both runs' outputs stack under the table, as on the main screen (app.tcss)
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    def __init__(self, comparison) -> None:
        super().__init__()
        self.comparison = comparison
        self.filter = CompareFilter()
        self.rows: list[CRow] = []

    def compose(self) -> ComposeResult:
        yield Static(Text("\n").join(score_lines(self.comparison)), id="compare-scores")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Static(header_line(self.comparison.probes), id="table-header")
                yield CompareTable(id="questions")
            with VerticalScroll(id="right"):
                yield Static("", id="compare-detail")
        yield Fitted(mode="fit", sep=" ", id="status")
        yield FittingFooter()

    def on_mount(self) -> None:
        self.rows = self.app.data.compare_rows(self.comparison)
        self.apply_filter(CompareFilter())
        self.query_one(CompareTable).focus()

    @property
    def table(self) -> CompareTable:
        return self.query_one(CompareTable)

    def shown_ids(self) -> list[str]:
        f = self.filter
        if f.measure is None:
            return [r.qid for r in self.rows]
        return [q for _p, q in self.comparison.ids(f.measure, f.cell, f.probe)]

    def apply_filter(self, flt: CompareFilter) -> None:
        self.filter = flt
        keep = set(self.shown_ids())
        rows = [r for r in self.rows if r.qid in keep]
        self.table.set_rows(rows, self.comparison.probes)
        self.app.sub_title = f"{flt.label()} — {len(rows)} of {len(self.rows)}"
        self.query_one("#status", Fitted).show([
            (Text(f"compare: {flt.label()} — {len(rows)} of {len(self.rows)} questions"), 9),
            (Text("(the ids `reachtui compare --list` gives)"), 1)])

    def action_compare_filter(self, measure: str, cell: str) -> None:
        if measure == "realized":
            self.apply_filter(CompareFilter("realized", cell))
            return
        probes = self.comparison.probes
        if not probes:
            self.notify("the runs share no reachability probe", severity="warning")
            return
        f = self.filter
        same = f.measure == "reachable" and f.cell == cell and f.probe in probes
        probe = probes[(probes.index(f.probe) + 1) % len(probes)] if same else probes[0]
        self.apply_filter(CompareFilter("reachable", cell, probe))

    def action_compare_all(self) -> None:
        self.apply_filter(CompareFilter())

    @on(QuestionTable.Highlighted)
    def _highlighted(self, msg: QuestionTable.Highlighted) -> None:
        self.query_one("#compare-detail", Static).update(self.detail_text(msg.qid))

    def detail_text(self, qid: str | None) -> Text:
        """The question, its gold, and per run the default output (✓/✗, answer) and the probes' hits."""
        if qid is None:
            return Text("no question selected", style="dim")
        d = self.app.data.compare_detail(self.comparison, qid)
        t = Text()
        t.append(qid, style="bold")
        t.append("  gold ", style="dim")
        t.append(str(d.get("gold")), style="bold green")
        t.append(f"\n{d.get('question', '')}\n")
        for side, run in zip("AB", d["runs"]):
            t.append(f"\nrun {side}", style="bold")
            if run is None:
                t.append(": not in this run\n", style="dim")
                continue
            t.append(f" ({run['run']} {run['model']})  default ", style="dim")
            default = run["default"]
            if default is None:
                t.append("not yet run\n", style="dim")
            else:
                t.append_text(mark(None if default["correct"] is None else bool(default["correct"])))
                t.append(f" {default['answer'] if default['answer'] is not None else '∅'}\n", style="bold")
                t.append((default["text"] or "").strip() + "\n")
            hits = "  ".join(f"{p} {h} right" for p, h in run["hits"].items() if h)
            if hits:
                t.append(f"{hits}\n", style="dim")
        for p in self.comparison.probes:
            cell = self.comparison.cell_of(qid, "reachable", p)
            if cell is not None:
                from reachtui.tables.compare import CATEGORIES

                t.append(f"\n{p}: {CATEGORIES[cell]}", style="bold")
        return t

    def action_compare_charts(self) -> None:
        from reachtui.tui.screens.charts import ComparisonChartScreen

        self.app.push_screen(ComparisonChartScreen(self.app.data, self.comparison))
