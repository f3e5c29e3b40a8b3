"""Bad inputs, round 3 (issue 33), the input side: paths that could hang or read as nothing (1), data read
silently wrong (2), metadata that broke later commands (3), error lines that named no cause (5) and text that
broke the app's screen (9).

Every refused command answers with one line (`error: ...`) and its exit status (2 bad input), no traceback,
within a few seconds (each case runs under an alarm: a regression that blocks on a FIFO fails, never hangs),
and leaves every file of the test folder as it was (the store, its write-ahead log, the files beside it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_helpers import HAVE_DEMO, run_cli
from fake_runner import write_task
from reachtui.assets import DEMO_MODEL_DIR
from test_bad_inputs_2 import _store_with_runs, folder_state

#: Seconds a refused command may take before the case fails (a hang on a FIFO, a read of /dev/zero).
ALARM_S = 20


class Hung(BaseException):
    """Raised by the alarm: the command did not answer in time (a BaseException: the CLI's catch-all
    does not turn it into an error line)."""


@dataclass
class Env:
    root: Path     # the folder every refused command must leave as it was (the store and its inputs)
    big: Path      # sparse files past the size limits (outside `root`: hashing them would take seconds)

    def __getitem__(self, name: str) -> str:
        return str(self.root / name)


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


QIDS = [f"q{i:03d}" for i in range(6)]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad3in")
    big = tmp_path_factory.mktemp("bad3big")
    task = write_task(root / "t.jsonl", 6)
    _store_with_runs(root / "good.sqlite", task)
    _jsonl(root / "gens.jsonl", [{"question_id": q, "probe": p, "attempt": 0, "output": "#### 1"}
                                 for q in QIDS for p in ("realized", "sample")])
    for name in ("fifo", "fifo.jsonl", "fifo.csv", "fifo.toml", "fifo.json", "fifo.eval", "fifo.jsonl.gz"):
        os.mkfifo(root / name)
    (root / "adir").mkdir()
    # -- 1. files past their kind's size limit (sparse: the size is checked before any byte is read) ----------
    (big / "keys.toml").write_text("# " + "x" * (1 << 20) + "\n")
    _sparse(big / "protocol.toml", (16 << 20) + 1)
    _sparse(big / "fewshot.jsonl", (16 << 20) + 1)
    _sparse(big / "device_map.json", (16 << 20) + 1)
    _sparse(big / "task.jsonl", (1 << 30) + 1)
    _sparse(big / "task.csv", (1 << 30) + 1)
    _sparse(big / "gens.jsonl", (1 << 30) + 1)
    if HAVE_DEMO:       # a model folder with a FIFO in place of its tokenizer: transformers would block on it
        shutil.copytree(DEMO_MODEL_DIR, root / "model_fifo")
        (root / "model_fifo" / "tokenizer.json").unlink()
        os.mkfifo(root / "model_fifo" / "tokenizer.json")
    # -- 2. data read silently wrong ----------------------------------------------------------------------------
    (root / "dup.csv").write_text("id,question,answer,question\nq000,What is 8 + 5?,13,OTHER\n")
    (root / "dup.tsv").write_text("id\tanswer\tquestion\tanswer\nq000\t13\tWhat is 8 + 5?\t99\n")
    (root / "unnamed_cell.csv").write_text("id,question,answer,\nq000,What is 8 + 5?,13,stray\n")
    _jsonl(root / "dup_key.jsonl", ['{"id": "q000", "question": "What is 8 + 5?", "answer": "13", "answer": "99"}'])
    _jsonl(root / "dup_fewshot.jsonl", ['{"question": "1 + 1?", "answer": "2", "question": "3 + 3?"}'])
    _jsonl(root / "gens_dup.jsonl", ['{"question_id": "q000", "probe": "realized", "attempt": 0, "output": "#### 13", '
                                     '"output": "#### 1"}'])
    _jsonl(root / "lm_eval_dup_doc.jsonl", ['{"doc_id": 0, "doc": {"question": "2 + 2?", "answer": "4", "question": '
                                            '"3 + 3?"}, "target": "4", "resps": [["#### 4"]], "filtered_resps": ["4"], '
                                            '"filter": "none"}'])
    (root / "device_map_dup.json").write_text('{"model": "cpu", "model": "disk"}')
    # -- 3. metadata no export could hold -------------------------------------------------------------------------
    good = {"question": "What is 8 + 5?", "answer": "13"}
    _jsonl(root / "meta_punct.jsonl", [dict(good, id="q000", **{"a-b": 1, "a_b": 2})])
    (root / "meta_space.csv").write_text("id,question,answer,a b,a_b\nq000,What is 8 + 5?,13,1,2\n")
    _jsonl(root / "meta_case.jsonl", [dict(good, id="q000", Level=1), dict(good, id="q001", level=2)])
    _jsonl(root / "meta_many.jsonl", [dict(good, id="q000", **{f"k{i}": i for i in range(300)})])
    _jsonl(root / "meta_big.jsonl", [dict(good, id="q000", context="x" * (2 << 20))])
    _jsonl(root / "meta_empty_key.jsonl", [dict(good, id="q000", **{"": "x"})])
    # -- 5. error lines that name their cause ---------------------------------------------------------------------
    (root / "unterminated.csv").write_text('id,question,answer\nq000,"What is 8 + 5?,13\nq001,What is 1 + 1?,2\n')
    (root / "long_cell.csv").write_text("id,question,answer\nq000,What is 8 + 5?,13\nq001,"
                                        + "x" * 200_000 + ",2\n")
    (root / "sci.csv").write_text("id,question,answer\nq000,What is 10 times 100?,1e3\n")
    (root / "sci.jsonl").write_text('{"id": "q000", "question": "What is 10 times 100?", "answer": "2.5E-3"}\n')
    try:
        import datasets

        datasets.disable_progress_bars()
        datasets.Dataset.from_dict({"question": [], "answer": []}).save_to_disk(str(root / "empty_ds"))
        datasets.DatasetDict({"test": datasets.Dataset.from_dict({"question": [], "answer": []})}).save_to_disk(
            str(root / "empty_split_ds"))
        datasets.Dataset.from_dict({"question": ["q?"], "answer": ["1"]}).save_to_disk(str(root / "ds_fifo"))
        (root / "ds_fifo" / "state.json").unlink()
        os.mkfifo(root / "ds_fifo" / "state.json")
    except ImportError:
        pass
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_arrays([pa.array(["q000"]), pa.array(["What is 8 + 5?"]), pa.array(["13"]),
                                             pa.array(["OTHER"])], names=["id", "question", "answer", "question"]),
                       root / "dup.parquet")
    except ImportError:
        pass
    con = sqlite3.connect(root / "good.sqlite")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    yield Env(root, big)


S = "{good.sqlite}"
T = "{t.jsonl}"
LONG = "x" * 5000
LONG_REV = "r" * 10_000


def _fill(arg: str, env: Env) -> str:
    if arg.startswith("{big/") and arg.endswith("}"):
        return str(env.big / arg[5:-1])
    if arg.startswith("{") and arg.endswith("}"):
        return env[arg[1:-1]]
    return arg


FIFO = "is a FIFO (a named pipe), not a regular file"
DEVICE = "is a character device, not a regular file"

#: (id, argv, exit status, a piece of the error line, what it needs: "demo" | "datasets" | "pyarrow" | None)
CASES = [
    # -- 1. an input path that could hang, read as nothing, or be no file at all ---------------------------------
    ("audit-protocol-fifo", ["audit", "demo", "--task", T, "--store", S, "--protocol", "{fifo.toml}"], 2, FIFO, None),
    ("audit-protocol-dev-null", ["audit", "demo", "--task", T, "--store", S, "--protocol", "/dev/null"], 2, DEVICE,
     None),
    ("audit-protocol-empty-name", ["audit", "demo", "--task", T, "--store", S, "--protocol", ""], 2,
     "--protocol '': the name is empty", None),
    ("audit-protocol-folder", ["audit", "demo", "--task", T, "--store", S, "--protocol", "{adir}"], 2,
     "is a folder, not a file", None),
    ("audit-protocol-too-big", ["audit", "demo", "--task", T, "--store", S, "--protocol", "{big/protocol.toml}"], 2,
     "16,777,217 bytes is more than a protocol file may hold (16 MiB)", None),
    ("audit-protocol-name-too-long", ["audit", "demo", "--task", T, "--store", S, "--protocol", LONG], 2,
     "no such file, and no such preset", None),
    ("generate-protocol-fifo", ["generate", "demo", "hi", "--protocol", "{fifo}"], 2, FIFO, None),
    ("open-protocol-fifo", ["open", "demo", "--task", T, "--store", S, "--protocol", "{fifo.toml}"], 2, FIFO, None),
    ("import-protocol-fifo", ["import", "{gens.jsonl}", "--task", T, "--store", S, "--protocol", "{fifo.toml}"], 2,
     FIFO, None),
    ("import-protocol-empty-name", ["import", "{gens.jsonl}", "--task", T, "--store", S, "--protocol", ""], 2,
     "--protocol '': the name is empty", None),
    ("import-protocol-dev-null", ["import", "{gens.jsonl}", "--task", T, "--store", S, "--protocol", "/dev/null"], 2,
     DEVICE, None),
    ("audit-fewshot-fifo", ["audit", "demo", "--task", T, "--store", S, "--fewshot", "{fifo.jsonl}"], 2, FIFO, None),
    ("audit-fewshot-dev-null", ["audit", "demo", "--task", T, "--store", S, "--fewshot", "/dev/null"], 2, DEVICE,
     None),
    ("generate-fewshot-empty-name", ["generate", "demo", "hi", "--fewshot", ""], 2, "--fewshot '': the name is empty",
     None),
    ("generate-fewshot-fifo-gz", ["generate", "demo", "hi", "--fewshot", "{fifo.jsonl.gz}"], 2, FIFO, None),
    ("serve-fewshot-fifo", ["serve", "demo", "--store", S, "--fewshot", "{fifo}"], 2, FIFO, None),
    ("audit-fewshot-too-big", ["audit", "demo", "--task", T, "--store", S, "--fewshot", "{big/fewshot.jsonl}"], 2,
     "is more than a few-shot file may hold (16 MiB)", None),
    ("open-keymap-fifo", ["open", "--store", S, "--keymap", "{fifo.toml}"], 2, FIFO, None),
    ("open-keymap-dev-null", ["open", "--store", S, "--keymap", "/dev/null"], 2, DEVICE, None),
    ("open-keymap-empty-name", ["open", "--store", S, "--keymap", ""], 2, "--keymap '': the name is empty", None),
    ("serve-keymap-fifo", ["serve", "--store", S, "--keymap", "{fifo}"], 2, FIFO, None),
    ("open-keymap-too-big", ["open", "--store", S, "--keymap", "{big/keys.toml}"], 2,
     "is more than a keymap may hold (1 MiB)", None),
    ("audit-task-fifo", ["audit", "demo", "--task", "{fifo.jsonl}", "--store", S], 2, FIFO, None),
    ("audit-task-csv-fifo", ["audit", "demo", "--task", "{fifo.csv}", "--store", S], 2, FIFO, None),
    ("audit-task-dev-null", ["audit", "demo", "--task", "/dev/null", "--store", S], 2, DEVICE, None),
    ("audit-task-empty-name", ["audit", "demo", "--task", "", "--store", S], 2, "--task '': the name is empty", None),
    ("audit-task-name-too-long", ["audit", "demo", "--task", LONG, "--store", S], 2,
     "longer than any file system takes", None),
    ("open-task-fifo", ["open", "demo", "--task", "{fifo}", "--store", S], 2, FIFO, None),
    ("serve-task-dev-null", ["serve", "demo", "--task", "/dev/null", "--store", S], 2, DEVICE, None),
    ("import-task-fifo", ["import", "{gens.jsonl}", "--task", "{fifo.jsonl}", "--store", S], 2, FIFO, None),
    ("import-task-empty-name", ["import", "{gens.jsonl}", "--task", "", "--store", S], 2,
     "--task '': the name is empty", None),
    ("audit-task-too-big", ["audit", "demo", "--task", "{big/task.jsonl}", "--store", S], 2,
     "is more than a task file may hold (1 GiB)", None),
    ("import-task-csv-too-big", ["import", "{gens.jsonl}", "--task", "{big/task.csv}", "--store", S], 2,
     "is more than a task file may hold (1 GiB)", None),
    ("audit-task-datasets-folder-with-a-fifo", ["audit", "demo", "--task", "{ds_fifo}", "--store", S], 2,
     f"state.json: {FIFO}", "datasets"),
    ("import-file-fifo", ["import", "{fifo.jsonl}", "--task", T, "--store", S], 2, FIFO, None),
    ("import-file-fifo-gz", ["import", "{fifo.jsonl.gz}", "--task", T, "--store", S], 2, FIFO, None),
    ("import-file-fifo-eval", ["import", "{fifo.eval}", "--task", T, "--store", S], 2, FIFO, None),
    ("import-file-fifo-lm-eval-without-task", ["import", "{fifo.jsonl}", "--format", "lm-eval", "--store", S], 2,
     FIFO, None),
    ("import-file-dev-null", ["import", "/dev/null", "--task", T, "--store", S], 2, DEVICE, None),
    ("import-file-empty-name", ["import", "", "--task", T, "--store", S], 2, "FILE '': the name is empty", None),
    ("import-file-name-too-long", ["import", LONG, "--task", T, "--store", S], 2,
     "longer than any file system takes", None),
    ("import-file-too-big", ["import", "{big/gens.jsonl}", "--task", T, "--store", S], 2,
     "is more than a file of generations may hold (1 GiB)", None),
    ("audit-device-map-fifo", ["audit", "demo", "--task", T, "--store", S, "--device-map", "{fifo.json}"], 2, FIFO,
     None),
    ("audit-device-map-empty-name", ["audit", "demo", "--task", T, "--store", S, "--device-map", ""], 2,
     "--device-map '': the name is empty", None),
    ("audit-offload-folder-empty-name", ["audit", "demo", "--task", T, "--store", S, "--offload-folder", ""], 2,
     "--offload-folder '': the name is empty", None),
    ("generate-offload-folder-empty-name", ["generate", "demo", "hi", "--offload-folder", " "], 2,
     "--offload-folder ' ': the name is empty", None),
    ("open-offload-folder-too-long", ["open", "demo", "--store", S, "--offload-folder", "f" * 300], 2,
     "a file or folder name of 300 bytes is longer than any file system takes (255)", None),
    ("generate-device-map-too-big", ["generate", "demo", "hi", "--device-map", "{big/device_map.json}"], 2,
     "is more than a device map file may hold (16 MiB)", None),
    ("audit-model-folder-with-a-fifo", ["audit", "{model_fifo}", "--task", T, "--store", S], 2,
     f"tokenizer.json: {FIFO}", "demo"),
    ("generate-model-folder-with-a-fifo", ["generate", "{model_fifo}", "hi"], 2, f"tokenizer.json: {FIFO}", "demo"),
    ("audit-model-name-too-long", ["audit", LONG, "--task", T, "--store", S], 2,
     "not a directory nor a Hugging Face id", None),
    ("export-store-empty-name", ["export", "summary", "--store", ""], 2, "--store '': the name is empty", None),
    ("runs-store-empty-name", ["runs", "--store", ""], 2, "--store '': the name is empty", None),
    ("import-store-empty-name", ["import", "{gens.jsonl}", "--task", T, "--store", ""], 2,
     "--store '': the name is empty", None),
    ("runs-store-name-too-long", ["runs", "--store", LONG], 2, "longer than any file system takes", None),
    ("audit-store-name-too-long", ["audit", "demo", "--task", T, "--store", LONG], 2,
     "longer than any file system takes", None),
    ("export-output-empty-name", ["export", "summary", "--store", S, "-o", ""], 2, "-o '': the name is empty", None),
    ("compare-output-empty-name", ["compare", "1", "2", "--store", S, "-o", "", "--allow-unmatched"], 2,
     "-o '': the name is empty", None),
    ("export-inspect-output-empty-name", ["export", "inspect", "1", "--store", S, "-o", ""], 2,
     "-o '': the name is empty", None),
    ("export-output-name-too-long", ["export", "summary", "--store", S, "-o", LONG], 2,
     "longer than any file system takes", None),
    # -- 2. data that would be read silently wrong -------------------------------------------------------------------
    ("import-csv-header-names-a-column-twice", ["import", "{gens.jsonl}", "--task", "{dup.csv}", "--store", S], 2,
     "dup.csv:1: the header names the column 'question' twice (columns 2 and 4)", None),
    ("audit-tsv-header-names-a-column-twice", ["audit", "demo", "--task", "{dup.tsv}", "--store", S], 2,
     "dup.tsv:1: the header names the column 'answer' twice (columns 2 and 4)", None),
    ("open-csv-header-names-a-column-twice", ["open", "demo", "--task", "{dup.csv}", "--store", S], 2,
     "names the column 'question' twice", None),
    ("import-parquet-names-a-column-twice", ["import", "{gens.jsonl}", "--task", "{dup.parquet}", "--store", S], 2,
     "dup.parquet: the file names the column 'question' twice", "pyarrow"),
    ("audit-csv-cell-under-an-unnamed-column", ["audit", "demo", "--task", "{unnamed_cell.csv}", "--store", S], 2,
     "unnamed_cell.csv:2: a cell in column 4, which the header leaves without a name", None),
    ("audit-jsonl-task-with-a-key-twice", ["audit", "demo", "--task", "{dup_key.jsonl}", "--store", S], 2,
     "dup_key.jsonl:1: the key 'answer' appears twice in one object", None),
    ("generate-fewshot-with-a-key-twice", ["generate", "demo", "hi", "--fewshot", "{dup_fewshot.jsonl}"], 2,
     "dup_fewshot.jsonl:1: the key 'question' appears twice", None),
    ("import-generations-with-a-key-twice", ["import", "{gens_dup.jsonl}", "--task", T, "--store", S], 2,
     "gens_dup.jsonl:1: the key 'output' appears twice", None),
    ("import-lm-eval-doc-with-a-key-twice", ["import", "{lm_eval_dup_doc.jsonl}", "--store", S], 2,
     "lm_eval_dup_doc.jsonl:1: the key 'question' appears twice", None),
    ("audit-device-map-with-a-key-twice", ["audit", "demo", "--task", T, "--store", S, "--device-map",
                                           "{device_map_dup.json}"], 2, "the key 'model' appears twice", None),
    # -- 3. metadata no export could hold ---------------------------------------------------------------------------
    ("import-metadata-keys-differ-in-punctuation", ["import", "{gens.jsonl}", "--task", "{meta_punct.jsonl}",
                                                    "--store", S], 2,
     "meta_punct.jsonl:1: the metadata keys 'a-b' and 'a_b' would both be the column meta_a_b", None),
    ("audit-metadata-keys-differ-in-punctuation-csv", ["audit", "demo", "--task", "{meta_space.csv}", "--store", S], 2,
     "the metadata keys 'a b' and 'a_b' would both be the column meta_a_b", None),
    ("audit-metadata-keys-differ-in-case", ["audit", "demo", "--task", "{meta_case.jsonl}", "--store", S], 2,
     "meta_case.jsonl:2: the metadata keys 'Level' and 'level' would both be the column meta_level", None),
    ("import-metadata-too-many-keys", ["import", "{gens.jsonl}", "--task", "{meta_many.jsonl}", "--store", S], 2,
     "the questions have 300 metadata keys", None),
    ("open-metadata-value-too-large", ["open", "demo", "--task", "{meta_big.jsonl}", "--store", S], 2,
     "meta_big.jsonl:1: the metadata value 'context' holds 2,097,152 bytes, more than a metadata value may hold "
     "(1,048,576)", None),
    ("audit-metadata-empty-key", ["audit", "demo", "--task", "{meta_empty_key.jsonl}", "--store", S], 2,
     "a metadata field with an empty name", None),
    # -- 5. error lines that name their cause ---------------------------------------------------------------------------
    ("audit-csv-unterminated-quote", ["audit", "demo", "--task", "{unterminated.csv}", "--store", S], 2,
     "unterminated.csv:2: a quoted cell that starts on this line is never closed", None),
    ("import-csv-cell-too-long-names-its-line", ["import", "{gens.jsonl}", "--task", "{long_cell.csv}", "--store", S],
     2, "long_cell.csv:3: a cell longer than 131,072 characters", None),
    ("audit-datasets-folder-of-0-rows", ["audit", "demo", "--task", "{empty_ds}", "--store", S], 2,
     "empty_ds: the dataset has no rows", "datasets"),
    ("import-datasets-split-of-0-rows", ["import", "{gens.jsonl}", "--task", "{empty_split_ds}", "--store", S], 2,
     "empty_split_ds: its split 'test' has no rows", "datasets"),
    ("audit-gold-in-scientific-notation-jsonl", ["audit", "demo", "--task", "{sci.jsonl}", "--store", S], 2,
     "the gold answer '2.5E-3' of question q000 is in scientific notation", None),
    ("plot-probe-unknown", ["plot", "passk", "1", "--store", S, "--probe", "nope", "-o", "{f.pdf}"], 2,
     "--probe nope: run 1 has no probe 'nope' (its probes: sample)", None),
    ("plot-probe-no-run-has", ["plot", "reach", "1", "--store", S, "--probe", "routes", "-o", "{f.pdf}"], 2,
     "--probe routes: run 1 has no probe 'routes' (its probes: sample)", None),
    ("plot-output-empty-name", ["plot", "passk", "1", "--store", S, "-o", ""], 2, "-o needs a file: FILE.pdf, .png or .svg", None),
    ("audit-revision-10000-characters", ["audit", "org/model", "--revision", LONG_REV, "--task", T, "--store", S], 2,
     "a name of 10000 bytes is no branch, tag or commit hash", None),
    ("open-revision-10000-characters", ["open", "org/model", "--revision", LONG_REV, "--store", S], 2,
     "a name of 10000 bytes is no branch, tag or commit hash", None),
    ("generate-revision-10000-characters", ["generate", "org/model", "hi", "--revision", LONG_REV], 2,
     "a name of 10000 bytes is no branch, tag or commit hash", None),
    ("serve-revision-10000-characters", ["serve", "org/model", "--revision", LONG_REV, "--store", S], 2,
     "a name of 10000 bytes is no branch, tag or commit hash", None),
]


def _alarm(signum, frame):
    raise Hung(f"no answer within {ALARM_S} s")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_with_its_exit_status_and_nothing_written(case, env, capsys):
    name, argv, code, needle, needs = case
    if needs == "demo" and not HAVE_DEMO:
        pytest.skip("no demo model in assets/")
    if needs in ("datasets", "pyarrow"):
        pytest.importorskip(needs)
    argv = [_fill(a, env) for a in argv]
    before = folder_state(env.root)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(ALARM_S)
    started = time.monotonic()
    try:
        got, out, err = run_cli(argv, capsys)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

    lines = [line for line in err.splitlines() if line.strip()]
    assert got == code, (got, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert lines == [lines[0]] and lines[0].startswith("error: ") and needle in lines[0], err
    assert time.monotonic() - started < ALARM_S / 2, "a small bad input answers within a few seconds"
    assert folder_state(env.root) == before, "a file changed"


def test_the_path_in_a_gold_line_is_the_one_given_not_the_absolute_one(env, tmp_path, monkeypatch, capsys):
    """Before: a CSV gold `1e3` was "not a number" (while the JSON number 1e3 is read as 1000), on a line naming
    the absolute path."""
    monkeypatch.chdir(env.root)
    before = folder_state(env.root)
    code, _, err = run_cli(["audit", "demo", "--task", "sci.csv", "--store", "good.sqlite"], capsys)
    assert code == 2 and err == ("error: sci.csv:2: the gold answer '1e3' of question q000 is in scientific notation, "
                                 "which the number answer format does not read (in an answer, '1e3' reads as 1): "
                                 "write it as 1000\n"), err
    assert folder_state(env.root) == before


def test_a_json_number_in_scientific_notation_is_its_plain_decimal(tmp_path):
    from reachtui.tasks import load_task

    path = _jsonl(tmp_path / "t.jsonl", ['{"id": "a", "question": "q?", "answer": 1e3}',
                                         '{"id": "b", "question": "q?", "answer": 1e22}',
                                         '{"id": "c", "question": "q?", "answer": 2.5e-3}'])
    assert [q.answer for q in load_task(str(path)).questions] == ["1000", "10000000000000000000000", "0.0025"]


# -- 1. what an input may be, and what it still accepts ------------------------------------------------------------


def test_a_fifo_swapped_in_after_the_check_is_refused_on_its_descriptor_not_read(tmp_path):
    """`open_input` checks the path, then opens it without blocking and checks what it opened: a FIFO put in the
    file's place between the two is one line, never a hang."""
    from reachtui import inputs
    from reachtui.errors import ReachError

    path = tmp_path / "p.toml"
    path.write_text("seed = 1\n")
    real_check = inputs.check_input

    def swap(p, kind, shown=None, **kw):
        checked = real_check(p, kind, shown, **kw)
        path.unlink()
        os.mkfifo(path)
        return checked

    inputs.check_input = swap
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(ALARM_S)
    try:
        with pytest.raises(ReachError, match=FIFO.replace("(", r"\(").replace(")", r"\)")):
            inputs.open_input(path, inputs.PROTOCOL)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        inputs.check_input = real_check


