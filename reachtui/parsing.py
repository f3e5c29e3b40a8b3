"""Reading the text formats reachtui takes from people (JSON lines, JSON and TOML files): every way one can
fail is one `ReachError` line naming where, never a traceback. Pure Python; `reachtui.jsonl` (tasks and
imports), the protocol files, the app's keymap and the model's config read through here, each file checked
and bounded by `reachtui.inputs` before it is read.

A JSON object that names a key twice is refused wherever reachtui reads JSON (Python would keep the last
value silently: a task record with two `question` keys would be read as the second one)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from reachtui.errors import ReachError, first_line
from reachtui.inputs import MODEL_JSON, PROTOCOL, InputKind, read_input, refusal


class DuplicateKey(ValueError):
    """A JSON object names a key twice."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _v in pairs if k in seen or seen.add(k))
        raise DuplicateKey(f"the key {twice[:80]!r} appears twice in one object (which value counts would be a "
                           f"guess)")
    return obj


def _loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_unique)


def json_value(text: str, where: str) -> Any:
    """`text` parsed as JSON; a bad one is `where: what` (bad JSON, a key twice in one object, an integer of
    more digits than Python converts, nesting deeper than the parser's recursion limit)."""
    return _parsed(_loads, text, where, "JSON")


def _parsed(parse, text: str, where: str, what: str) -> Any:
    try:
        return parse(text)
    except json.JSONDecodeError as exc:
        raise ReachError(f"{where}: bad JSON: {exc.msg} (column {exc.colno})") from None
    except DuplicateKey as exc:
        raise ReachError(f"{where}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ReachError(f"{where}: not valid TOML: {exc}") from None
    except ValueError as exc:       # Python's limit on the digits of an integer
        raise ReachError(f"{where}: a number is too long ({str(exc).split(':')[0]})") from None
    except RecursionError:
        raise ReachError(f"{where}: the {what} is nested too deeply") from None


def json_file(path: Path, fault: str, kind: InputKind = MODEL_JSON) -> Any:
    """The JSON file at `path` (a regular file within `kind`'s size limit); a file that cannot be read or
    parsed is `fault` with `{why}` filled in."""
    why = refusal(path, kind)
    if why is not None:
        raise ReachError(fault.format(why=why))
    try:
        return _loads(read_input(path, kind).decode("utf-8"))
    except ReachError as exc:      # it changed since the check: what it is now
        raise ReachError(fault.format(why=str(exc))) from None
    except (OSError, ValueError) as exc:
        raise ReachError(fault.format(why=first_line(exc, 200))) from None
    except RecursionError:
        raise ReachError(fault.format(why="nested too deeply")) from None


def toml_file(path: str | Path, where: str, *, kind: InputKind = PROTOCOL, missing: str | None = None) -> dict:
    """The TOML file at `path` (a regular file within `kind`'s size limit) as a dict; every failure is one
    line starting `where` (`missing`: what a file that is not there is called, else "no such file")."""
    why = refusal(path, kind)
    where = where if str(path).strip() else f"{kind.option} ''"
    if why is not None:
        raise ReachError(f"{where}: {missing if why == 'no such file' and missing else why}")
    try:
        text = read_input(path, kind, where).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReachError(f"{where}: cannot read: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    return _parsed(tomllib.loads, text, where, "TOML")
