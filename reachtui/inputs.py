"""What an input path may be, checked before it is opened, and how much of it is read: the one check every
reader of a file a person names goes through (tasks, imports, --protocol, --fewshot, --keymap, --device-map,
a model's JSON files), as `reachtui.output` is for the files reachtui writes.

- An empty name is refused (it would name the current folder, or be taken for "not given").
- A name no file system can hold (a part over 255 bytes, the whole over 4,095) is one line, not an OSError.
- Only a regular file (or a symlink to one) is read: a FIFO nobody writes would block for ever, a character
  device reads as an empty file (/dev/null: the defaults would run) or never ends (/dev/zero), a socket
  cannot be read. Folders are refused unless the reader takes one (a `datasets` folder for --task). The
  file is opened without blocking and checked again on its descriptor, so a FIFO put in its place between
  the check and the open never hangs.
- Each kind of file has a size limit, set by what can be used of it (`InputKind.limit`, named in the
  message): a keymap is a few lines, a protocol or its few-shot examples go into every prompt, a task or a
  file of generations is held in memory whole. What is read never exceeds it, even from a file still growing.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from reachtui.errors import ReachError

#: The longest name a part of a path (a file or folder name) and a whole path may have (POSIX NAME_MAX and
#: PATH_MAX less the final NUL, in bytes).
NAME_MAX = 255
PATH_MAX = 4095


@dataclass(frozen=True)
class InputKind:
    """A kind of input file: the option that names it, what it is (for messages) and the most bytes read."""

    option: str
    what: str
    limit: int | None     # None: no limit (model weights: only their headers are read here)


MiB = 1 << 20
GiB = 1 << 30

TASK = InputKind("--task", "a task file", GiB)                   # held in memory, stored whole
GENERATIONS = InputKind("FILE", "a file of generations", GiB)     # as a gzip import's inflated limit
INSPECT_LOG = InputKind("FILE", "an .eval log", 4 * GiB)         # read sample by sample (a .json log: GENERATIONS)
PROTOCOL = InputKind("--protocol", "a protocol file", 16 * MiB)   # its template and examples go in every prompt
FEWSHOT = InputKind("--fewshot", "a few-shot file", 16 * MiB)     # every example goes in every prompt
KEYMAP = InputKind("--keymap", "a keymap", MiB)                   # a line per binding
DEVICE_MAP = InputKind("--device-map", "a device map file", 16 * MiB)
MODEL_JSON = InputKind("MODEL", "a model's JSON file", 64 * MiB)  # config.json, adapter_config.json
MODEL_WEIGHTS = InputKind("MODEL", "a model's weights file", None)


def size_text(n: int) -> str:
    """Bytes as people read them: 512 bytes, 16 MiB, 1.5 GiB."""
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def short_name(name: str, most: int = 120) -> str:
    """A name for a message: a very long one cut, with its length said."""
    name = str(name)
    return name if len(name) <= most else f"{name[:60]}…({len(name)} characters)"


def too_long(name: str | os.PathLike) -> str | None:
    """Why no file system can hold the name `name` (a part over NAME_MAX bytes, the whole over PATH_MAX),
    or None."""
    data = os.fsencode(os.path.expanduser(os.fspath(name)))
    if len(data) > PATH_MAX:
        return f"a path of {len(data)} bytes is longer than any file system takes ({PATH_MAX})"
    part = max(data.split(b"/"), key=len)
    if len(part) > NAME_MAX:
        return f"a file or folder name of {len(part)} bytes is longer than any file system takes ({NAME_MAX})"
    return None


def unreadable(exc: OSError, shown: str) -> ReachError:
    """The one line for a file that cannot be opened or read: missing, a folder, or another OS error."""
    shown = short_name(shown)
    if isinstance(exc, FileNotFoundError):
        return ReachError(f"{shown}: no such file")
    if isinstance(exc, IsADirectoryError):
        return ReachError(f"{shown}: is a folder, not a file")
    return ReachError(f"{shown}: cannot read: {exc.strerror or exc}")


def _kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (a named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def refusal(path: str | os.PathLike, kind: InputKind, *, folder: bool = False) -> str | None:
    """Why `path` cannot be read as `kind` (words to put after its name), or None when it can: it is a
    regular file within the kind's size limit (or, with `folder`, a folder). Nothing is opened."""
    text = os.fspath(path)
    if not str(text).strip():
        return f"the name is empty (give {kind.what})"
    if (long := too_long(text)) is not None:
        return long
    try:
        st = os.stat(os.path.expanduser(text))
    except FileNotFoundError:
        return "no such file"
    except NotADirectoryError:
        return "a part of the path is a file, not a folder"
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return _refusal_of(st, kind, folder=folder)