def test_a_file_that_grows_past_its_limit_while_read_is_refused(tmp_path, monkeypatch):
    from reachtui import inputs
    from reachtui.errors import ReachError

    path = tmp_path / "k.toml"
    path.write_text("")
    kind = inputs.InputKind("--keymap", "a keymap", 100)
    fh = inputs.open_input(path, kind)
    path.write_text("x" * 500)                # grown since it was checked (0 bytes) and opened
    with pytest.raises(ReachError, match="more than a keymap may hold \\(100 bytes\\); it grew while it was read"):
        fh.read()
    fh.close()


def test_links_to_regular_files_and_gzip_imports_are_still_read(env, tmp_path, capsys):
    """What the check lets through: a symlink to a task, a gzip file of generations, a protocol given through a
    symlink: read as before."""
    import gzip

    store = tmp_path / "s.sqlite"
    (tmp_path / "task.jsonl").symlink_to(env["t.jsonl"])
    (tmp_path / "gens.jsonl.gz").write_bytes(gzip.compress(Path(env["gens.jsonl"]).read_bytes()))
    (tmp_path / "p.toml").write_text('[[probes]]\nname = "sample"\nbudget = 1\n')
    (tmp_path / "link.toml").symlink_to(tmp_path / "p.toml")
    code, out, err = run_cli(["import", str(tmp_path / "gens.jsonl.gz"), "--task", str(tmp_path / "task.jsonl"),
                              "--store", str(store), "--protocol", str(tmp_path / "link.toml")], capsys)
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "run 1"


