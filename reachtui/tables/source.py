"""What the tables know of a run: its row and typed protocol (`run_info`, read through the store), its budgets
and closed-form chance, its reachability probes (`run_probes`), each question's hits, and the pieces several
tables share (notes on an unfinished run, interval columns).

The tables read the store only through `Store` (its queries: `reachtui/store/queries.py`,
`reachtui/store/outcomes.py`); the outcomes are defined in `reachtui.outcomes` and the probes in
`reachtui.probes.registry`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from reachtui.control import Graded, RunControl, run_control
from reachtui.probes import registry
from reachtui.tables.table import Column

is_reach_probe = registry.is_reach


def column_suffix(probe: str) -> str:
    """A probe name as a column-name suffix: "mcts-blind" -> "mcts_blind"."""
    return re.sub(r"\W", "_", probe)


def run_info(store, run_id: int) -> dict[str, Any]:
    """The run's row (`Store.get_run`: model, task, task_sha256, protocol_hash, status, source, n_questions,
    ...) with `run` (its id) and `protocol`, the typed protocol it was made under (None where this reachtui
    cannot read it: the tables then use the defaults, and it matches only a run of the same hash)."""
    row = store.get_run(run_id)
    return dict(row, run=row["id"], protocol=store.readable_protocol(row))


def budgets(info: dict[str, Any]) -> dict[str, int]:
    """{probe: K} from the run's protocol."""
    protocol = info["protocol"]
    return {} if protocol is None else {p.name: p.budget for p in protocol.probes}


def chance(info: dict[str, Any], budget: int | None) -> float | None:
    """Multiple choice with m options: 1 - (1 - 1/m)^K, the chance that K blind guesses hit."""
    protocol = info["protocol"]
    m = protocol.choices if protocol is not None and protocol.answer_format == "choice" else None
    if not m or not budget:
        return None
    return 1.0 - (1.0 - 1.0 / int(m)) ** budget


def run_probes(store, run_id: int) -> list[str]:
    """The reachability probes with attempts in the run, in display order."""
    return [p for p in store.probe_names(run_id) if is_reach_probe(p)]


def controls(store, run_ids: Sequence[int]) -> Iterator[tuple[int, dict[str, Any], RunControl]]:
    """(run id, run_info, its chance control) for each run; the runs share their graded answers."""
    graded: Graded = {}
    for run_id in run_ids:
        info = run_info(store, run_id)
        yield run_id, info, run_control(store, run_id, info["protocol"], graded)


def run_notes(info: dict[str, Any], probes_done: dict[str, int] | None, n: int) -> list[str]:
    """What a table of an unfinished run says about it."""
    notes = []
    if info["status"] != "complete":
        notes.append(f"run {info['run']} is {info['status']}: its numbers cover what has run so far")
        for probe, done in (probes_done or {}).items():
            if done < n:
                notes.append(f"run {info['run']}: {probe} has attempts for {done} of {n} questions")
    return notes


#: How many left-out question ids a table's note names.
LEFT_OUT_IDS = 5


def left_out_note(run_id: int, n_questions: int, skipped: Sequence[tuple[str, int | None]]) -> str | None:
    """The note of a run that left out questions because their prompts do not fit the model's positions
    (`--skip-long`; `skipped`: `Store.skipped_questions`), or None when it left none out."""
    k = len(skipped)
    if not k:
        return None
    ids = ", ".join(qid for qid, _ in skipped[:LEFT_OUT_IDS]) + (f" and {k - LEFT_OUT_IDS} more"
                                                                if k > LEFT_OUT_IDS else "")
    return (f"run {run_id} left out {k} of {n_questions + k} questions: their prompts do not fit the model's "
            f"positions (--skip-long; id{'s' if k > 1 else ''} {ids}); every figure is over the other {n_questions}")


def left_out_notes(store, run_ids: Sequence[int]) -> list[str]:
    """`left_out_note` of each run that left questions out: every table says it under itself."""
    notes = []
    for run_id in run_ids:
        skipped = store.skipped_questions(run_id)
        if skipped:
            notes.append(left_out_note(run_id, int(store.get_run(run_id)["n_questions"]), skipped))
    return notes


def runs_label(run_ids: Sequence[int]) -> str:
    if len(run_ids) == 1:
        return f" (run {run_ids[0]})"
    return f" (runs {', '.join(map(str, run_ids))})"


def ci_columns(name: str, label: str | None = None, signed: bool = False) -> list[Column]:
    """`name_lo`, `name_hi`: the 95% interval of column `name` (people see them folded into one)."""
    label = label or name
    return [Column(f"{name}_lo", "frac", label=f"{label} lo", signed=signed),
            Column(f"{name}_hi", "frac", label=f"{label} hi", signed=signed)]


def probe_hits(store, run_id: int, probes: Sequence[str]) -> dict[int, list]:
    """{question id: [hit under probe 0, probe 1, ...]} (some attempt correct, 0/1; None where the probe has no
    attempt of the question) for the run's questions with attempts."""
    index = {p: i for i, p in enumerate(probes)}
    out: dict[int, list] = {}
    for probe, q, hit in store.probe_hits(run_id):
        i = index.get(probe)
        if i is not None:
            row = out.get(q)
            if row is None:
                row = out[q] = [None] * len(probes)
            row[i] = hit
    return out
