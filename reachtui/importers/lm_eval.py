"""An lm-evaluation-harness `--log_samples` file (`samples_<task>_<date>.jsonl`, also .gz): one row per doc
*per filter*, `doc_id`, `resps` (the raw generations), `filtered_resps`, `target`. Only one filter's rows are
read (`--filter NAME`, else the first filter seen for each doc), so nothing is counted twice; the raw `resps`
are graded, not lm-eval's filtered answers. The first response is the realized attempt and all responses are
the `sample` probe. `doc_id` is the task's question id when every doc_id is one, else the 0-based position in
the task file (lm-eval's own meaning).

Without `--task`, the rows give the questions (`task_of`): each doc's `doc` (the dataset's record: its fields
mapped as a task file's, the others its metadata), its gold from `target` where the doc has no answer field,
its id the `doc_id`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reachtui import jsonl
from reachtui.errors import ReachError
from reachtui.importers.records import Parsed, Record, need
from reachtui.probes import registry


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
        doc_id = need(path, i, obj, "doc_id")
        resps = need(path, i, obj, "resps")
        need(path, i, obj, "filtered_resps")
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


def task_of(path: Path, fields=None, name: str | None = None):
    """The task the rows carry (`reachtui import FILE` without --task): one question per doc_id (its first
    row), read from the row's `doc` with the mapping of `fields` (`reachtui.tasks.Fields`), the gold from the
    row's `target` when the doc has no answer field, the id the doc_id (unless --id-field names a field)."""
    from reachtui.tasks.sources import canonical
    from reachtui.tasks import Fields, resolve_fields, task_from_records

    fields = fields or Fields()
    if fields.id is None:
        fields = Fields(fields.question, fields.answer, "doc_id", fields.choices, fields.field_map)
    records, seen, mapping = [], set(), None
    for i, obj in jsonl.objects(path):
        doc_id = need(path, i, obj, "doc_id")
        if doc_id in seen:
            continue
        seen.add(doc_id)
        doc = obj.get("doc")
        if not isinstance(doc, dict):
            raise ReachError(f"{path}:{i}: the row has no doc (lm-eval writes it with --log_samples), so the question "
                             f"is unknown: give --task")
        record = {**doc, "doc_id": doc_id}
        mapping = mapping or resolve_fields(fields, record)
        if record.get(mapping.answer) is None and obj.get("target") is not None:
            record[mapping.answer] = obj["target"]
        records.append((i, record))
    if not records:
        raise ReachError(f"{path}: no samples in the file")
    records.sort(key=lambda r: (str(type(r[1]["doc_id"])), r[1]["doc_id"]))
    return task_from_records(records, name=name or path.name.removesuffix(".gz").removesuffix(".jsonl"),
                             path=str(path.resolve()), fingerprint=canonical(records), shown=str(path),
                             fields=fields, fixed_fingerprint=False)