def test_a_csv_header_with_trailing_empty_columns_still_reads(tmp_path):
    """A header ending in commas (spreadsheets write them) names no field: its empty cells are not metadata."""
    from reachtui.tasks import load_task

    path = tmp_path / "t.csv"
    path.write_text("id,question,answer,,\nq1,What is 1 + 1?,2,,\nq2,\"What is 2,\nplus 2?\",4\n")
    task = load_task(str(path))
    assert [(q.id, q.question, q.answer, q.meta, q.line) for q in task.questions] == [
        ("q1", "What is 1 + 1?", "2", (), 2), ("q2", "What is 2,\nplus 2?", "4", (), 4)]


# -- 3. metadata: typed on the way in, every export of a stored run holds it -----------------------------------------


def _meta_task(path: Path) -> Path:
    rows = [{"id": "q000", "big": 10**30, "mixed": 1, "flag": True, "level": 1, "ratio": 0.5},
            {"id": "q001", "big": 7, "mixed": "two", "flag": False, "level": 2, "ratio": 2},
            {"id": "q002", "big": None, "mixed": 3.5, "flag": None, "level": 3, "ratio": None},
            {"id": "q003", "big": 1, "mixed": True, "flag": True, "level": 4, "ratio": 1.5},
            {"id": "q004", "big": 2, "mixed": None, "flag": False, "level": 5, "ratio": 3}]
    return _jsonl(path, [dict(r, question=f"What is {i} + 1?", answer=str(i + 1)) for i, r in enumerate(rows)])


