"""Reading a file of recorded generations in one of IMPORT_FORMATS into `Parsed` records, checked
(`reachtui.engine.importing` grades and writes them)."""

from __future__ import annotations

from pathlib import Path

from reachtui import jsonl
from reachtui.errors import ReachError
from reachtui.importers.records import Parsed

IMPORT_FORMATS = ("jsonl", "lm-eval", "inspect")


def detect_format(path: Path) -> str:
    """inspect for a `.eval` file; lm-eval when the first record has a doc_id, jsonl otherwise."""
    if path.suffix == ".eval":
        return "inspect"
    for _i, obj in jsonl.objects(path):
        return "lm-eval" if "doc_id" in obj and "question_id" not in obj else "jsonl"
    raise ReachError(f"{path}: the file is empty")


def read(path: Path, task, fmt: str, *, filter_name: str | None = None, realized_epoch: int | None = None) -> Parsed:
    """The file's records in format `fmt` (one of IMPORT_FORMATS)."""
    if fmt == "inspect":
        from reachtui.importers.inspect_log import read_inspect

        return read_inspect(path, task, realized_epoch)
    if fmt == "jsonl":
        from reachtui.importers.attempts_jsonl import read_jsonl

        return read_jsonl(path, task)
    from reachtui.importers.lm_eval import read_lm_eval

    return read_lm_eval(path, task, filter_name)


def task_of(path: Path, fmt: str, fields=None, name: str | None = None):
    """The task a file of `fmt` carries (`reachtui import` without --task): lm-eval rows' docs and targets, an
    Inspect log's samples; reachtui's own jsonl carries none."""
    if fmt == "inspect":
        from reachtui.importers.inspect_log import task_of as inspect_task

        return inspect_task(path, fields, name)
    if fmt == "lm-eval":
        from reachtui.importers.lm_eval import task_of as lm_eval_task

        return lm_eval_task(path, fields, name)
    raise ReachError(f"{path}: a {fmt} file carries no questions: give --task")
