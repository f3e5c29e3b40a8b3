"""Reading JSONL files: one JSON object per line, blank lines skipped. Pure Python.

The one reader of task files (`reachtui.tasks`) and imported generations (`reachtui.engine.importing`):
`objects(path)` yields (line number, object) for the file's non-blank lines, and anything unreadable
fails with `ReachError` as `file:line: what` (not UTF-8 text, bad JSON, not an object, a lone surrogate
escape). A byte-order
mark at the start is allowed; a gzip file (by its .gz suffix or its magic bytes) is read through gzip
unless the caller says otherwise.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from reachtui.errors import ReachError


def read_bytes(path: Path, shown: str | None = None) -> bytes:
    """The file's bytes; a missing file, a folder or a read error is one line naming `shown` (the path
    as the user gave it, default `path`)."""
    shown = str(path) if shown is None else shown
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ReachError(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise ReachError(f"{shown}: is a folder, not a file") from None
    except OSError as exc:
        raise ReachError(f"{shown}: cannot read: {exc.strerror or exc}") from None


def parse(data: bytes, shown: str, *, gz: bool = True) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line of `data` (a file's bytes, named `shown` in errors).
    With `gz`, gzip-compressed data is decompressed first. Line numbers count the lines of the text."""
    if gz and (shown.endswith(".gz") or data[:2] == b"\x1f\x8b"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ReachError(f"{shown}: not a readable gzip file: {exc}") from None
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError:
            raise ReachError(f"{shown}:{lineno}: not UTF-8 text") from None
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReachError(f"{shown}:{lineno}: bad JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise ReachError(f"{shown}:{lineno}: expected a JSON object, not {type(obj).__name__}")
        if "\\u" in line and not _is_text(obj):
            raise ReachError(f"{shown}:{lineno}: an unpaired surrogate escape (\\ud800-\\udfff) is not text")
        yield lineno, obj


def _is_text(obj) -> bool:
    """No lone surrogate (from a JSON escape like \\ud800) anywhere in `obj`: it could not be stored."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def objects(path: Path, shown: str | None = None, *, gz: bool = True) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line of the file at `path` (see `parse`)."""
    shown = str(path) if shown is None else shown
    yield from parse(read_bytes(path, shown), shown, gz=gz)