def _refusal_of(st: os.stat_result, kind: InputKind, *, folder: bool = False) -> str | None:
    if stat.S_ISDIR(st.st_mode):
        return None if folder else "is a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        return f"is {_kind_of(st.st_mode)}, not a regular file (a pipe or a device may never end)"
    if kind.limit is not None and st.st_size > kind.limit:
        return f"{st.st_size:,} bytes is more than {kind.what} may hold ({size_text(kind.limit)})"
    return None


def _shown(path, shown: str | None, kind: InputKind) -> str:
    """How a message names the input: `shown` (else the path), or the option and '' for an empty name."""
    if not str(os.fspath(path)).strip():
        return f"{kind.option} ''"
    return short_name(os.fspath(path) if shown is None else shown)


def check_input(path: str | os.PathLike, kind: InputKind, shown: str | None = None, *,
                folder: bool = False) -> Path:
    """`path` as a Path, once `refusal` finds nothing wrong with it; else one ReachError line starting with
    `shown` (the name as the user gave it, default `path`)."""
    why = refusal(path, kind, folder=folder)
    if why is not None:
        raise ReachError(f"{_shown(path, shown, kind)}: {why}")
    return Path(os.path.expanduser(os.fspath(path)))


class _Bounded:
    """A binary file that refuses to be read past its kind's limit (a file that grows while read)."""

    def __init__(self, fh: BinaryIO, kind: InputKind, shown: str) -> None:
        self._fh, self._kind, self._shown, self._read = fh, kind, shown, 0

    def read(self, n: int = -1) -> bytes:
        if self._kind.limit is not None and (n is None or n < 0):
            n = self._kind.limit - self._read + 1       # never more than one byte past the limit
        data = self._fh.read(n)
        self._read += len(data)
        if self._kind.limit is not None and self._read > self._kind.limit:
            raise ReachError(f"{self._shown}: more than {self._kind.what} may hold "
                             f"({size_text(self._kind.limit)}); it grew while it was read")
        return data

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._fh.close()


def open_input(path: str | os.PathLike, kind: InputKind, shown: str | None = None) -> BinaryIO:
    """The regular file `path`, checked (`check_input`) and opened for reading in binary, never blocking on
    what is not a regular file; reading past the kind's limit is one line."""
    real = check_input(path, kind, shown)
    name = _shown(path, shown, kind)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:      # a socket or a device without a driver, put there since the check
            raise ReachError(f"{name}: {_kind_of(0)}") from None
        raise unreadable(exc, name) from None
    try:
        why = _refusal_of(os.fstat(fd), kind)
        if why is not None:       # not the file that was checked: something else was put there
            raise ReachError(f"{name}: {why}")
        os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return _Bounded(fh, kind, name)  # type: ignore[return-value]


def read_input(path: str | os.PathLike, kind: InputKind, shown: str | None = None) -> bytes:
    """The bytes of the regular file `path` (`open_input`), at most the kind's limit."""
    name = _shown(path, shown, kind)
    with open_input(path, kind, shown) as fh:
        try:
            return fh.read()
        except OSError as exc:
            raise unreadable(exc, name) from None
