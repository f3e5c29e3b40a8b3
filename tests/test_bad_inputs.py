"""Bad inputs, faults of the environment and damaged stores, across audit, open, generate, export, compare,
import and runs: each answers with one line (`error: ...`) and its exit status (2 bad input, 3 the
environment: disk full, read-only, damaged store), never a traceback, never a hang, and leaves the store
exactly as it was (its bytes and its rows).

Every case runs in this process through `reachtui.cli.main` (the one place errors become lines). Cases that
need a read-only file system (a tmpfs remounted read-only) or an immutable file (chattr +i) are skipped
where this machine does not allow them. `reachtui serve` is not in this file (it does not exist yet).
"""

from __future__ import annotations

import json
import shutil
import sqlite3

from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_helpers import HAVE_DEMO, run_cli
from cli_helpers import corrupt as _corrupt
from cli_helpers import fingerprint as _fingerprint
from cli_helpers import model_copy as _model_copy
from cli_helpers import try_cmd as _try
from fake_runner import FakeRunner, write_task
from reachtui.assets import DEMO_MODEL_DIR
from reachtui.engine.audit import run_audit
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tasks import load_task

NOT_UTF8 = b"\xff\xfe\xfa not utf-8 \xc3\x28\n"


@dataclass
class Env:
    root: Path
    ro: Path | None            # a read-only file system holding a copy of the good store, or None
    immutable: Path | None     # an immutable copy of the good store, or None
    full: Path | None          # a full file system, or None

    def __getitem__(self, name: str) -> str:
        return str(self.root / name)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    task = write_task(root / "t.jsonl", 6)
    good = root / "good.sqlite"
    with Store(good) as store:
        t = load_task(str(task))
        run_audit(store, FakeRunner(), model_name="fake", task=t,
                  protocol=Protocol(probes=(ProbeSpec("sample", budget=2),), seed=1))
        run_audit(store, FakeRunner(), model_name="fake", task=t,
                  protocol=Protocol(probes=(ProbeSpec("sample", budget=2),), seed=2))
    con = sqlite3.connect(good)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    shutil.copy(good, root / "damaged.sqlite")
    _corrupt(root / "damaged.sqlite")
    (root / "junk.sqlite").write_text("this is not a database\n")
    (root / "adir").mkdir()
    (root / "keys_notutf8.toml").write_bytes(NOT_UTF8)
    (root / "keys_bad.toml").write_text('"filter.failure" = \n')
    (root / "keys_unknown.toml").write_text('"no.such.binding" = "F"\n')
    (root / "proto_notutf8.toml").write_bytes(NOT_UTF8)
    (root / "proto_bad.toml").write_text("max_new_tokens = = 3\n")
    (root / "proto_unknown.toml").write_text("no_such_setting = 3\n")
    (root / "task_notutf8.jsonl").write_bytes(NOT_UTF8)
    (root / "task_empty.jsonl").write_text("")
    (root / "task_badjson.jsonl").write_text('{"id": "a", "question": "q?", "answer": "1"}\n{not json\n')
    (root / "long.jsonl").write_text(
        json.dumps({"id": "short", "question": "What is 2 + 3?", "answer": "5"}) + "\n"
        + json.dumps({"id": "toolong", "question": "What is 2 + 3? " * 200, "answer": "5"}) + "\n")
    qids = [f"q{i:03d}" for i in range(6)]
    lines = [json.dumps({"question_id": q, "probe": "realized", "attempt": 0, "output": "#### 1"}) for q in qids]
    (root / "gens.jsonl").write_text("\n".join(lines) + "\n")
    (root / "gens_notutf8.jsonl").write_bytes(NOT_UTF8)
    (root / "gens_badjson.jsonl").write_text(lines[0] + "\n{oops\n")
    (root / "gens_unknown.jsonl").write_text(
        json.dumps({"question_id": "q999", "probe": "realized", "attempt": 0, "output": "#### 1"}) + "\n")
    (root / "gens_empty.jsonl").write_text("")
    (root / "gens_surrogate.jsonl").write_text(
        '{"question_id": "q000", "probe": "realized", "attempt": 0, "output": "\\ud800"}\n')
    (root / "task_surrogate.jsonl").write_text('{"id": "a", "question": "what is \\udfff?", "answer": "1"}\n')
    (root / "a_file").write_text("x")
    if HAVE_DEMO:
        pickled = _model_copy(root, "pickled", drop_weights=True)
        (pickled / "pytorch_model.bin").write_bytes(b"not really a pickle")
        cfg = json.loads((DEMO_MODEL_DIR / "config.json").read_text())
        _model_copy(root, "badtype", config=dict(cfg, model_type="foozle"))
        _model_copy(root, "badjson", config="{not json")
        _model_copy(root, "listjson", config="[1, 2]")
    (root / "noconfig").mkdir()

    immutable = root / "immutable.sqlite"
    shutil.copy(good, immutable)
    if not _try("chattr", "+i", str(immutable)):
        immutable = None
    ro = root / "ro"
    ro.mkdir()
    if _try("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(ro)):
        shutil.copy(good, ro / "s.sqlite")
        if not _try("mount", "-o", "remount,ro", str(ro)):
            _try("umount", str(ro))
            ro = None
    else:
        ro = None
    full = root / "full"
    full.mkdir()
    if _try("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)):
        with open(full / "filler", "wb") as fh:
            try:
                fh.write(b"\0" * (1 << 20))
            except OSError:
                pass
    else:
        full = None
    try:
        yield Env(root, ro, immutable, full)
    finally:
        if immutable is not None:
            _try("chattr", "-i", str(immutable))
        import gc

        gc.collect()
        for mnt in (ro, full):
            if mnt is not None and not _try("umount", str(mnt)):
                _try("umount", "-l", str(mnt))


S = "{good}"           # placeholders filled from the env
A = ["audit", "demo", "--task", "{t.jsonl}", "--store", S]
G = ["generate", "demo", "What is 2 + 3?"]
I = ["--task", "{t.jsonl}", "--store", S]
BIG = str(10**26)
NOT_UTF8_ARG = b"caf\xe9".decode("utf-8", "surrogateescape")     # how Python passes such bytes in argv
CTE = "(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c) > 0"

#: (id, argv, exit status, a piece of the error line, what it needs: "demo" | "ro" | "immutable" | None,
#: whether the model loads first, so that its loading line may come before the error line)
CASES = [
    # -- audit: options ------------------------------------------------------------------------------
    ("audit-budget-text", A + ["--budget", "abc"], 2, "not a valid integer", None, False),
    ("audit-budget-0", A + ["--budget", "0"], 2, "budget must be at least 1", None, False),
    ("audit-batch-size-0", A + ["--batch-size", "0"], 2, "--batch-size must be at least 1", None, False),
    ("audit-limit-0", A + ["--limit", "0"], 2, "--limit must be at least 1", None, False),
    ("audit-limit-negative", A + ["--limit", "-3"], 2, "--limit must be at least 1", None, False),
    ("audit-threads-0", A + ["--threads", "0"], 2, "--threads must be at least 1", None, False),
    ("audit-temperature-nan", A + ["--temperature", "nan"], 2, "must be finite", None, False),
    ("audit-temperature-inf", A + ["--temperature", "inf"], 2, "must be finite", None, False),
    ("audit-temperature-negative", A + ["--temperature", "-1"], 2, "temperature must be >= 0", None, False),
    ("audit-probes-empty", A + ["--probes", ""], 2, "names no probe", None, False),
    ("audit-probes-commas", A + ["--probes", " , "], 2, "names no probe", None, False),
    ("audit-probes-unknown", A + ["--probes", "sample,beam"], 2, "unknown probe 'beam'", None, False),
    ("audit-temperature-without-sample", A + ["--probes", "routes", "--temperature", "0.5"], 2,
     "not in this audit", None, False),
    ("audit-budget-without-probe", A + ["--probes", "realized", "--budget", "4"], 2, "no probe to give it to",
     None, False),
    ("audit-mlp-scan-other-probe", A + ["--probes", "sample", "--mlp-scan", "mcts"], 2, "not in this audit",
     None, False),
    ("audit-max-new-tokens-0", A + ["--max-new-tokens", "0"], 2, "max_new_tokens must be at least 1", None, False),
    ("audit-max-new-tokens-negative", A + ["--max-new-tokens", "-5"], 2, "max_new_tokens must be at least 1",
     None, False),
    ("audit-max-new-tokens-huge", A + ["--max-new-tokens", "100000000000"], 2, "max_new_tokens must be at most",
     None, False),
    ("audit-max-new-tokens-over-positions", A + ["--max-new-tokens", "100000"], 2, "position limit of 512", "demo",
     False),
    ("audit-seed-negative", A + ["--seed", "-1"], 2, "seed must be >= 0", None, False),
    ("audit-run-and-new", A + ["--run", "1", "--new"], 2, "contradict", None, False),
    ("audit-run-missing", A + ["--run", "99"], 2, "no run 99", None, False),
    ("audit-run-other-protocol", A + ["--run", "1", "--probes", "sample", "--budget", "2", "--seed", "9"], 2,
     "differs in: seed", None, False),
    ("audit-workers-without-ray", A + ["--workers", "2"], 2, "--workers needs --ray", None, False),
    ("audit-ray-client", A + ["--ray", "ray://host:10001"], 2, "Ray Client is not supported", None, False),
    ("audit-device-map-unknown", A + ["--device-map", "everywhere"], 2, "unknown device map", None, False),
    ("audit-offload-without-map", A + ["--offload-folder", "{adir}"], 2, "only applies with --device-map",
     None, False),
    ("audit-unknown-option", A + ["--frobnicate"], 2, "No such option", None, False),
    # -- audit: files --------------------------------------------------------------------------------
    ("audit-protocol-missing", A + ["--protocol", "{nope.toml}"], 2, "no such protocol file", None, False),
    ("audit-protocol-not-utf8", A + ["--protocol", "{proto_notutf8.toml}"], 2, "cannot read", None, False),
    ("audit-protocol-bad-toml", A + ["--protocol", "{proto_bad.toml}"], 2, "not valid TOML", None, False),
    ("audit-protocol-unknown-key", A + ["--protocol", "{proto_unknown.toml}"], 2, "unknown key", None, False),
    ("audit-task-missing", ["audit", "demo", "--task", "{nope.jsonl}", "--store", S], 2, "nope.jsonl", None, False),
    ("audit-task-not-utf8", ["audit", "demo", "--task", "{task_notutf8.jsonl}", "--store", S], 2, "UTF-8", None,
     False),
    ("audit-task-empty", ["audit", "demo", "--task", "{task_empty.jsonl}", "--store", S], 2, "no questions",
     None, False),
    ("audit-task-bad-json", ["audit", "demo", "--task", "{task_badjson.jsonl}", "--store", S], 2, "bad JSON",
     None, False),
    ("audit-question-too-long", ["audit", "demo", "--task", "{long.jsonl}", "--store", S, "--probes", "sample",
                                 "--budget", "2", "--device", "cpu"], 2,
     "(question id toolong; the longest prompt is 3,018 tokens); --skip-long audits the other 1", "demo", False),
    # -- audit: models -------------------------------------------------------------------------------
    ("audit-model-missing", ["audit", "{nope-model}", "--task", "{t.jsonl}", "--store", S], 2, "not found",
     None, False),
    ("audit-model-is-a-file", ["audit", "{a_file}", "--task", "{t.jsonl}", "--store", S], 2, "is a file", None,
     False),
    ("audit-model-no-config", ["audit", "{noconfig}", "--task", "{t.jsonl}", "--store", S], 2, "no config.json",
     None, False),
    ("audit-model-pickled", ["audit", "{pickled}", "--task", "{t.jsonl}", "--store", S], 2, "--allow-pickle",
     "demo", False),
    ("audit-model-config-not-json", ["audit", "{badjson}", "--task", "{t.jsonl}", "--store", S], 2,
     "config.json cannot be read", "demo", False),
    ("audit-model-config-a-list", ["audit", "{listjson}", "--task", "{t.jsonl}", "--store", S], 2,
     "not a JSON object", "demo", False),
    ("audit-model-unknown-type", ["audit", "{badtype}", "--task", "{t.jsonl}", "--store", S, "--device", "cpu"],
     2, "foozle", "demo", False),
    ("audit-device-unknown", A + ["--device", "tpu"], 2, "unknown device 'tpu'", "demo", False),
    ("audit-dtype-unknown", A + ["--dtype", "float8", "--device", "cpu"], 2, "unknown dtype", "demo", False),
    # -- audit: stores -------------------------------------------------------------------------------
    ("audit-store-not-sqlite", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{junk.sqlite}"], 2,
     "not an SQLite database", None, False),
    ("audit-store-a-directory", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{adir}"], 2,
     "is a directory", None, False),
    ("audit-store-damaged", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{damaged.sqlite}"], 3,
     "is damaged", None, False),
    ("audit-store-immutable", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{immutable}"], 3,
     "cannot be written", "immutable", False),
    ("audit-store-read-only-fs", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{ro}"], 3,
     "cannot be written", "ro", False),
    # -- open ----------------------------------------------------------------------------------------
    ("open-keymap-not-utf8", ["open", "--store", S, "--keymap", "{keys_notutf8.toml}"], 2, "not UTF-8", None,
     False),
    ("open-keymap-bad-toml", ["open", "--store", S, "--keymap", "{keys_bad.toml}"], 2, "not valid TOML", None,
     False),
    ("open-keymap-unknown-id", ["open", "--store", S, "--keymap", "{keys_unknown.toml}"], 2,
     "unknown binding id", None, False),
    ("open-keymap-missing", ["open", "--store", S, "--keymap", "{nope.toml}"], 2, "no such file", None, False),
    ("open-store-missing", ["open", "--store", "{nope.sqlite}"], 2, "no audit store", None, False),
    ("open-store-damaged", ["open", "--store", "{damaged.sqlite}"], 3, "is damaged", None, False),
    ("open-store-not-sqlite", ["open", "--store", "{junk.sqlite}"], 2, "not an SQLite database", None, False),
    ("open-run-missing", ["open", "--store", S, "--run", "99"], 2, "no run 99", None, False),
    ("open-model-missing", ["open", "{nope-model}", "--store", S], 2, "not found", None, False),
    ("open-model-pickled", ["open", "{pickled}", "--store", S], 2, "--allow-pickle", "demo", False),
    ("open-probes-empty", ["open", "demo", "--store", S, "--probes", ""], 2, "names no probe", None, False),
    ("open-budget-0", ["open", "demo", "--store", S, "--budget", "0"], 2, "budget must be at least 1", None,
     False),
    ("open-max-new-tokens-huge", ["open", "demo", "--store", S, "--max-new-tokens", "100000000000"], 2,
     "max_new_tokens must be at most", None, False),
    ("open-max-new-tokens-over-positions", ["open", "demo", "--store", S, "--max-new-tokens", "100000"], 2,
     "position limit", "demo", False),
    ("open-device-map-unknown", ["open", "demo", "--store", S, "--device-map", "everywhere"], 2,
     "unknown device map", None, False),
    ("open-mlp-scan-unknown", ["open", "demo", "--store", S, "--mlp-scan", "beam"], 2, "not in this audit",
     None, False),
    ("open-store-damaged-with-model", ["open", "demo", "--store", "{damaged.sqlite}"], 3, "is damaged", "demo",
     False),
    ("open-store-immutable-with-model", ["open", "demo", "--store", "{immutable}"], 3, "cannot be written",
     "immutable", False),
    # -- generate ------------------------------------------------------------------------------------
    ("generate-temperature-nan", G + ["--temperature", "nan"], 2, "finite number", None, False),
    ("generate-temperature-inf", G + ["--temperature", "inf"], 2, "finite number", None, False),
    ("generate-temperature-negative", G + ["--temperature", "-1"], 2, "--temperature must be >= 0", None, False),
    ("generate-top-p-0", G + ["--top-p", "0"], 2, "--top-p must be in (0, 1]", None, False),
    ("generate-top-p-nan", G + ["--top-p", "nan"], 2, "--top-p must be in (0, 1]", None, False),
    ("generate-max-new-tokens-0", G + ["--max-new-tokens", "0"], 2, "at least 1", None, False),
    ("generate-max-new-tokens-huge", G + ["--max-new-tokens", "100000000000"], 2, "position limit", "demo",
     False),
    ("generate-stop-empty", G + ["--stop", ""], 2, "must not be empty", None, False),
    ("generate-route-descending", G + ["--route", "5-1"], 2, "route", None, False),
    ("generate-route-junk", G + ["--route", "a,b"], 2, "route", None, False),
    ("generate-silence-junk", G + ["--silence", "x"], 2, "silenced", None, False),
    ("generate-route-out-of-range", G + ["--route", "0-40", "--device", "cpu"], 2, "out of range", "demo", False),
    ("generate-model-pickled", ["generate", "{pickled}", "hi"], 2, "--allow-pickle", "demo", False),
    ("generate-model-unknown-type", ["generate", "{badtype}", "hi", "--device", "cpu"], 2, "foozle", "demo",
     False),
    ("generate-prompt-too-long", ["generate", "demo", "1 + 2 = 3. " * 300, "--device", "cpu"], 2,
     "position limit of 512", "demo", False),
    # -- export --------------------------------------------------------------------------------------
    ("export-table-unknown", ["export", "nosuch", "--store", S], 2, "unknown table", None, False),
    ("export-format-unknown", ["export", "summary", "--store", S, "--format", "xml"], 2, "unknown format", None,
     False),
    ("export-two-formats", ["export", "summary", "--store", S, "--csv", "--json"], 2, "choose one output format",
     None, False),
    ("export-limit-negative", ["export", "summary", "--store", S, "--limit", "-1"], 2, "--limit must be 0 or more",
     None, False),
    ("export-run-missing", ["export", "summary", "--store", S, "--run", "99"], 2, "99", None, False),
    ("export-run-text", ["export", "summary", "--store", S, "--run", "abc"], 2, "abc", None, False),
    ("export-run-all-and-one", ["export", "summary", "--store", S, "--run", "all", "--run", "1"], 2,
     "cannot be combined", None, False),
    ("export-compare-one-run", ["export", "compare", "--store", S, "--run", "1"], 2, "needs two runs", None,
     False),
    ("export-where-syntax", ["export", "questions", "--store", S, "--where", "nonsense((("], 2, "bad --where",
     None, False),
    ("export-where-unknown-column", ["export", "questions", "--store", S, "--where", "no_such_col = 1"], 2,
     "no such column", None, False),
    ("export-where-endless-cte", ["export", "questions", "--store", S, "--where", CTE, "--where-timeout", "0.5"], 2,
     "time limit of 0.5 s", None, False),
    ("export-where-huge-blob", ["export", "questions", "--store", S, "--where",
                                "length(randomblob(1000000000)) > 0"], 2, "too big", None, False),
    ("export-where-timeout-0", ["export", "questions", "--store", S, "--where-timeout", "0"], 2,
     "--where-timeout", None, False),
    ("export-column-unknown", ["export", "questions", "--store", S, "--columns", "nope"], 2, "unknown column",
     None, False),
    ("export-order-unknown", ["export", "questions", "--store", S, "--order", "nope"], 2, "bad --order", None,
     False),
    ("export-output-no-folder", ["export", "summary", "--store", S, "-o", "{no/such/dir/x.csv}"], 2,
     "does not exist", None, False),
    ("export-output-a-directory", ["export", "summary", "--store", S, "-o", "{adir}"], 2, "is a directory", None,
     False),
    ("export-output-read-only-fs", ["export", "summary", "--store", S, "-o", "{ro/x.csv}"], 3,
     "read-only file system", "ro", False),
    ("export-store-damaged", ["export", "summary", "--store", "{damaged.sqlite}"], 3, "is damaged", None, False),
    ("export-store-not-sqlite", ["export", "summary", "--store", "{junk.sqlite}"], 2, "not an SQLite database",
     None, False),
    ("export-store-missing", ["export", "summary", "--store", "{nope.sqlite}"], 2, "no audit store", None, False),
    ("export-bootstrap-negative", ["export", "summary", "--store", S, "--bootstrap", "-1"], 2, "--bootstrap",
     None, False),
    # -- compare -------------------------------------------------------------------------------------
    ("compare-run-missing", ["compare", "1", "99", "--store", S], 2, "99", None, False),
    ("compare-unmatched", ["compare", "1", "2", "--store", S], 2, "not a matched comparison", None, False),
    ("compare-list-unknown", ["compare", "1", "1", "--store", S, "--list", "nonsense"], 2, "nonsense", None,
     False),
    ("compare-format-unknown", ["compare", "1", "1", "--store", S, "--format", "xml"], 2, "unknown format", None,
     False),
    ("compare-run-text", ["compare", "x", "y", "--store", S], 2, "'x'", None, False),
    ("compare-store-damaged", ["compare", "1", "2", "--store", "{damaged.sqlite}"], 3, "is damaged", None,
     False),
    ("compare-missing-argument", ["compare", "1"], 2, "Missing argument", None, False),
    # -- import --------------------------------------------------------------------------------------
    ("import-file-missing", ["import", "{nope.jsonl}"] + I, 2, "nope.jsonl", None, False),
    ("import-file-not-utf8", ["import", "{gens_notutf8.jsonl}"] + I, 2, "UTF-8", None, False),
    ("import-file-bad-json", ["import", "{gens_badjson.jsonl}"] + I, 2, "bad JSON", None, False),
    ("import-unknown-question", ["import", "{gens_unknown.jsonl}"] + I, 2, "unknown question id", None, False),
    ("import-file-empty", ["import", "{gens_empty.jsonl}"] + I, 2, "gens_empty.jsonl", None, False),
    ("import-format-unknown", ["import", "{gens.jsonl}"] + I + ["--format", "nope"], 2, "unknown import format",
     None, False),
    ("import-answer-format-unknown", ["import", "{gens.jsonl}"] + I + ["--answer-format", "nope"], 2,
     "unknown answer format", None, False),
    ("import-filter-with-jsonl", ["import", "{gens.jsonl}"] + I + ["--format", "jsonl", "--filter", "x"], 2,
     "--filter is for lm-eval", None, False),
    ("import-protocol-bad", ["import", "{gens.jsonl}"] + I + ["--protocol", "{proto_bad.toml}"], 2,
     "not valid TOML", None, False),
    ("import-store-damaged", ["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--store", "{damaged.sqlite}"], 3,
     "is damaged", None, False),
    ("import-store-immutable", ["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--store", "{immutable}"], 3,
     "cannot be written", "immutable", False),
    ("import-store-read-only-fs", ["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--store", "{ro}"], 3,
     "cannot be written", "ro", False),
    # -- numbers and text no store could hold ------------------------------------------------------------
    ("audit-run-huge", A + ["--run", BIG], 2, f"no run {BIG}", None, False),
    ("audit-limit-huge", A + ["--limit", BIG], 2, "is too large", None, False),
    ("audit-budget-huge", A + ["--budget", BIG], 2, "budget must be at most 10000", None, False),
    ("audit-threads-huge", A + ["--threads", "100000"], 2, "at most 1024", None, False),
    ("audit-store-under-a-file", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{a_file/sub/s.sqlite}"], 2,
     "Not a directory", None, False),
    ("open-run-huge", ["open", "--store", S, "--run", BIG], 2, f"no run {BIG}", None, False),
    ("export-run-huge", ["export", "summary", "--store", S, "--run", BIG], 2, f"no run {BIG}", None, False),
    ("export-where-timeout-nan", ["export", "questions", "--store", S, "--where", "1", "--where-timeout", "nan"], 2,
     "finite number of seconds", None, False),
    ("export-bootstrap-huge", ["export", "summary", "--store", S, "--bootstrap", BIG], 2, "--bootstrap", None,
     False),
    ("export-where-not-utf8", ["export", "questions", "--store", S, "--where", NOT_UTF8_ARG], 2, "not UTF-8 text",
     None, False),
    ("export-output-full-disk", ["export", "summary", "--store", S, "-o", "{full/x.csv}"], 3,
     "no space left on the device", "full", False),
    ("compare-run-huge", ["compare", "1", BIG, "--store", S], 2, f"no run {BIG}", None, False),
    ("generate-seed-huge", G + ["--seed", BIG], 2, "not in the range", None, False),
    ("generate-prompt-not-utf8", ["generate", "demo", NOT_UTF8_ARG], 2, "not UTF-8 text", None, False),
    ("import-lone-surrogate", ["import", "{gens_surrogate.jsonl}"] + I, 2, "unpaired surrogate", None, False),
    ("audit-task-lone-surrogate", ["audit", "demo", "--task", "{task_surrogate.jsonl}", "--store", S], 2,
     "unpaired surrogate", None, False),
    # -- runs and the command line itself -------------------------------------------------------------
    ("runs-store-missing", ["runs", "--store", "{nope.sqlite}"], 2, "no audit store", None, False),
    ("runs-store-damaged", ["runs", "--store", "{damaged.sqlite}"], 3, "is damaged", None, False),
    ("runs-store-not-sqlite", ["runs", "--store", "{junk.sqlite}"], 2, "not an SQLite database", None, False),
    ("runs-store-a-directory", ["runs", "--store", "{adir}"], 2, "directory", None, False),
    ("runs-unknown-option", ["runs", "--bogus"], 2, "No such option", None, False),
    ("command-unknown", ["frobnicate"], 2, "No such command", None, False),
    ("audit-missing-model", ["audit"], 2, "Missing argument", None, False),
]


def _fill(arg: str, env: Env) -> str:
    if not (arg.startswith("{") and arg.endswith("}")):
        return arg
    name = arg[1:-1]
    if name == "good":
        return env["good.sqlite"]
    if name == "immutable":
        return str(env.immutable)
    if name == "ro":
        return str(env.ro / "s.sqlite")
    if name.startswith("ro/"):
        return str(env.ro / name[3:])
    if name.startswith("full/"):
        return str(env.full / name[5:])
    return env[name]


def _store_of(argv: list[str]) -> Path | None:
    return Path(argv[argv.index("--store") + 1]) if "--store" in argv else None


def test_the_file_covers_at_least_60_kinds_of_bad_input_over_every_command():
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)
    commands = {c[1][0] for c in CASES}
    assert {"audit", "open", "generate", "export", "compare", "import", "runs"} <= commands


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_with_its_exit_status_and_the_store_unchanged(case, env, capsys):
    name, argv, code, needle, needs, loads = case
    if needs == "demo" and not HAVE_DEMO:
        pytest.skip("no demo model in assets/")
    if needs == "ro" and env.ro is None:
        pytest.skip("cannot mount a read-only tmpfs here")
    if needs == "immutable" and env.immutable is None:
        pytest.skip("chattr +i is not available here")
    if needs == "full" and env.full is None:
        pytest.skip("cannot mount a small tmpfs here")
    argv = [_fill(a, env) for a in argv]
    stores = {p for p in (_store_of(argv), Path(env["good.sqlite"])) if p is not None}
    before = {p: _fingerprint(p) for p in stores}

    got, out, err = run_cli(argv, capsys)

    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert got == code, (got, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(errors) == 1 and needle in errors[0], err
    if loads:       # the audit says it loaded the model (and may start its progress bar) before refusing
        assert lines[-1] == errors[0], err
    else:
        assert lines == errors, err
    assert {p: _fingerprint(p) for p in stores} == before, "the store changed"


def test_debug_shows_the_traceback_after_the_line(env, capsys):
    code, _, err = run_cli(["--debug", "runs", "--store", env["nope.sqlite"]], capsys)
    assert code == 2
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("error: no audit store")


def test_an_unexpected_exception_is_an_internal_error_line_with_exit_1(env, capsys, monkeypatch):
    import reachtui.store.queries as queries

    def boom(self):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(queries.StoreQueries, "list_runs", boom)
    code, _, err = run_cli(["runs", "--store", env["good.sqlite"]], capsys)
    assert code == 1
    assert err.strip() == ("error: internal error: ZeroDivisionError: a bug (run with --debug for the "
                           "traceback)")
    code, _, err = run_cli(["--debug", "runs", "--store", env["good.sqlite"]], capsys)
    assert code == 1 and "Traceback" in err and "ZeroDivisionError" in err


def test_a_read_that_meets_a_damaged_page_is_the_damaged_store_line(env, capsys, monkeypatch):
    """Where no check ran first (a reader): 'database disk image is malformed' reaching cli.main."""
    import reachtui.store.queries as queries

    def malformed(self):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(queries.StoreQueries, "list_runs", malformed)
    code, _, err = run_cli(["runs", "--store", env["good.sqlite"]], capsys)
    assert code == 3
    assert err.startswith(f"error: the store {env['good.sqlite']} is damaged") and ".recover" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("damaged", ["attempts_by_answer", "attempts_fts_data"])
def test_open_checks_a_large_store_beside_the_first_paint_and_closes_with_the_damaged_line(
        env, capsys, monkeypatch, tmp_path, damaged):
    """Above CHECK_FIRST_BYTES `open --store` checks the store after the first frame, not before it: the
    app starts, then closes with the one line and exit status a small damaged store gets before any UI;
    whether the damage is in a page the first paint reads (the index of its rows query) or one only the check reads (the
    full-text index). The store is not written."""
    import reachtui.commands.open as open_command
    from reachtui.tui import app as A

    path = tmp_path / "big.sqlite"
    shutil.copy(env["good.sqlite"], path)
    _corrupt(path, damaged)
    before = _fingerprint(path)
    monkeypatch.setattr(open_command, "CHECK_FIRST_BYTES", 0)
    apps = []
    run = A.ReachApp.run

    def headless(self, **kw):
        apps.append(self)
        return run(self, headless=True, size=(120, 40))

    monkeypatch.setattr(A.ReachApp, "run", headless)
    code, _, err = run_cli(["open", "--store", str(path)], capsys)
    assert code == 3, err
    assert [line for line in err.splitlines() if line.strip()] == [err.strip()]
    assert err.startswith(f"error: the store {path} is damaged") and ".recover" in err
    assert len(apps) == 1 and _fingerprint(path) == before
    if damaged == "attempts_fts_data":     # the first paint read nothing damaged: the check found it after
        assert apps[0].ready_at is not None and len(apps[0].all_rows) == 6


@pytest.mark.skipif(not HAVE_DEMO, reason="no demo model in assets/")
def test_allow_pickle_lets_a_pickled_only_model_load(tmp_path):
    """The refusal is about the format: with --allow-pickle the same weights, saved as a pickle, load."""
    import torch

    from reachtui.model.load import load_model

    out = _model_copy(tmp_path, "pickled", drop_weights=True)
    from safetensors.torch import load_file

    torch.save(load_file(DEMO_MODEL_DIR / "model.safetensors"), out / "pytorch_model.bin")
    from reachtui.errors import ReachError

    with pytest.raises(ReachError, match="--allow-pickle"):
        load_model(str(out), device="cpu")
    loaded = load_model(str(out), device="cpu", allow_pickle=True)
    assert loaded.arch.num_layers == load_model("demo", device="cpu").arch.num_layers