def test_metadata_is_typed_so_every_export_holds_it(env, tmp_path, capsys):
    """Before: an integer of 10**30 failed --where, parquet (also --run all) and to_pandas; mixed kinds in one
    key (1, "two", 3.5, true, null) failed parquet. Now such a key is text, the others keep their kind."""
    pq = pytest.importorskip("pyarrow.parquet")
    store = tmp_path / "s.sqlite"
    task = _meta_task(tmp_path / "meta.jsonl")
    gens = _jsonl(tmp_path / "g.jsonl", [{"question_id": f"q00{i}", "probe": "realized", "attempt": 0,
                                          "output": f"#### {i + 1}"} for i in range(5)])
    assert run_cli(["import", str(gens), "--task", str(task), "--store", str(store)], capsys)[0] == 0
    cols = "question_id,meta_big,meta_mixed,meta_flag,meta_level,meta_ratio"
    code, out, err = run_cli(["export", "questions", "--store", str(store), "--where", "meta_level > 0",
                              "--columns", cols, "--csv"], capsys)
    assert code == 0, err
    assert out.splitlines() == [cols, "q000,1000000000000000000000000000000,1,1,1,0.5", "q001,7,two,0,2,2.0",
                                "q002,,3.5,,3,", "q003,1,true,1,4,1.5", "q004,2,,0,5,3.0"]
    for argv in (["--run", "1"], ["--run", "all"]):
        code, _, err = run_cli(["export", "questions", "--store", str(store), *argv, "-o", str(tmp_path / "q.parquet")],
                               capsys)
        assert code == 0, err
        table = pq.read_table(tmp_path / "q.parquet")
        assert {n: str(table.schema.field(n).type) for n in cols.split(",")[1:]} == {
            "meta_big": "string", "meta_mixed": "string", "meta_flag": "bool", "meta_level": "int64",
            "meta_ratio": "double"}
        assert table.column("meta_mixed").to_pylist() == ["1", "two", "3.5", "true", None]
    pytest.importorskip("pandas")
    from reachtui import api

    with api.open_store(store) as audit:
        frame = audit.questions(1).to_pandas()
    assert frame["meta_big"].tolist()[:2] == ["1000000000000000000000000000000", "7"]


