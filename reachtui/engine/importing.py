"""Importing recorded generations: a run made from a file of outputs, graded by reachtui's grader, with no
model. Pure Python (no torch, transformers, textual or click); `reachtui import` is its command.

Three formats, read by `reachtui.importers` (one module each): `jsonl` (reachtui's own, one attempt per
line), `lm-eval` (a `--log_samples` file) and `inspect` (an Inspect AI log, read by inspect_ai itself).

Everything is read and checked first (unknown question ids, missing fields, bad JSON, duplicate or
gapped attempt numbers: `file:line: what`); then one transaction writes the model, task, run (source
'import', status complete), attempts and the failure sets `failure:<probe>`, or nothing at all.

The run's protocol: a protocol file declares the one the generations were made under (then an import is
comparable with audits of that protocol); without it, a protocol with the answer format, the probes and
their budgets and a template marked as imported, so an import never passes for an audit, and two
imports with the same settings compare as matched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reachtui.engine.finish import write_stored_pass
from reachtui.engine.record import graded
from reachtui.errors import ReachError
from reachtui.importers.read import IMPORT_FORMATS, detect_format, read, task_of
from reachtui.importers.records import Parsed, Record, check_complete
from reachtui.probes import registry

IMPORT_TEMPLATE = "[imported generations: prompt not recorded]\n{question}"


@dataclass
class ImportResult:
    run_id: int
    n_questions: int
    attempts: dict[str, int]   # probe -> attempts stored
    protocol_hash: str
    failure_sets: dict[str, int]   # name -> size
    notes: list[str]


# -------------------------------------------------------------------------------------------------
# Protocol, grading, writing
# -------------------------------------------------------------------------------------------------


def default_answer_format(task) -> str:
    return "choice" if any(getattr(q, "choices", None) for q in task.questions) else "number"


def build_protocol(protocol_path: str | None, answer_format: str | None, task, budgets: dict[str, int],
                   rule: str | None = None):
    from reachtui.protocol import Protocol, ProbeSpec, load_protocol_file

    if protocol_path is not None:
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


def target_mismatches(parsed: Parsed, task, fmt: str, *, task_given: bool = True) -> list[str]:
    """lm-eval rows whose own `target` disagrees with the task's gold: a sign of the wrong --task, or (no
    --task: the gold read from the rows' docs) of a doc field that is not the gold."""
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
    ask = "is --task the right file?" if task_given else \
        "the gold was read from the rows' docs: is that the answer field? (--answer-field names another)"
    return [f"{len(bad)} of {len(parsed.targets)} lm-eval targets differ from task {task.name}'s gold "
            f"(first: line {line}, question {qid}: target {short!r}, gold {g!r}); {ask}"]


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
        run_id = store.create_run(model_id, task_id, protocol=protocol, source="import",
                                  question_ids=question_ids, note=note)
        rows = [dict(question_id=qids[r["qid"]], **{k: v for k, v in r.items() if k != "qid"})
                for r in graded_rows]
        rows.sort(key=lambda r: (r["probe"], r["attempt"]))
        store.insert_attempts(run_id, rows)
        sets = {}
        if freeze is not None:
            sets = {name: row["size"] for name, row in store.freeze_failure_sets(run_id, freeze).items()}
        write_stored_pass(store, run_id)
        store.set_run_status(run_id, "complete")
    return run_id, question_ids, sets


def import_file(path: str | Path, task_spec: str | None, *, fmt: str | None = None, model: str | None = None,
                store_path: str | Path | None = None, answer_format: str | None = None,
                filter_name: str | None = None, protocol_path: str | None = None,
                realized_epoch: int | None = None, task_name: str | None = None, task_fields=None,
                allow_download: bool = False) -> ImportResult:
    """Read, check and grade FILE against the task (`task_spec` None: the questions the file carries, an
    lm-eval row's doc and target or an Inspect sample's input and target), then write one complete run in one
    transaction."""
    from reachtui.grading import FORMATS as ANSWER_FORMATS
    from reachtui.inputs import GENERATIONS, INSPECT_LOG, check_input
    from reachtui.tasks import check_gold, check_name, load_task

    streamed = str(path).endswith(".eval")     # an .eval log is read sample by sample; the rest held whole
    path = check_input(path, INSPECT_LOG if streamed else GENERATIONS)   # before the task: no pipe, no device
    if model is not None:
        check_name(model, "--model")
    if fmt is not None and fmt not in IMPORT_FORMATS:
        raise ReachError(f"unknown import format {fmt!r}; choose one of {', '.join(IMPORT_FORMATS)}")
    if answer_format is not None and answer_format not in ANSWER_FORMATS:
        raise ReachError(f"unknown answer format {answer_format!r}; choose one of {', '.join(ANSWER_FORMATS)}")
    task = load_task(task_spec, task_name, task_fields, allow_download=allow_download) if task_spec is not None \
        else None
    fmt = fmt or detect_format(path)
    if task is None:
        if task_name is not None:
            check_name(task_name, "--task-name")
        task = task_of(path, fmt, task_fields, task_name)
    if filter_name is not None and fmt != "lm-eval":
        raise ReachError("--filter is for lm-eval files")
    if realized_epoch is not None and fmt != "inspect":
        raise ReachError("--realized-epoch is for Inspect logs")
    parsed = read(path, task, fmt, filter_name=filter_name, realized_epoch=realized_epoch)
    rule = parsed.rule
    budgets = check_complete(path, parsed.records)
    protocol = build_protocol(protocol_path, answer_format, task, budgets, rule)
    check_gold(task, protocol.answer_format, protocol.choices)
    rows = grade_records(parsed.records, task, protocol.answer_format)
    notes = list(parsed.notes) + target_mismatches(parsed, task, protocol.answer_format, task_given=bool(task_spec))
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
