"""`reachtui examples [DIR]`: the bundled import examples (the repository's assets/examples/, installed with
reachtui) copied into a folder, so the README's import examples run as printed from any folder. Copies
files only: imports no torch, transformers or textual."""

from __future__ import annotations

from pathlib import Path

import click

from reachtui.errors import ReachError


@click.command("examples")
@click.argument("folder", default=".", metavar="[DIR]")
def examples(folder) -> None:
    """Copy reachtui's import examples into DIR (default: here), generations for the demo task's first four
    questions: base.jsonl and tuned.jsonl (reachtui's jsonl), samples_demo.jsonl (an lm-eval --log_samples
    file), demo_inspect.eval (an Inspect AI log) and broken.jsonl (with a bad line). A file of the same
    name with other content is left alone: nothing is copied then.

    \b
      reachtui examples && reachtui import base.jsonl --task demo --model base
    """
    from reachtui.assets import EXAMPLES_DIR
    from reachtui.errors import os_fault

    target = Path(folder).expanduser()
    if not target.is_dir():
        raise ReachError(f"{folder}: no such folder")
    files = sorted(EXAMPLES_DIR.glob("*.*"))
    for src in files:
        dst = target / src.name
        if dst.exists() and (not dst.is_file() or dst.read_bytes() != src.read_bytes()):
            raise ReachError(f"{dst} exists and is not reachtui's example: nothing copied (give another DIR)")
    try:
        for src in files:
            (target / src.name).write_bytes(src.read_bytes())
    except OSError as exc:
        raise (os_fault(exc, str(target)) or ReachError(f"{target}: cannot write: {exc.strerror or exc}")) from None
    click.echo(f"copied {', '.join(f.name for f in files)} to {folder}")
