"""What the bad-input tests share: running the CLI in this process, the store's fingerprint, damaging a
store, copying the demo model with a changed config, running a system command that may not be allowed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
from pathlib import Path

from reachtui.assets import DEMO_MODEL_DIR

HAVE_DEMO = (DEMO_MODEL_DIR / "config.json").is_file()


def corrupt(path: Path, name: str = "attempts") -> None:
    """Overwrite cells of the root page of table or index `name`: 'database disk image is malformed' on
    reading it."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
    size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    with open(path, "r+b") as fh:
        fh.seek((root - 1) * size + 8)
        fh.write(b"\xff" * 200)


def try_cmd(*cmd: str) -> bool:
    return subprocess.run(cmd, capture_output=True).returncode == 0


def model_copy(root: Path, name: str, *, config=None, drop_weights: bool = False) -> Path:
    out = root / name
    shutil.copytree(DEMO_MODEL_DIR, out)
    if drop_weights:
        for f in out.glob("*.safetensors"):
            f.unlink()
    if config is not None:
        (out / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return out


def fingerprint(path: Path):
    """The bytes of the store file and of its write-ahead log (where a write lands first), or None when
    there is no file. Raw bytes, not a dump of the rows: a dump of the damaged store, read through SQLite,
    was seen to differ between two reads of an unchanged file; and no write can leave both files as they
    were, while a reader does."""
    if not path.is_file():
        return None
    wal = path.with_name(path.name + "-wal")
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and p.stat().st_size else None  # noqa: E731
    return digest(path), digest(wal)


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from reachtui.cli import main

    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def folder_state(root: Path, *, every_file: bool = False) -> dict:
    """Every file under `root` (recursively) with its type and, for a regular file, its bytes' digest; the
    shared-memory index `-shm` (no data: rebuilt from the WAL) and an empty `-wal` are left out unless
    `every_file` (a reader must not leave them beside a store that had none)."""
    state = {}
    for p in sorted(root.rglob("*")):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        name = str(p.relative_to(root))
        if not every_file and (name.endswith("-shm") or (name.endswith("-wal") and st.st_size == 0)):
            continue
        if stat.S_ISREG(st.st_mode):
            state[name] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            state[name] = stat.filemode(st.st_mode)[0]
    return state
