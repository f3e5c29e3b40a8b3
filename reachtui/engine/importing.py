"""Importing recorded generations: a run made from a file of outputs, graded by reachtui's grader, with no
model. Pure Python (no torch, transformers, textual or click); `reachtui import` is its command.

Three formats:

- `jsonl`: one attempt per line, `{"question_id", "probe", "attempt", "output"}` (optional
  `"mean_logprob"`, used by the log-prob blind selector). Probe `realized` (attempt 0) is the default
  deployment output; the reachability probes (`sample`, `routes`, `mcts`, `mcts-blind`) have attempts
  numbered 0, 1, 2, ... per question (routes/mcts in the order they were generated: that order gives
  first hits).
- `lm-eval`: an lm-evaluation-harness `--log_samples` file (`samples_<task>_<date>.jsonl`, also .gz):
  one row per doc *per filter*, `doc_id`, `resps` (the raw generations), `filtered_resps`, `target`.
  Only one filter's rows are read (`--filter NAME`, else the first filter seen for each doc), so nothing
  is counted twice; the raw `resps` are graded, not lm-eval's filtered answers. The first response is
  the realized attempt and all responses are the `sample` probe. `doc_id` is the task's question id when
  every doc_id is one, else the 0-based position in the task file (lm-eval's own meaning).
- `inspect`: an Inspect AI log (`.eval`/`.json`), read by inspect_ai itself (engine/inspect_log.py):
  epochs are the `sample` attempts, one epoch (`--realized-epoch`, default 1) the realized output.

Everything is read and checked first (unknown question ids, missing fields, bad JSON, duplicate or
gapped attempt numbers: `file:line: what`); then one transaction writes the model, task, run (source
'import', status complete), attempts and the failure sets `failure:<probe>`, or nothing at all.

The run's protocol: a protocol file declares the one the generations were made under (then an import is
comparable with audits of that protocol); without it, a protocol with the answer format, the probes and
their budgets and a template marked as imported, so an import never passes for an audit, and two
imports with the same settings compare as matched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reachtui import jsonl
from reachtui.engine.finish import store_outcomes
from reachtui.engine.record import graded
from reachtui.errors import ReachError
from reachtui.probes import registry

IMPORT_FORMATS = ("jsonl", "lm-eval", "inspect")
IMPORT_TEMPLATE = "[imported generations: prompt not recorded]\n{question}"


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


@dataclass
class ImportResult:
    run_id: int
    n_questions: int
    attempts: dict[str, int]   # probe -> attempts stored
    protocol_hash: str
    failure_sets: dict[str, int]   # name -> size
    notes: list[str]


# -------------------------------------------------------------------------------------------------
# Reading
# -------------------------------------------------------------------------------------------------


def _finite(value: int | float) -> bool:
    """A number a float can hold: not NaN, not ±Infinity, not 1e400 (read as Infinity) or a huge integer."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _need(path: Path, i: int, obj: dict, key: str) -> Any:
    if key not in obj:
        raise ReachError(f"{path}:{i}: missing field {key!r}")
    return obj[key]


def detect_format(path: Path) -> str:
    """inspect for a `.eval` file; lm-eval when the first record has a doc_id, jsonl otherwise."""
    if path.suffix == ".eval":
        return "inspect"
    for _i, obj in jsonl.objects(path):
        return "lm-eval" if "doc_id" in obj and "question_id" not in obj else "jsonl"
    raise ReachError(f"{path}: the file is empty")


def read_jsonl(path: Path, task) -> Parsed:
    ids = {q.id for q in task.questions}
    known = registry.names(registry.PROBES)
    records: list[Record] = []
    first_at: dict[tuple[str, str, int], int] = {}
    for i, obj in jsonl.objects(path):
        qid = _need(path, i, obj, "question_id")
        probe = _need(path, i, obj, "probe")
        attempt = _need(path, i, obj, "attempt")
        output = _need(path, i, obj, "output")
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
            if isinstance(lp, bool) or not isinstance(lp, (int, float)) or not _finite(lp):
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


