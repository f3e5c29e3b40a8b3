"""Reading an Inspect AI log (`.eval` or `.json`) for `reachtui import --format inspect`, through
inspect_ai's own reader (the optional extra `reachtui[inspect]`). Pure Python: no torch or textual.

Inspect runs each sample `epochs` times; reachtui reads the epochs as attempts of the `sample` probe
(epoch e is attempt e-1), and one epoch, the first unless `--realized-epoch N`, as the realized output.
The rule is written into the imported run's protocol (its template) and its note, so two imports under
different rules never compare as matched. Samples are matched to the task's questions by their id; when
a log's ids are Inspect's automatic 1, 2, 3, ... and the task has its own ids, they are positions in the
task (1-based, Inspect's meaning). Samples that ended in an error have no output: they are graded wrong
and counted in a note. Inspect's own scores are not read: reachtui's grader grades the completions.

An `.eval` log is read sample by sample (`read_eval_log_samples`: one sample in memory at a time, so a
1 GB log is never loaded whole); a `.json` log is one JSON document, read whole. Without `--task`, the
samples give the questions (`task_of`): `input` (a chat's user turns), `target`, `id`, `choices` and the
sample's metadata.

A log written by `reachtui export inspect` (`reachtui.reports.inspect_export`) is read back as it was written:
its epochs are the attempts of the probe it names, and each question's realized output and the mean
log-probs come from the samples' metadata, unless --realized-epoch asks for the rule above.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reachtui.errors import ReachError, first_line
from reachtui.importers.records import Parsed, Record
from reachtui.probes import registry


#: The metadata key of a log (and of its samples) written by reachtui (`reachtui.reports.inspect_export`).
KEY = "reachtui"


def realized_rule(epoch: int) -> str:
    return f"realized = epoch {epoch} of each Inspect sample; sample attempts = its epochs"


def rule_of(probe: str) -> str:
    """How a log written by reachtui is read back (written into the imported run's protocol)."""
    return f"realized = the default output reachtui stored with each Inspect sample; {probe} attempts = its epochs"


def log_probe(log: Any) -> str | None:
    """The probe whose attempts a log's epochs are, when reachtui wrote the log; else None."""
    meta = getattr(log.eval, "metadata", None) or {}
    mine = meta.get(KEY) if isinstance(meta, dict) else None
    probe = mine.get("probe") if isinstance(mine, dict) else None
    return probe if isinstance(probe, str) and (probe == registry.REALIZED.name or registry.is_reach(probe)) else None


def sample_fields(sample: Any) -> tuple[str | None, float | None, float | None]:
    """(the realized output, its mean log-prob, this epoch's attempt's mean log-prob) a reachtui sample
    carries; None where one is missing."""
    mine = (sample.metadata or {}).get(KEY)
    if not isinstance(mine, dict):
        return None, None, None
    realized = mine.get("realized") if isinstance(mine.get("realized"), dict) else {}
    text = realized.get("output")

    def number(v: Any) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return (text if isinstance(text, str) else None, number(realized.get("mean_logprob")),
            number(mine.get("mean_logprob")))


def _reader():
    try:
        from inspect_ai.log import read_eval_log, read_eval_log_samples
    except ImportError:
        raise ReachError("reading Inspect logs needs inspect_ai: pip install 'reachtui[inspect]'") from None
    return read_eval_log, read_eval_log_samples


def _unreadable(path: Path, exc: Exception) -> ReachError:
    return ReachError(f"{path}: not a readable Inspect log ({first_line(exc, 160)})")


def open_log(path: Path) -> tuple[Any, Iterator[Any]]:
    """(the log's header, its samples one at a time). An `.eval` log is read sample by sample; a `.json` one
    (a single JSON document), or a log without its sample ids, whole."""
    read_eval_log, read_eval_log_samples = _reader()
    try:
        header = read_eval_log(str(path), header_only=True)
    except FileNotFoundError:
        raise ReachError(f"{path}: no such file") from None
    except Exception as exc:  # inspect_ai raises many kinds on a file that is not one of its logs
        raise _unreadable(path, exc) from None

    def samples() -> Iterator[Any]:
        try:
            if path.suffix == ".eval" and header.eval.dataset.sample_ids is not None:
                yield from read_eval_log_samples(str(path), all_samples_required=False, resolve_attachments=True,
                                                 exclude_fields={"events", "store"})
            else:
                yield from read_eval_log(str(path)).samples or []
        except ReachError:
            raise
        except Exception as exc:
            raise _unreadable(path, exc) from None

    return header, samples()


def _input_text(value: Any) -> Any:
    """A sample's input as the question's text: the text, or a chat's user turns joined."""
    if isinstance(value, str) or not isinstance(value, list):
        return value
    turns = [m.text for m in value if getattr(m, "role", None) == "user" and getattr(m, "text", None)]
    return "\n\n".join(turns) if turns else None


def task_of(path: Path, fields=None, name: str | None = None):
    """The task an Inspect log's samples carry (`reachtui import LOG` without --task): per sample id (its first
    epoch), the question from `input`, the gold from `target` (the first of a list), its `choices`, and its
    metadata as the question's (reachtui's own key left out). Fields the user names override these."""
    from reachtui.tasks.sources import canonical
    from reachtui.tasks import Fields, task_from_records

    _header, samples = open_log(path)
    records, seen = [], set()
    for n, s in enumerate(samples, start=1):
        if s.id in seen:
            continue
        seen.add(s.id)
        target = s.target[0] if isinstance(s.target, list) and s.target else s.target
        meta = {k: v for k, v in (s.metadata or {}).items() if k != KEY}
        record = {**meta, "input": _input_text(s.input), "target": target, "id": s.id}
        if s.choices:
            record["choices"] = list(s.choices)
        records.append((n, record))
    fields = fields or Fields()
    mapping = Fields(question=fields.question or "input", answer=fields.answer or "target", id=fields.id or "id",
                     choices=fields.choices, field_map=fields.field_map)
    return task_from_records(records, name=name or path.name.removesuffix(".eval").removesuffix(".json"),
                             path=str(path.resolve()), fingerprint=canonical(records),
                             shown=f"{path} sample", fields=mapping, fixed_fingerprint=False)


def read_inspect(path: Path, task, realized_epoch: int | None = None):
    """The log's samples as import records (`Parsed`), read one at a time; `realized_epoch` None: epoch 1,
    or a reachtui log's own realized outputs."""
    explicit = realized_epoch is not None
    realized_epoch = 1 if realized_epoch is None else realized_epoch
    if isinstance(realized_epoch, bool) or not isinstance(realized_epoch, int) or realized_epoch < 1:
        raise ReachError(f"--realized-epoch must be an integer >= 1, not {realized_epoch!r}")
    log, samples = open_log(path)
    mine = None if explicit else log_probe(log)     # written by reachtui: read back as written
    notes = []
    if log.status != "success":
        notes.append(f"the Inspect log's status is {log.status!r}: only its finished samples are read")

    ids = [q.id for q in task.questions]
    id_set = set(ids)
    # sample ids are the task's ids, or else (all of them Inspect's automatic 1, 2, ...) 1-based positions
    by_position: bool | None = None

    def qid_of(raw) -> str:
        nonlocal by_position
        if by_position is None:
            by_position = str(raw) not in id_set
        if not by_position and str(raw) in id_set:
            return str(raw)
        if by_position and isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= len(ids):
            return ids[raw - 1]
        raise ReachError(f"{path}: sample id {raw!r} is not a question of task {task.name}")

    records, targets, seen, errored = [], [], {}, 0
    epochs_of: dict[str, set[int]] = {}
    n = 0
    for n, s in enumerate(samples, start=1):
        qid, epoch = qid_of(s.id), int(s.epoch)
        if (qid, epoch) in seen:
            raise ReachError(f"{path}: sample {s.id!r} epoch {epoch} appears twice")
        seen[(qid, epoch)] = n
        epochs_of.setdefault(qid, set()).add(epoch)
        output = s.output.completion if s.output is not None else ""
        if s.error is not None:
            errored += 1
            output = ""
        if mine is not None:
            realized, realized_lp, attempt_lp = sample_fields(s)
            if mine != registry.REALIZED.name:
                records.append(Record(n, qid, mine, epoch - 1, output, attempt_lp))
            if epoch == 1:
                if realized is None and mine != registry.REALIZED.name:
                    raise ReachError(f"{path}: sample {s.id!r} has no realized output in its reachtui metadata")
                records.append(Record(n, qid, registry.REALIZED.name, 0,
                                      output if mine == registry.REALIZED.name else realized, realized_lp))
                targets.append((n, qid, s.target))
            continue
        records.append(Record(n, qid, registry.SAMPLE.name, epoch - 1, output))
        if epoch == realized_epoch:
            records.append(Record(n, qid, registry.REALIZED.name, 0, output))
            targets.append((n, qid, s.target))
    if n == 0:
        raise ReachError(f"{path}: the Inspect log has no samples (status {log.status})")
    if by_position:
        notes.append(f"sample ids read as 1-based positions in task {task.name} (its questions have own ids)")
    short = sorted(q for q, e in epochs_of.items() if realized_epoch not in e)
    if short:
        raise ReachError(f"{path}: question {short[0]} has no epoch {realized_epoch} "
                         f"(--realized-epoch; {len(short)} question(s) without it)")
    if errored:
        notes.append(f"{errored} Inspect sample(s) ended in an error: no output, graded wrong")
    rule = rule_of(mine) if mine is not None else realized_rule(realized_epoch)
    return Parsed(records, notes=notes, source="inspect", targets=targets, rule=rule)
