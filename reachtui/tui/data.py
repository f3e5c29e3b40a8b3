"""What the app reads from the store (read-only, through `Store`'s queries), with the definitions of
`reachtui.outcomes`.

Pure Python (no textual, no torch), so tests and the first-paint bench can use it directly. Nothing is
decided here: `correct` comes from the graded attempts, failure sets are the frozen rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reachtui.outcomes import first_hit, realized, repaired_broken
from reachtui.probes.registry import EXPLORE, REALIZED, is_reach, ordered_names
from reachtui.tui.state import CRow, QRow

if TYPE_CHECKING:
    from reachtui.protocol import Protocol


@dataclass
class RunInfo:
    id: int
    model: str
    model_path: str | None
    num_layers: int | None
    task: str
    task_path: str | None
    protocol: Protocol | None   # None: a protocol this reachtui cannot read (the run is browsed without it)
    protocol_hash: str
    status: str
    n_questions: int
    probes: tuple[str, ...]  # reach probes, in protocol order
    n_skipped: int = 0       # questions left out: their prompts do not fit the model (--skip-long)

    def questions_label(self, n: int) -> str:
        """The header's question count: n, and how many questions the run left out (`--skip-long`)."""
        return f"n={n}" + (f", {self.n_skipped} left out (too long)" if self.n_skipped else "")

    @property
    def answer_format(self) -> str:
        return "number" if self.protocol is None else self.protocol.answer_format

    @property
    def budgets(self) -> dict[str, int]:
        """{probe: K} from the run's protocol (a probe's question is complete with K attempts)."""
        return {} if self.protocol is None else {p.name: p.budget for p in self.protocol.probes}

    @property
    def label(self) -> str:
        return printable(f"run {self.id} · {self.model} · {self.task} · {self.protocol_hash[:8]} · {self.status}")


def printable(value: Any, *, one_line: bool = False) -> Any:
    """`value` as the app shows it: a model's output, a question or an id from a file may carry escape
    sequences, CRs or bidi overrides that would move the cursor, recolour or reorder the screen; each shows
    as a visible sign instead (`tables.formats.shown`, what the terminal tables print; CRLF as a newline).
    `one_line`: a newline and a tab as signs too (a metadata key or value in a title). Anything but a string
    is returned as it is."""
    if not isinstance(value, str):
        return value
    from reachtui.tables.formats import shown

    return shown(value.replace("\r\n", "\n"), one_line=one_line)