def _responses(path: Path, i: int, resps: Any) -> list[str]:
    """lm-eval's `resps`: a list per request of its responses ([[r1, r2, ...]]), or a flat list."""
    if not isinstance(resps, list) or not resps:
        raise ReachError(f"{path}:{i}: resps must be a non-empty list of generations")
    out: list[str] = []
    for item in resps:
        for r in item if isinstance(item, list) else [item]:
            if not isinstance(r, str):
                raise ReachError(f"{path}:{i}: resps must hold generated text, not {type(r).__name__} "
                                 "(a loglikelihood task has no generations to grade)")
            out.append(r)
    if not out:
        raise ReachError(f"{path}:{i}: resps holds no generation")
    return out


def read_lm_eval(path: Path, task, filter_name: str | None = None) -> Parsed:
    ids = [q.id for q in task.questions]
    id_set = set(ids)
    rows: list[tuple[int, int, list[str], Any]] = []  # line, doc_id, responses, target
    filter_of: dict[int, Any] = {}  # doc_id -> the filter whose row we keep
    kept_at: dict[int, int] = {}
    filters_seen: dict[Any, None] = {}
    skipped = 0
    for i, obj in jsonl.objects(path):
        doc_id = _need(path, i, obj, "doc_id")
        resps = _need(path, i, obj, "resps")
        _need(path, i, obj, "filtered_resps")
        target = obj.get("target")
        if isinstance(doc_id, bool) or not isinstance(doc_id, int) or doc_id < 0:
            raise ReachError(f"{path}:{i}: doc_id must be an integer >= 0, not {doc_id!r}")
        responses = _responses(path, i, resps)  # checked on every row, also the ones skipped below
        flt = obj.get("filter")
        if flt is not None and not isinstance(flt, str):
            raise ReachError(f"{path}:{i}: filter must be a filter's name (text), not {type(flt).__name__}")
        filters_seen.setdefault(flt, None)
        if filter_name is not None and flt != filter_name:
            skipped += 1
            continue
        if doc_id in filter_of:
            if filter_of[doc_id] == flt:
                raise ReachError(f"{path}:{i}: doc_id {doc_id} appears twice for filter {flt!r} "
                                 f"(first at line {kept_at[doc_id]})")
            skipped += 1  # the same doc under another filter: same generations, counted once
            continue
        filter_of[doc_id] = flt
        kept_at[doc_id] = i
        rows.append((i, doc_id, responses, target))
    if filter_name is not None and not rows:
        have = ", ".join(repr(f) for f in filters_seen) or "none"
        raise ReachError(f"{path}: no rows for filter {filter_name!r} (filters in the file: {have})")
    if not rows:
        raise ReachError(f"{path}: no samples in the file")
    notes = []
    if all(str(d) in id_set for _, d, _, _ in rows):
        qid_of = {d: str(d) for _, d, _, _ in rows}
    else:
        for i, d, _, _ in rows:
            if d >= len(ids):
                raise ReachError(f"{path}:{i}: doc_id {d} is not a question of task {task.name} "
                                 f"({len(ids)} questions, doc ids 0-{len(ids) - 1})")
        qid_of = {d: ids[d] for _, d, _, _ in rows}
        notes.append(f"doc_id read as the 0-based position in task {task.name} (its questions have own ids)")
    if len(filters_seen) > 1:
        used = sorted({repr(f) for f in filter_of.values()})
        notes.append(f"{len(filters_seen)} filters in the file; graded the raw resps of one row per doc "
                     f"(filter {', '.join(used)}); {skipped} row(s) of other filters skipped")
    records: list[Record] = []
    for i, d, responses, _target in rows:
        qid = qid_of[d]
        records.append(Record(i, qid, registry.REALIZED.name, 0, responses[0]))
        records += [Record(i, qid, registry.SAMPLE.name, j, r) for j, r in enumerate(responses)]
    used_filter = next(iter(filter_of.values())) if len(set(filter_of.values())) == 1 else None
    return Parsed(records, notes=notes, source="lm-eval", filter=used_filter,
                  targets=[(i, qid_of[d], t) for i, d, _r, t in rows])


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


