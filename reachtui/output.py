"""Writing an output file (`export -o`, `compare -o`, the app's export) without ever losing data through it.

- The audit store, its companions (`-wal`, `-shm`, `-journal`, the run lock) and any other SQLite
  database are refused as an output: a table written there would replace every run. Paths are compared
  resolved (symlinks followed) and by inode (a hard link is the same file).
- A regular file (or a symlink to one) is written atomically: a temporary file in the folder of the file
  the path resolves to, then a rename over it; a symlink stays a symlink and its target gets the text.
- A character device (`/dev/null`, a terminal) or a FIFO is written to directly: never replaced by an
  ordinary file. A FIFO nobody reads is one line, not a hang. A path that is this process's own stdout or
  stderr (`-o /dev/stdout` redirected to a file) is written through that stream, not replaced under it.
- A block device, a socket or a folder is refused with one line.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reachtui.errors import EnvironmentFault, ReachError, os_fault
from reachtui.inputs import short_name, too_long

#: The files beside an SQLite store that are part of it (its write-ahead log, shared memory, rollback
#: journal) and the run lock reachtui keeps beside it (`reachtui.store.RUN_LOCK_SUFFIX`).
STORE_COMPANIONS = ("-wal", "-shm", "-journal", ".lock")
_SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class Output:
    """Where and how a text is written: `path` as given, `real` the file it resolves to, `how` one of
    "file" (atomic replace of `real`), "stream" (written directly: a device or a FIFO) or "stdout" /
    "stderr" (the path is this process's own stream)."""

    path: Path
    real: Path
    how: str


def _store_files(store: Path | None) -> list[Path]:
    if store is None:
        return []
    base = Path(os.path.realpath(Path(store).expanduser()))
    return [base] + [base.with_name(base.name + s) for s in STORE_COMPANIONS]


def _same_file(st: os.stat_result, other: Path) -> bool:
    try:
        o = os.stat(other)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (o.st_dev, o.st_ino)


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def _own_stream(st: os.stat_result) -> str | None:
    for name, fd in (("stdout", 1), ("stderr", 2)):
        try:
            own = os.fstat(fd)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino) and stat.S_ISREG(own.st_mode):
            return name
    return None


def check_output(path: str, store: str | os.PathLike | None = None) -> Output:
    """The -o file `path` checked before any work: refused (one line) when it is the audit `store` or one
    of its companions, another SQLite database, a folder, a block device or a socket, when its folder is
    missing, or when the folder cannot be written (exit status 3). An empty name names no file."""
    if not str(path).strip():
        raise ReachError("-o '': the name is empty (give the file to write, or leave -o out for stdout)")
    if (long := too_long(path)) is not None:
        raise ReachError(f"-o {short_name(path)}: cannot be used as the output: {long}")
    given = Path(path).expanduser()
    try:
        st = os.stat(given)                  # what the path names now, symlinks followed
    except FileNotFoundError:
        st = None                            # a new file (or a dangling symlink: its target is created)
    except NotADirectoryError:
        raise ReachError(f"{path}: a part of the path is a file, not a folder") from None
    except OSError as exc:
        raise ReachError(f"{path}: cannot be used as the output: {exc.strerror or exc}") from None
    real = Path(os.path.realpath(given))
    for companion in _store_files(store):
        if real == companion or (st is not None and _same_file(st, companion)):
            raise ReachError(f"{path} is the audit store {store} (or a file of it): writing the table there "
                             f"would destroy every run in it; choose another output file")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ReachError(f"{path} is a directory, not a file")
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            return Output(given, real, "stream")
        kind = "a block device" if stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) \
            else "not a regular file"
        raise ReachError(f"{path} is {kind}: reachtui writes tables to files, terminals and pipes only")
    if st is not None:
        own = _own_stream(st)
        if own is not None:
            return Output(given, real, own)
        if _is_sqlite(real):
            raise ReachError(f"{path} is an SQLite database: reachtui does not replace a database with a "
                             f"table; choose another output file")
    folder = real.parent
    if not folder.is_dir():
        raise ReachError(f"{path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        try:
            readonly = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
        except OSError:
            readonly = False
        raise EnvironmentFault(f"{path}: cannot write: {'read-only file system' if readonly else 'permission denied'}")
    return Output(given, real, "file")


def _fault(exc: OSError, path) -> ReachError:
    return os_fault(exc, path) or ReachError(f"{path}: cannot write: {exc.strerror or exc}")


def _write_stream(out: Output, data: bytes) -> None:
    """Write to a device or a FIFO as it is: opened without blocking (a FIFO with no reader is ENXIO, one
    line), then written whole in blocking mode."""
    try:
        fd = os.open(out.path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise ReachError(f"{out.path} is a pipe that nobody reads: start its reader first") from None
        raise _fault(exc, out.path) from None
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise _fault(exc, out.path) from None
    finally:
        os.close(fd)


def _write_file(out: Output, data: bytes) -> None:
    """Through a temporary file beside the file and a rename: a reader never sees half a file, a failed
    write leaves the old file as it was. The new file keeps the old one's permission bits (a new one gets
    the umask's), not the temporary file's 0600."""
    target = out.real
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _fault(exc, out.path) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise _fault(exc, out.path) from None


def write_output(path: str, text: str, store: str | os.PathLike | None = None) -> None:
    """Write `text` (UTF-8) to the -o file `path`, as `check_output` allows (see the module docstring)."""
    write_output_bytes(path, text.encode("utf-8"), store)


def write_output_bytes(path: str, data: bytes, store: str | os.PathLike | None = None) -> None:
    """Write `data` to the -o file `path`, as `check_output` allows: text, and the binary files of
    parquet, figures and Inspect logs."""
    out = check_output(path, store)
    if out.how in ("stdout", "stderr"):
        stream = sys.stdout if out.how == "stdout" else sys.stderr
        stream.flush()
        if hasattr(stream, "buffer"):
            stream.buffer.write(data)
        else:
            stream.write(data.decode("utf-8", "replace"))
        stream.flush()
    elif out.how == "stream":
        _write_stream(out, data)
    else:
        _write_file(out, data)