def printable_row(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """A row as the screen shows it, every string in it `printable` (the row itself stays as read: a live
    run renders its prompt from the question as stored)."""
    return None if row is None else {k: printable(v) for k, v in row.items()}


def question_line(text: str, limit: int = 300) -> str:
    """A question's first line as the question table shows it ("" for no text). An error's first line is
    another rule: `reachtui.errors.first_line`."""
    line = text.strip().splitlines()[0] if text and text.strip() else ""
    return line[:limit]


class AuditData:
    """Read-only access to one store file through `reachtui.store.Store` (its read queries), plus the
    few joins the app needs on top. One instance per thread (sqlite connections are per thread)."""

    def __init__(self, path: str | Path) -> None:
        from reachtui.store import Store

        self.path = Path(path)
        self.store = Store(self.path, readonly=True)

    def close(self) -> None:
        self.store.close()

    # ---- runs -------------------------------------------------------------------------------------

    def runs(self) -> list[dict[str, Any]]:
        return self.store.list_runs()

    def latest_run_id(self) -> int | None:
        run = self.store.latest_run()
        return None if run is None else run["id"]

    def run(self, run_id: int) -> RunInfo:
        row = self.store.get_run(run_id)
        protocol = self.store.readable_protocol(row)   # None: browse the run without it (its tables say so)
        return RunInfo(id=row["id"], model=row["model"], model_path=row.get("model_path"),
                       num_layers=row.get("num_layers"), task=row["task"], task_path=row.get("task_path"),
                       protocol=protocol, protocol_hash=row["protocol_hash"], status=row["status"],
                       n_questions=row["n_questions"], probes=self.reach_probes(run_id, protocol),
                       n_skipped=len(self.store.skipped_questions(run_id)))

    def reach_probes(self, run_id: int, protocol: Protocol | None) -> tuple[str, ...]:
        """The run's reach probes: the protocol's, in order, then any others found in its attempts."""
        names = [p.name for p in (protocol.probes if protocol is not None else ()) if is_reach(p.name)]
        names += ordered_names(p for p in self.store.probe_names(run_id) if is_reach(p) and p not in names)
        return tuple(names)

    def run_status(self, run_id: int) -> str:
        return self.store.run_status(run_id)

    # ---- the question table -----------------------------------------------------------------------

    def rows(self, run: RunInfo) -> list[QRow]:
        """One row per question of the run, in task order: realized, and per reach probe reachable, first
        hit (1-based k) and whether all of its attempts are in (K of them, the protocol's budget; every one
        once the run is complete). From the run's stored pass when it has one (a finished run: one row per
        probe and question), else one GROUP BY over the covering index `attempts_by_answer` (most of the
        first paint of a run still going)."""
        from reachtui.control import stored_pass

        probes = run.probes
        pindex = {p: i for i, p in enumerate(probes)}
        n = len(probes)
        finished = run.status == "complete"
        budget = [run.budgets.get(p, 0) for p in probes]
        agg: dict[int, tuple[list, list, list]] = {}
        done: dict[int, bool | None] = {}
        kept = stored_pass(self.store, run.id)
        read = (REALIZED.name,) if kept is not None else (REALIZED.name, *probes)   # the pass has the rest
        for key, probe, any_ok, first, count in self.store.probe_cells(run.id, read):
            if probe == REALIZED.name:
                done[key] = realized(any_ok)   # None when ungraded (the pass does not keep that apart)
                continue
            entry = agg.get(key)
            if entry is None:
                entry = agg[key] = ([None] * n, [None] * n, [finished] * n)
            i = pindex[probe]
            entry[0][i] = bool(any_ok)
            entry[1][i] = first_hit(first)
            entry[2][i] = finished or count >= budget[i]
        for i, probe in enumerate(probes if kept is not None else ()):
            for key, cell in kept[0].get(probe, {}).items():
                entry = agg.setdefault(key, ([None] * n, [None] * n, [finished] * n))
                entry[0][i], entry[1][i], entry[2][i] = cell.hits > 0, cell.first_hit, True
        empty = ((None,) * n, (None,) * n, (finished,) * n)
        out = []
        for key, qid, question in self.store.question_texts(run.id):
            entry = agg.get(key)
            reach, first, complete = (tuple(entry[0]), tuple(entry[1]), tuple(entry[2])) if entry else empty
            out.append(QRow(key, qid, printable(question_line(question)), done.get(key), reach, first, complete))
        return out

    # ---- a comparison of two runs ---------------------------------------------------------------------

    def compare_rows(self, comparison) -> list[CRow]:
        """One row per compared question (a `reachtui.tables.compare.Comparison`), in task order."""
        from reachtui.tables.compare import CATEGORIES

        text = {qid: question for _key, qid, question in self.store.question_texts(comparison.run_a["run"])}
        out = []
        for qid, (ra, rb, _ha, _hb) in (comparison.status or {}).items():
            cats = tuple(CATEGORIES.get(comparison.cell_of(qid, "reachable", p)) for p in comparison.probes)
            out.append(CRow(qid, qid, printable(question_line(text.get(qid, ""))), (ra, rb), cats))
        return out

    def compare_detail(self, comparison, qid: str) -> dict[str, Any]:
        """The question (from run A's task) and, per run, its default attempt and the number of correct
        attempts of each common probe."""
        out: dict[str, Any] = {"runs": []}
        for run in (comparison.run_a, comparison.run_b):
            row = self.store.run_question(run["run"], qid)
            if row is None:
                out["runs"].append(None)
                continue
            key, question, gold = row
            out.setdefault("question", printable(question))
            out.setdefault("gold", gold)
            hits = self.store.probe_tallies(run["run"], key)
            default = printable_row(self.default_attempt(run["run"], key))    # shown, never run again
            out["runs"].append(dict(run=run["run"], model=run["model"], default=default,
                                    hits={p: hits.get(p) for p in comparison.probes}))
        return out

    # ---- sets -------------------------------------------------------------------------------------

    def failure_sets(self, run_id: int) -> dict[str, dict[str, Any]]:
        """probe -> the run's frozen failure set row (id, name, size, ...)."""
        out: dict[str, dict[str, Any]] = {}
        for d in self.store.failure_sets(run_id):
            out.setdefault(d["probe"], d)
        return out

    def set_members(self, set_id: int) -> set[int]:
        return set(self.store.failure_set_members(set_id))

    # ---- one question -----------------------------------------------------------------------------

    def question(self, key: int) -> dict[str, Any]:
        return self.store.question(key)

    def question_meta(self, run_id: int) -> dict[int, dict[str, Any]]:
        """{question key: its metadata} of the run's questions that have any (the task's other columns)."""
        return self.store.question_meta(run_id)

    def default_attempt(self, run_id: int, key: int) -> dict[str, Any] | None:
        return self.store.default_attempt(run_id, key)

    def hits(self, run: RunInfo, key: int, limit: int = 64) -> list[dict[str, Any]]:
        """The attempts of the run's reach probes that reached the gold answer, probe by probe (in
        `run.probes` order), in attempt order, each with the temperature it decoded at (from the protocol)."""
        hits = self.store.correct_attempts(run.id, key, run.probes, limit)
        if run.protocol is not None:    # a protocol this reachtui cannot read: no temperatures to show
            for h in hits:
                h["temperature"] = run.protocol.decoding_of(h["probe"]).temperature
        return hits

    # ---- search -----------------------------------------------------------------------------------

    def search(self, run_id: int, text: str) -> set[int]:
        """Questions of the run whose text, or one of whose outputs, match `text` (the store's FTS5)."""
        return set(self.store.search(run_id, text))

    # ---- charts -----------------------------------------------------------------------------------

    def mlp_scan(self, run_id: int) -> list[dict[str, Any]]:
        return self.store.mlp_scan(run_id)

    # ---- explorations -----------------------------------------------------------------------------

    def explorations(self, run_id: int) -> list[dict[str, Any]]:
        return self.store.explorations(run_id)

    def exploration_changes(self, run_id: int, exploration_id: int) -> tuple[set[int], set[int]]:
        """(repaired, broken): the questions the exploration's intervention turned right from a wrong
        default and wrong from a right default, from its stored `explore:<id>` attempts."""
        now, wrong, right = {}, set(), set()
        for key, correct, default in self.store.changed_by(run_id, EXPLORE.name(exploration_id)):
            now[key] = correct
            if default == 1:
                right.add(key)
            elif default == 0:
                wrong.add(key)
        return repaired_broken(wrong, right, now)


# ---- preloading (the first paint) -----------------------------------------------------------------


def preload(path: str | Path, run_id: int | None = None):
    """Start reading a run (info, rows, frozen sets) in a plain thread and return a Future of
    `(run, rows, frozen)` (None for a store without runs). `reachtui open --store` starts this before
    it imports textual: SQLite releases the GIL while it scans, so the query overlaps the imports and
    the app's start-up, and the first frame already has the rows."""
    import threading
    from concurrent.futures import Future

    fut: Future = Future()

    def work() -> None:
        try:
            data = AuditData(path)
            try:
                rid = run_id if run_id is not None else data.latest_run_id()
                if rid is None:
                    fut.set_result(None)
                    return
                run = data.run(rid)
                fut.set_result((run, data.rows(run), data.failure_sets(rid)))
            finally:
                data.close()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
            fut.set_exception(exc)

    threading.Thread(target=work, name="reachtui-preload", daemon=True).start()
    return fut