# -------------------------------------------------------------------------------------------------
# Protocol, grading, writing
# -------------------------------------------------------------------------------------------------


def default_answer_format(task) -> str:
    return "choice" if any(getattr(q, "choices", None) for q in task.questions) else "number"


def build_protocol(protocol_path: str | None, answer_format: str | None, task, budgets: dict[str, int],
                   rule: str | None = None):
    from reachtui.protocol import Protocol, ProbeSpec, load_protocol_file

    if protocol_path:
        proto = load_protocol_file(protocol_path)
        if answer_format is not None and answer_format != proto.answer_format:
            raise ReachError(f"--answer-format {answer_format} differs from the protocol file's "
                             f"answer_format {proto.answer_format}")
        for p, k in budgets.items():
            spec = proto.probe(p)
            if spec is None:
                raise ReachError(f"{protocol_path}: the file has probe {p!r} but the protocol has not")
            if k > spec.budget:
                raise ReachError(f"{protocol_path}: probe {p} has up to {k} attempts per question in the file, "
                                 f"more than the protocol's budget {spec.budget}")
        return proto
    fmt = answer_format or default_answer_format(task)
    choices = None
    if fmt == "choice":
        counts = [len(q.choices) for q in task.questions if getattr(q, "choices", None)]
        choices = max(counts) if counts and 2 <= max(counts) <= 26 else None
    probes = tuple(ProbeSpec(p, budget=k) for p, k in budgets.items())
    template = IMPORT_TEMPLATE if rule is None else IMPORT_TEMPLATE.replace("]", f"; {rule}]", 1)
    return Protocol(template=template, answer_format=fmt, choices=choices, probes=probes)


def grade_records(records: list[Record], task, fmt: str) -> list[dict[str, Any]]:
    """Each record graded against the task's gold (`reachtui.engine.record.graded`), keyed by the task's
    question id (`qid`)."""
    gold = {q.id: q.answer for q in task.questions}
    return [dict(qid=r.qid, probe=r.probe, attempt=r.attempt, **graded(r.output, gold[r.qid], fmt),
                 mean_logprob=r.mean_logprob) for r in records]


def target_mismatches(parsed: Parsed, task, fmt: str) -> list[str]:
    """lm-eval rows whose own `target` disagrees with the task's gold: a sign of the wrong --task."""
    from reachtui.grading import equivalent, extract_answer

    if not parsed.targets:
        return []
    gold = {q.id: q.answer for q in task.questions}
    bad = []
    for line, qid, target in parsed.targets:
        if target is None or isinstance(target, (list, dict)):
            continue
        text = str(target)
        if fmt == "choice" and isinstance(target, int) and not isinstance(target, bool) and 0 <= target < 26:
            text = chr(ord("A") + target)
        ans, _rule = extract_answer(text, fmt)
        if not equivalent(ans if ans is not None else text, gold[qid], fmt):
            bad.append((line, qid, text, gold[qid]))
    if not bad:
        return []
    line, qid, text, g = bad[0]
    short = text if len(text) <= 40 else text[:37] + "..."
    return [f"{len(bad)} of {len(parsed.targets)} lm-eval targets differ from task {task.name}'s gold "
            f"(first: line {line}, question {qid}: target {short!r}, gold {g!r}); is --task the right file?"]


