"""The exceptions that reach the user as a single line, never a traceback (unless `reachtui --debug`).

- `ReachError`: bad input or an impossible request; `error: <message>`, exit status 2.
- `EnvironmentFault`: the machine, not the input: the disk is full, the store or an output file cannot
  be written (read-only file system, immutable file, permissions), the store is damaged; exit status 3.
  `DamagedStore` is the damaged-store case: its message says how to recover what is readable.

`sqlite_fault` and `os_fault` turn the few sqlite3 / OSError failures that are environment faults into
these, at the places where they arise (the store's connection and write path, `export -o`).
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

#: Exit statuses: 0 done, 1 internal error (a bug: `--debug` shows its traceback), 2 bad input,
#: 3 an environment fault, 130 interrupted.
EXIT_INTERNAL = 1
EXIT_INPUT = 2
EXIT_ENVIRONMENT = 3


class ReachError(Exception):
    """Bad input or an impossible request. The message is one line, shown as `error: <message>`."""

    exit_code = EXIT_INPUT


class EnvironmentFault(ReachError):
    """The environment failed, not the input (disk full, read-only, permission denied, damaged store);
    exit status 3. Nothing half-written is left: the transaction in flight was rolled back."""

    exit_code = EXIT_ENVIRONMENT


class DamagedStore(EnvironmentFault):
    """The audit store's file is damaged (a corrupted page, not an SQLite database any more). Nothing is
    ever written into it; the message says how to recover what is readable."""

    def __init__(self, path, detail: str, hint: str | None = None) -> None:
        """`hint`: how to recover, when `.recover` (which copies what is readable) is not the way."""
        self.path = Path(path)
        fixed = self.path.with_name(self.path.stem + "-recovered" + (self.path.suffix or ".sqlite"))
        hint = hint or (f"Recover what is readable into a new file with: sqlite3 {path} \".recover\" | sqlite3 "
                        f"{fixed} (then use --store {fixed})")
        super().__init__(f"the store {path} is damaged ({detail}); nothing was written to it. {hint}")


# SQLite's primary result codes that mean the environment, not the query.
_SQLITE_PERM, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY = 3, 5, 6, 8
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 10, 11, 13, 14, 26


def first_line(exc: BaseException, limit: int | None = None) -> str:
    """The first line of an exception's message (its type's name when it has none), for a one-line error. A
    first line that ends in ':' only announces the cause on the lines after it ("Class validation error for
    validator ...:"), so those follow it, joined by spaces. A KeyError's message is only the key: its type says
    what it is."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()] or [type(exc).__name__]
    line = " ".join(lines) if lines[0].endswith(":") else lines[0]
    if isinstance(exc, KeyError) and exc.args:
        line = f"{line} is missing or unknown (KeyError)"
    return line if limit is None else line[:limit]


def error_line(exc: BaseException, limit: int | None = None) -> str:
    """An error in one line where nothing else says what kind it is (the app's notices, an internal error):
    a ReachError's `first_line`, any other exception's type and first line ("OSError: [Errno 28] No space
    left on device"), its type alone when it has no message."""
    line = first_line(exc)
    if not isinstance(exc, (ReachError, KeyError)) and line != type(exc).__name__:
        line = f"{type(exc).__name__}: {line}"
    return line if limit is None else line[:limit]


def _sqlite_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF
    text = str(exc).lower()       # an error made by hand (tests) or by an older sqlite3 module
    for needle, c in (("malformed", _SQLITE_CORRUPT), ("not a database", _SQLITE_NOTADB),
                      ("disk is full", _SQLITE_FULL), ("readonly", _SQLITE_READONLY),
                      ("read-only", _SQLITE_READONLY), ("unable to open", _SQLITE_CANTOPEN),
                      ("disk i/o error", _SQLITE_IOERR), ("database is locked", _SQLITE_BUSY)):
        if needle in text:
            return c
    return None


def sqlite_fault(exc: BaseException, path) -> EnvironmentFault | None:
    """The environment fault an sqlite3 error on the store at `path` is, or None (a real bug, or a bad
    query: the caller decides)."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = _sqlite_code(exc)
    detail = first_line(exc)
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return DamagedStore(path, detail)
    if code == _SQLITE_FULL:
        return EnvironmentFault(f"the disk holding the store {path} is full ({detail}); nothing of the "
                                f"transaction in flight was kept: free space and run the same command again")
    if code in (_SQLITE_READONLY, _SQLITE_PERM, _SQLITE_CANTOPEN):
        return EnvironmentFault(f"the store {path} cannot be written ({detail}: a read-only file system, an "
                                f"immutable file or missing permissions on it or its folder)")
    if code == _SQLITE_IOERR:
        return EnvironmentFault(f"the store {path} could not be read or written ({detail}: a disk or file "
                                f"system error)")
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return EnvironmentFault(f"the store {path} is locked by another process for longer than the wait "
                                f"allowed ({detail}); try again when it has finished")
    return None


#: errno values that are environment faults when writing a file.
_OS_FAULTS = {errno.ENOSPC: "no space left on the device", errno.EROFS: "read-only file system",
              errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
              errno.EDQUOT: "disk quota exceeded"}


def os_fault(exc: BaseException, what) -> EnvironmentFault | None:
    """The environment fault an OSError is while writing `what` (a path, or words), or None."""
    if isinstance(exc, OSError) and exc.errno in _OS_FAULTS:
        return EnvironmentFault(f"{what}: cannot write: {_OS_FAULTS[exc.errno]}")
    return None
