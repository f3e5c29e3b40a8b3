"""The screen's state as pure data: a question's row as the table shows it, the filter, the counters.
No textual, no store: the app feeds these from `reachtui.tui.data` and draws them."""

from __future__ import annotations

from dataclasses import dataclass

from reachtui.outcomes import in_failure_set


@dataclass(slots=True)
class QRow:
    key: int  # questions.id in the store
    qid: str  # the task's question id
    text: str  # first line of the question
    realized: bool | None  # None: no default attempt yet
    reach: tuple[bool | None, ...]  # per reach probe: some attempt correct (None: no attempt yet)
    first_hit: tuple[int | None, ...]  # per reach probe: the k of its first hit (1-based)
    complete: tuple[bool, ...]  # per reach probe: all its attempts are in (its cell is final)

    def done(self, p: int) -> bool:
        """Probe p's attempts of this question are all in."""
        return self.complete[p]


def cell_status(row: QRow, p: int) -> str:
    """A question's cell under reach probe p: the probe's own outcome, as the tables count reachable
    (`reachtui.outcomes`). hit: some attempt of the probe is correct and the default output is too;
    reached: some attempt is correct and the default output is not (or not yet known): a failure-set
    member; unreached: no attempt of the probe is correct (whatever the default output did); pending:
    the audit has not written all of the probe's attempts and none is correct yet."""
    reach = row.reach[p]
    if reach:
        return "hit" if row.realized else "reached"
    if reach is None or not row.done(p):
        return "pending"
    return "unreached"


@dataclass(frozen=True)
class Filter:
    kind: str = "all"  # all | failure | realized | unreachable | changed | meta
    probe: str | None = None  # for kind == "failure"; for "changed": the exploration's label; "meta": the key
    search: str | None = None  # FTS text, combined with the kind
    value: object = None  # for kind == "meta": the metadata value the questions have

    def label(self) -> str:
        names = {"all": "all questions", "realized": "realized", "unreachable": "unreachable"}
        if self.kind == "failure":
            text = f"failure set ({self.probe})"
        elif self.kind == "changed":
            text = f"changed by {self.probe}"
        elif self.kind == "meta":
            text = meta_text(self.probe, self.value)
        else:
            text = names[self.kind]
        if self.search:
            text += f" · search “{self.search}”"
        return text


def meta_text(key: str, value: object) -> str:
    """`KEY = VALUE` as the app writes a metadata filter (palette, status line): one line whatever the key and
    the value hold (a newline, an escape sequence: shown as visible signs), the value as
    `metadata.shown_value` writes it (`"1"` the text, `1` the number, `true`)."""
    from reachtui.tasks.metadata import shown_value
    from reachtui.tables.formats import shown

    return shown(f"{key} = {shown_value(value)}", one_line=True)


def apply_filter(rows: list[QRow], probes: tuple[str, ...], flt: Filter, *,
                 members: set[int] | None = None, found: set[int] | None = None) -> list[QRow]:
    """The rows a filter shows. `members`: the frozen failure set's question keys when the store has one
    (else the live definition reachable ∧ ¬realized is used), the questions an exploration changed, or those
    with the metadata value; `found`: the search hits."""
    if flt.kind == "all":
        out = rows
    elif flt.kind == "realized":
        out = [r for r in rows if r.realized]
    elif flt.kind == "unreachable":
        out = [r for r in rows if r.realized is False and all(x is False for x in r.reach)]
    elif flt.kind in ("changed", "meta"):
        out = [r for r in rows if r.key in (members or set())]
    elif flt.kind == "failure":
        if members is not None:
            out = [r for r in rows if r.key in members]
        else:
            p = probes.index(flt.probe)
            out = [r for r in rows if in_failure_set(r.realized, r.reach[p])]
    else:
        raise ValueError(f"unknown filter {flt.kind!r}")
    if found is not None:
        out = [r for r in out if r.key in found]
    return out


@dataclass
class Counters:
    n: int  # questions in the run
    done: int  # questions with a default attempt
    realized: int
    reached: dict[str, int]  # probe -> questions with a correct attempt
    failure: dict[str, int]  # probe -> reachable and not realized (frozen set size when stored)
    complete: dict[str, int]  # probe -> questions with all of its attempts in

    def final(self, probe: str | None = None) -> bool:
        """Whether the figures of `probe` (None: realized) are final: every question has them."""
        if probe is None:
            return self.done == self.n
        return self.complete[probe] == self.n

    def share(self, k: int) -> float:
        """k questions as a share of the run's (0..1, as the tables write it)."""
        return k / self.n if self.n else float("nan")


def counters(rows: list[QRow], probes: tuple[str, ...], frozen: dict[str, int] | None = None) -> Counters:
    reached = {p: 0 for p in probes}
    failure = {p: 0 for p in probes}
    complete = {p: 0 for p in probes}
    done = realized = 0
    for r in rows:
        if r.realized is not None:
            done += 1
            realized += bool(r.realized)
        for i, p in enumerate(probes):
            if r.done(i):
                complete[p] += 1
            if r.reach[i]:
                reached[p] += 1
            if in_failure_set(r.realized, r.reach[i]):
                failure[p] += 1
    for p, size in (frozen or {}).items():
        if p in failure:
            failure[p] = size
    return Counters(len(rows), done, realized, reached, failure, complete)




@dataclass(slots=True)
class CRow:
    """A question of a comparison: realized in run A and B, and per common probe its reach category
    (preserved, expanded, shrunk, out-of-reach; None when a run lacks its attempts)."""

    key: str  # the task's question id (two runs are compared question by question by id)
    qid: str
    text: str
    realized: tuple[bool | None, bool | None]
    categories: tuple[str | None, ...]


@dataclass(frozen=True)
class CompareFilter:
    """The comparison's rows a transition cell holds: `measure` realized (cell gained, lost, kept, never) or
    reachable under `probe` (cell gained, lost, kept, never: expanded, shrunk, preserved, out-of-reach)."""

    measure: str | None = None   # None: every question
    cell: str | None = None
    probe: str | None = None

    def label(self) -> str:
        if self.measure is None:
            return "all compared questions"
        if self.measure == "realized":
            return {"gained": "realized gained (B only)", "lost": "realized lost (A only)",
                    "kept": "realized in both", "never": "wrong in both"}[self.cell]
        from reachtui.tables.compare import CATEGORIES

        return f"{self.probe}: {CATEGORIES[self.cell]}"