def write_run(store, task, protocol, graded_rows: list[dict[str, Any]], *, model_name: str, note: str,
              freeze: list[str] | None) -> tuple[int, list[int], dict[str, int]]:
    """One transaction: the model, task, run (source 'import'), its attempts, the failure sets of the
    probes in `freeze` (None: none, realized unknown) and status complete. Returns (run id, the run's
    question ids, {failure set name: size})."""
    with store.transaction():
        model_id = store.upsert_model(model_name)
        task_id = store.upsert_task(task)
        qids = store.task_question_ids(task_id)
        question_ids = sorted({qids[r["qid"]] for r in graded_rows})
        run_id = store.create_run(model_id, task_id, protocol_json=protocol.to_dict(),
                                  protocol_hash=protocol.hash(), source="import",
                                  question_ids=question_ids, note=note)
        rows = [dict(question_id=qids[r["qid"]], **{k: v for k, v in r.items() if k != "qid"})
                for r in graded_rows]
        rows.sort(key=lambda r: (r["probe"], r["attempt"]))
        store.insert_attempts(run_id, rows)
        sets = {}
        if freeze is not None:
            sets = {name: row["size"] for name, row in store.freeze_failure_sets(run_id, freeze).items()}
        store_outcomes(store, run_id)
        store.set_run_status(run_id, "complete")
    return run_id, question_ids, sets


def import_file(path: str | Path, task_spec: str, *, fmt: str | None = None, model: str | None = None,
                store_path: str | Path | None = None, answer_format: str | None = None,
                filter_name: str | None = None, protocol_path: str | None = None,
                realized_epoch: int | None = None) -> ImportResult:
    """Read, check and grade FILE against the task, then write one complete run in one transaction."""
    from reachtui.grading import FORMATS as ANSWER_FORMATS
    from reachtui.tasks import check_gold, check_name, load_task

    path = Path(path)
    if model is not None:
        check_name(model, "--model")
    if fmt is not None and fmt not in IMPORT_FORMATS:
        raise ReachError(f"unknown import format {fmt!r}; choose one of {', '.join(IMPORT_FORMATS)}")
    if answer_format is not None and answer_format not in ANSWER_FORMATS:
        raise ReachError(f"unknown answer format {answer_format!r}; choose one of {', '.join(ANSWER_FORMATS)}")
    task = load_task(task_spec)
    fmt = fmt or detect_format(path)
    if filter_name is not None and fmt != "lm-eval":
        raise ReachError("--filter is for lm-eval files")
    if realized_epoch is not None and fmt != "inspect":
        raise ReachError("--realized-epoch is for Inspect logs")
    rule = None
    if fmt == "inspect":
        from reachtui.engine.inspect_log import read_inspect

        parsed = read_inspect(path, task, realized_epoch)
        rule = parsed.rule
    elif fmt == "jsonl":
        parsed = read_jsonl(path, task)
    else:
        parsed = read_lm_eval(path, task, filter_name)
    budgets = check_complete(path, parsed.records)
    protocol = build_protocol(protocol_path, answer_format, task, budgets, rule)
    check_gold(task, protocol.answer_format, protocol.choices)
    rows = grade_records(parsed.records, task, protocol.answer_format)
    notes = list(parsed.notes) + target_mismatches(parsed, task, protocol.answer_format)
    has_realized = any(r.probe == registry.REALIZED.name for r in parsed.records)
    if not has_realized:
        notes.append("the file has no realized attempts: realized (and the failure sets) are unknown")

    # Only now touch the store: one transaction, all or nothing.
    from reachtui.store import Store, default_store_path

    model_name = model or path.name.removesuffix(".gz").removesuffix(".jsonl").removesuffix(".eval")
    where = str(path) + (f" (lm-eval, filter {parsed.filter!r})" if fmt == "lm-eval" and parsed.filter
                         else f" (inspect; {rule})" if rule else f" ({fmt})")
    with Store(Path(store_path) if store_path else default_store_path()) as store:
        run_id, question_ids, sets = write_run(store, task, protocol, rows, model_name=model_name,
                                               note=f"imported from {where}",
                                               freeze=list(budgets) if has_realized else None)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["probe"]] = counts.get(r["probe"], 0) + 1
    return ImportResult(run_id, len(question_ids), counts, protocol.hash(), sets, notes)