def _old_store(env: Env, tmp_path: Path) -> Path:
    """A store as an older reachtui wrote it: question metadata no export could hold (names that make one
    column, 2,500 keys, a 20 MB value, 10**30, mixed kinds), written into its rows directly."""
    store = tmp_path / "old.sqlite"
    shutil.copy(env["good.sqlite"], store)
    con = sqlite3.connect(store)
    ids = [r[0] for r in con.execute("SELECT id FROM questions ORDER BY idx")]
    metas = [{"a-b": 1, "a_b": 2, "a b": 3, "big": 10**30, "mixed": [1, "two", 3.5, True, None, 4][i],
              **({"blob": "z" * (20 << 20)} if i == 0 else {}), **({f"k{j}": j for j in range(2500)} if i == 1 else {})}
             for i in range(len(ids))]
    con.executemany("UPDATE questions SET meta = ? WHERE id = ?", [(json.dumps(m), q) for m, q in zip(metas, ids)])
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return store


def test_a_store_an_older_version_wrote_with_such_metadata_still_exports(env, tmp_path, capsys):
    """Every export of such a store succeeds, and reads leave it as it was: names made distinct (meta_a_b,
    meta_a_b_2, meta_a_b_3), values typed, the 20 MB value cut, keys past 1,024 left out with a note."""
    pytest.importorskip("pyarrow")
    store = _old_store(env, tmp_path)
    before = folder_state(tmp_path)
    code, out, err = run_cli(["export", "questions", "--store", str(store), "--run", "1", "--where",
                              "meta_a_b_3 = 3 and length(meta_blob) > 0", "--columns",
                              "question_id,meta_a_b,meta_a_b_2,meta_a_b_3,meta_big,meta_mixed", "--csv"], capsys)
    assert code == 0, err
    assert out.splitlines() == ["question_id,meta_a_b,meta_a_b_2,meta_a_b_3,meta_big,meta_mixed",
                                "q000,1,2,3,1000000000000000000000000000000,1"]
    assert "1,482 of the questions' 2,506 metadata keys are left out" in err
    for argv in (["--run", "all", "-o", str(tmp_path / "out" / "q.parquet")], ["--run", "all", "--json"],
                 ["--run", "2", "--order", "meta_big", "--limit", "2", "--csv"]):
        (tmp_path / "out").mkdir(exist_ok=True)
        code, out, err = run_cli(["export", "questions", "--store", str(store), *argv], capsys)
        assert code == 0 and "error" not in err, err
    shutil.rmtree(tmp_path / "out")
    assert folder_state(tmp_path) == before


