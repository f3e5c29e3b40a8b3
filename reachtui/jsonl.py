"""Reading JSONL files: one JSON object per line, blank lines skipped. Pure Python.

The one reader of task files (`reachtui.tasks`) and imported generations (`reachtui.engine.importing`):
`objects(path)` yields (line number, object) for the file's non-blank lines, and anything unreadable
fails with `ReachError` as `file:line: what` (not UTF-8 text, bad JSON, not an object, a lone surrogate
escape, an integer of more digits than Python converts, nesting deeper than the parser's recursion limit).
A byte-order mark at the start is allowed; a gzip file (by its .gz suffix or its magic bytes) is read
through gzip unless the caller says otherwise, streamed line by line and refused past `MAX_INFLATED` bytes
(a small file that inflates to gigabytes is one line, not an exhausted memory); no line may be longer than
`MAX_LINE` bytes. The file itself is checked and bounded by `reachtui.inputs` (a regular file, at most its
kind's size) before anything is read.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from reachtui.errors import ReachError
from reachtui.inputs import GENERATIONS, InputKind, open_input, read_input, unreadable
from reachtui.parsing import json_value

#: The most bytes a compressed file may inflate to (an lm-eval log of 1,319 questions x 64 samples is
#: about 50 MB uncompressed), and the longest line of any file (decoded and parsed, a line takes about three
#: times its size in memory).
MAX_INFLATED = 1 << 30
MAX_LINE = 64 << 20
_CHUNK = 1 << 20


def read_bytes(path: Path, shown: str | None = None, kind: InputKind = GENERATIONS) -> bytes:
    """The file's bytes (a regular file, at most `kind`'s limit: `reachtui.inputs`); a missing file, a folder,
    a pipe or a device, a read error is one line naming `shown` (the path as the user gave it, default `path`)."""
    return read_input(path, kind, shown)


def _breaks(data: bytes) -> int:
    """How many line breaks `bytes.splitlines` finds in `data` (\\n, \\r\\n, \\r)."""
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def _lines(chunks: Iterable[bytes], shown: str) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its ending) of the concatenated `chunks`, split as `bytes.splitlines`
    splits (\\n, \\r\\n, \\r), also across chunk boundaries. Runs of blank lines are counted, not split
    (a file of a billion newlines reads in seconds); a line over MAX_LINE bytes is refused as it grows."""
    pending: list[bytes] = []
    held = count = 0
    for chunk in chunks:
        if b"\n" not in chunk and b"\r" not in chunk and not (pending and pending[-1].endswith(b"\r")):
            pending.append(chunk)
            held += len(chunk)
            if held > MAX_LINE:
                raise ReachError(f"{shown}:{count + 1}: a line longer than {MAX_LINE >> 20} MiB")
            continue
        data = b"".join(pending) + chunk if pending else chunk
        end = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if end == len(data) - 1 and data.endswith(b"\r"):      # a \r whose \n may come in the next chunk
            end = max(data.rfind(b"\n", 0, end), data.rfind(b"\r", 0, end))
        whole, rest = data[:end + 1], data[end + 1:]
        pending = [rest] if rest else []
        held = len(rest)
        if whole.isspace():                   # blank lines only
            count += _breaks(whole)
            continue
        for line in whole.splitlines():
            count += 1
            if len(line) > MAX_LINE:
                raise ReachError(f"{shown}:{count}: a line longer than {MAX_LINE >> 20} MiB")
            yield count, line
    if pending:
        tail = b"".join(pending)
        if tail.endswith(b"\r"):
            tail = tail[:-1]
        if len(tail) > MAX_LINE:
            raise ReachError(f"{shown}:{count + 1}: a line longer than {MAX_LINE >> 20} MiB")
        yield count + 1, tail


def _inflated(source, shown: str) -> Iterator[bytes]:
    """The gzip data of `source` (an open binary file or the bytes) in chunks, at most MAX_INFLATED bytes."""
    total = 0
    try:
        with gzip.GzipFile(fileobj=source, mode="rb") as fh:
            while chunk := fh.read(_CHUNK):
                total += len(chunk)
                if total > MAX_INFLATED:
                    raise ReachError(f"{shown}: inflates to more than {MAX_INFLATED >> 20} MiB; split it into "
                                     f"smaller files")
                yield chunk
    except (OSError, EOFError, zlib.error) as exc:
        raise ReachError(f"{shown}: not a readable gzip file: {exc}") from None


def _read_chunks(fh, shown: str) -> Iterator[bytes]:
    try:
        while chunk := fh.read(_CHUNK):
            yield chunk
    except OSError as exc:
        raise unreadable(exc, shown) from None


def _objects(lines: Iterable[tuple[int, bytes]], shown: str) -> Iterator[tuple[int, dict]]:
    for lineno, raw in lines:
        try:
            line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError:
            raise ReachError(f"{shown}:{lineno}: not UTF-8 text") from None
        if not line.strip():
            continue
        obj = json_value(line, f"{shown}:{lineno}")
        if not isinstance(obj, dict):
            raise ReachError(f"{shown}:{lineno}: expected a JSON object, not {type(obj).__name__}")
        if "\\u" in line and not _is_text(obj):
            raise ReachError(f"{shown}:{lineno}: an unpaired surrogate escape (\\ud800-\\udfff) is not text")
        yield lineno, obj


def parse(data: bytes, shown: str, *, gz: bool = True) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line of `data` (a file's bytes, named `shown` in errors).
    With `gz`, gzip-compressed data is decompressed first (at most MAX_INFLATED bytes). Line numbers count
    the lines of the text."""
    if gz and (shown.endswith(".gz") or data[:2] == b"\x1f\x8b"):
        yield from _objects(_lines(_inflated(io.BytesIO(data), shown), shown), shown)
        return
    yield from _objects(_lines([data], shown), shown)


def _is_text(obj) -> bool:
    """No lone surrogate (from a JSON escape like \\ud800) anywhere in `obj`: it could not be stored."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def objects(path: Path, shown: str | None = None, *, gz: bool = True,
            kind: InputKind = GENERATIONS) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line of the file at `path` (see `parse`; a regular file, at
    most `kind`'s limit: `reachtui.inputs`), read as a stream: a caller that stops early (the first record)
    reads no more of it."""
    path = Path(path)
    shown = str(path) if shown is None else shown
    with open_input(path, kind, shown) as fh:
        try:
            head = fh.peek(2)[:2] if gz and not (shown.endswith(".gz") or str(path).endswith(".gz")) else b""
        except OSError as exc:
            raise unreadable(exc, shown) from None
        if gz and (head == b"\x1f\x8b" or shown.endswith(".gz") or str(path).endswith(".gz")):
            yield from _objects(_lines(_inflated(fh, shown), shown), shown)
            return
        yield from _objects(_lines(_read_chunks(fh, shown), shown), shown)
