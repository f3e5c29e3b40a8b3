"""Reading the text formats reachtui takes from people (JSON lines, JSON and TOML files): every way one can
fail is one `ReachError` line naming where, never a traceback. Pure Python; `reachtui.jsonl` (tasks and
imports), the protocol files, the app's keymap and the model's config read through here."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from reachtui.errors import ReachError


def unreadable(exc: OSError, shown: str) -> ReachError:
    """The one line for a file that cannot be opened or read: missing, a folder, or another OS error."""
    if isinstance(exc, FileNotFoundError):
        return ReachError(f"{shown}: no such file")
    if isinstance(exc, IsADirectoryError):
        return ReachError(f"{shown}: is a folder, not a file")
    return ReachError(f"{shown}: cannot read: {exc.strerror or exc}")


def json_value(text: str, where: str) -> Any:
    """`text` parsed as JSON; a bad one is `where: what` (bad JSON, an integer of more digits than Python
    converts, nesting deeper than the parser's recursion limit)."""
    return _parsed(json.loads, text, where, "JSON")


def _parsed(parse, text: str, where: str, what: str) -> Any:
    try:
        return parse(text)
    except json.JSONDecodeError as exc:
        raise ReachError(f"{where}: bad JSON: {exc.msg} (column {exc.colno})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ReachError(f"{where}: not valid TOML: {exc}") from None
    except ValueError as exc:       # Python's limit on the digits of an integer
        raise ReachError(f"{where}: a number is too long ({str(exc).split(':')[0]})") from None
    except RecursionError:
        raise ReachError(f"{where}: the {what} is nested too deeply") from None


def json_file(path: Path, fault: str) -> Any:
    """The JSON file at `path`; a file that cannot be read or parsed is `fault` with `{why}` filled in."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise ReachError(fault.format(why=why[:200])) from None
    except RecursionError:
        raise ReachError(fault.format(why="nested too deeply")) from None


def toml_file(path: str | Path, where: str, *, missing: str | None = None) -> dict:
    """The TOML file at `path` as a dict; every failure is one line starting `where` (`missing`: what a file
    that is not there is called, else "cannot read: ...")."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ReachError(f"{where}: {missing or f'cannot read: {exc.strerror or exc}'}") from None
    except UnicodeDecodeError as exc:
        raise ReachError(f"{where}: cannot read: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise ReachError(f"{where}: cannot read: {exc.strerror or exc}") from None
    return _parsed(tomllib.loads, text, where, "TOML")
