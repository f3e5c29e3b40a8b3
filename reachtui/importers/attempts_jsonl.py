"""reachtui's own import format: one attempt per line, `{"question_id", "probe", "attempt", "output"}`
(optional `"mean_logprob"`, used by the log-prob blind selector). Probe `realized` (attempt 0) is the default
deployment output; the reachability probes have attempts numbered 0, 1, 2, ... per question (routes/mcts in
the order they were generated: that order gives first hits)."""

from __future__ import annotations

from pathlib import Path

from reachtui import jsonl
from reachtui.errors import ReachError
from reachtui.importers.records import Parsed, Record, finite, need
from reachtui.probes import registry


def read_jsonl(path: Path, task) -> Parsed:
    ids = {q.id for q in task.questions}
    known = registry.names(registry.PROBES)
    records: list[Record] = []
    first_at: dict[tuple[str, str, int], int] = {}
    for i, obj in jsonl.objects(path):
        qid = need(path, i, obj, "question_id")
        probe = need(path, i, obj, "probe")
        attempt = need(path, i, obj, "attempt")
        output = need(path, i, obj, "output")
        if isinstance(qid, bool) or not isinstance(qid, (str, int)):
            raise ReachError(f"{path}:{i}: question_id must be text or an integer, not {qid!r}")
        qid = str(qid)
        if qid not in ids:
            raise ReachError(f"{path}:{i}: unknown question id {qid!r} (not in task {task.name})")
        if not isinstance(probe, str) or probe not in known:
            raise ReachError(f"{path}:{i}: unknown probe {probe!r} (known: {', '.join(known)})")
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
            raise ReachError(f"{path}:{i}: attempt must be an integer >= 0, not {attempt!r}")
        if probe == registry.REALIZED.name and attempt != 0:
            raise ReachError(f"{path}:{i}: the realized probe has one attempt per question: attempt 0")
        if not isinstance(output, str):
            raise ReachError(f"{path}:{i}: output must be text, not {type(output).__name__}")
        lp = obj.get("mean_logprob")
        if lp is not None:
            if isinstance(lp, bool) or not isinstance(lp, (int, float)) or not finite(lp):
                raise ReachError(f"{path}:{i}: mean_logprob must be a finite number or null, not {lp!r}")
            lp = float(lp)
        key = (qid, probe, attempt)
        if key in first_at:
            raise ReachError(f"{path}:{i}: duplicate attempt {attempt} of probe {probe} for question {qid} "
                             f"(first at line {first_at[key]})")
        first_at[key] = i
        records.append(Record(i, qid, probe, attempt, output, lp))
    if not records:
        raise ReachError(f"{path}: no attempts in the file")
    return Parsed(records, source="jsonl")