# -- 2 and 9: the app's metadata filter and what it prints ------------------------------------------------------------


async def test_the_app_filters_metadata_by_kind_and_shows_it_on_one_line(tmp_path, capsys):
    """Before: `filter: flag = 1` matched a metadata `true` too (1 == True in Python), and a key or value
    holding a newline broke the palette entry and the status line over two lines and cut the detail title.
    (A task read now stores one kind per key, `flag` here as text; a store an older version wrote holds the
    values as they came, so the app compares kinds itself.)"""
    from conftest import settle

    from reachtui.tui.app import ReachApp
    from reachtui.tui.palette import palette_commands

    rows = [{"id": "q000", "flag": 1, "sub\nject": "alg\nebra\x1b[31m"}, {"id": "q001", "flag": True},
            {"id": "q002", "flag": "1"}, {"id": "q003", "flag": 1.0}]
    task = _jsonl(tmp_path / "t.jsonl", [dict(r, question=f"What is {i} + 1?", answer=str(i + 1))
                                         for i, r in enumerate(rows)])
    gens = _jsonl(tmp_path / "g.jsonl", [{"question_id": f"q00{i}", "probe": "realized", "attempt": 0,
                                          "output": f"#### {i + 1}"} for i in range(4)])
    store = tmp_path / "s.sqlite"
    assert run_cli(["import", str(gens), "--task", str(task), "--store", str(store)], capsys)[0] == 0
    con = sqlite3.connect(store)
    assert [json.loads(m)["flag"] for (m,) in con.execute("SELECT meta FROM questions ORDER BY idx")] == \
        ["1", "true", "1", "1.0"]                                     # stored as text: the kinds were mixed
    con.executemany("UPDATE questions SET meta = json_set(meta, '$.flag', json(?)) WHERE qid = ?",
                    [(json.dumps(r["flag"]), r["id"]) for r in rows])  # as an older version stored them
    con.commit()
    con.close()
    app = ReachApp(store)
    async with app.run_test(size=(150, 42)) as pilot:
        await settle(app, pilot)
        titles = {title: cb for title, cb, _help in palette_commands(app) if title.startswith("filter: ")
                  and " = " in title}
        assert sorted(titles) == ['filter: flag = "1"', "filter: flag = 1", "filter: flag = true",
                                  "filter: sub␊ject = alg␊ebra␛[31m"]
        for title, ids in (("filter: flag = 1", ["q000", "q003"]), ("filter: flag = true", ["q001"]),
                           ('filter: flag = "1"', ["q002"]), ("filter: sub␊ject = alg␊ebra␛[31m", ["q000"])):
            titles[title]()
            await pilot.pause()
            assert app.table.row_ids == ids, title
        status = str(app.screen.query_one("#status").render())
        assert status.splitlines() == ["filter: sub␊ject = alg␊ebra␛[31m — 1 of 4 questions"]
        await pilot.pause(0.3)
        detail = str(app.screen.query_one("#detail-title").render())
        assert detail.splitlines() == ["q000  gold 1  flag 1  sub␊ject alg␊ebra␛[31m"]
