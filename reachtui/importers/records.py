"""What every importer reads a file into: one `Record` per generated output, the `Parsed` file, and the
checks they share (a field that must be there, a finite number, every probe covering every question)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reachtui.errors import ReachError
from reachtui.probes import registry


@dataclass(frozen=True)
class Record:
    line: int
    qid: str  # the task's question id
    probe: str
    attempt: int
    output: str
    mean_logprob: float | None = None


@dataclass
class Parsed:
    records: list[Record]
    notes: list[str] = field(default_factory=list)
    source: str = "jsonl"
    filter: str | None = None
    targets: list[tuple[int, str, Any]] = field(default_factory=list)  # lm-eval: (line, qid, its target)
    rule: str | None = None   # inspect: how realized and the attempts were read (into the protocol and note)


def finite(value: int | float) -> bool:
    """A number a float can hold: not NaN, not ±Infinity, not 1e400 (read as Infinity) or a huge integer."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def need(path: Path, i: int, obj: dict, key: str) -> Any:
    if key not in obj:
        raise ReachError(f"{path}:{i}: missing field {key!r}")
    return obj[key]


def check_complete(path: Path, records: list[Record]) -> dict[str, int]:
    """Every probe covers every question of the file, attempts numbered 0..n-1; realized present for all
    questions or none. Returns {probe: budget K (the most attempts of a question)}."""
    by: dict[tuple[str, str], list[Record]] = {}
    questions: dict[str, int] = {}
    for r in records:
        by.setdefault((r.probe, r.qid), []).append(r)
        questions.setdefault(r.qid, r.line)
    probes = registry.ordered_names({r.probe for r in records})
    budgets = {}
    for p in probes:
        for qid, line in questions.items():
            if (p, qid) not in by:
                raise ReachError(f"{path}:{line}: question {qid} has no attempt of probe {p} "
                                 f"(every probe in the file must cover every question in it)")
        for (probe, qid), rs in by.items():
            if probe != p:
                continue
            got = sorted(r.attempt for r in rs)
            if got != list(range(len(got))):
                bad = next(r for r in sorted(rs, key=lambda r: r.attempt) if r.attempt >= len(got))
                raise ReachError(f"{path}:{bad.line}: attempts of probe {p} for question {qid} are "
                                 f"{', '.join(map(str, got))}: they must be numbered 0, 1, 2, ...")
        if p != registry.REALIZED.name:
            budgets[p] = max(len(rs) for (probe, _q), rs in by.items() if probe == p)
    return budgets
