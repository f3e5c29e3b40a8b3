"""What the test modules share: pytest loads this first, and the modules import its helpers by name
(`from conftest import run_main`), as they import `fake_runner` or `cli_helpers`.

- `run_main`: `reachtui.cli.main` in this process, with its exit status, stdout and stderr;
- `fresh_python`: a snippet in a new interpreter (what a module imports, what a process starts);
- `settle`: wait for every worker of a Textual app, then for the messages they posted;
- `char_tokenizer`: the tiny one-character-per-token tokenizer of the tiny models;
- `stored_audit`: the rows an audit decided (attempts, failure sets, MLP scan, run statuses), to compare two;
- `Q`, `T`: a task as the store takes it, without a file.
"""

from __future__ import annotations

import ast
import io
import sqlite3
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path


def run_main(args) -> tuple[int, str, str]:
    """reachtui.cli.main in-process: (exit status, stdout, stderr)."""
    from reachtui.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code or 0
    return code, out.getvalue(), err.getvalue()


def fresh_python(code: str) -> str:
    """Run `code` in a new interpreter (it must succeed); its stdout, stripped."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def libraries_loaded_by(argv: list[str], watch: set[str]) -> list[str]:
    """Run `reachtui ARGV` (it must succeed) in a new interpreter: which of the libraries `watch` it imported."""
    return ast.literal_eval(fresh_python(  # the list of names the child prints
        "import sys\nfrom reachtui.cli import main\ntry:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(watch)!r}))"))


async def settle(app, pilot, delay: float = 0.0) -> None:
    """Wait for every worker (a superseded, cancelled one included), then for their messages."""
    from textual.worker import WorkerCancelled, WorkerFailed

    for _ in range(3):
        for w in list(app.workers):
            try:
                await w.wait()
            except (WorkerCancelled, WorkerFailed):
                pass
        await pilot.pause(delay)


def char_tokenizer(chars: str):
    """A fast tokenizer with one token per character of `chars` (and <pad>, <s>, </s>, <unk>)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def stored_audit(path: Path) -> dict:
    """What the audits of the store at `path` decided: every attempt (by qid, probe, attempt), each failure
    set's members, the MLP scan, the runs' statuses."""
    con = sqlite3.connect(path)
    try:
        return dict(
            rows=con.execute(
                "SELECT q.qid, probe, attempt, route, silenced, text, answer, rule, correct, mean_logprob, new_tokens, "
                "layers_executed, compute FROM attempts a JOIN questions q ON q.id = a.question_id "
                "ORDER BY q.qid, probe, attempt").fetchall(),
            sets=con.execute("SELECT f.name, group_concat(q.qid) FROM failure_sets f LEFT JOIN failure_set_members m "
                             "ON m.set_id = f.id LEFT JOIN questions q ON q.id = m.question_id GROUP BY f.name "
                             "ORDER BY f.name").fetchall(),
            scan=con.execute("SELECT layer, failure_n, repaired, realized_n, broken FROM mlp_scan "
                             "ORDER BY layer").fetchall(),
            status=con.execute("SELECT status FROM runs ORDER BY id").fetchall())
    finally:
        con.close()


@dataclass(frozen=True)
class Q:
    id: str
    question: str
    answer: str
    solution: str | None = None


@dataclass(frozen=True)
class T:
    name: str
    path: str
    sha256: str
    questions: tuple
