"""Bad inputs, round 2 (issue 25): output paths that could destroy data, stores with orphaned rows or a damaged
schema, silently wrong models and golds, unbounded work, Python's own limits, exports turned against their
reader, files reachtui could not read back, grading that could hang, and the rest.

Every refused command answers with one line (`error: ...`) and its exit status (2 bad input, 3 the environment
or a damaged store), no traceback, no hang, and leaves every file of the test folder as it was (the store,
its write-ahead log, the files beside it: `folder_state`). The data-loss cases (an output that is the store,
orphaned rows adopted by a new run) would have passed silently before: each has its own test that shows the
rows kept.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_helpers import HAVE_DEMO, fingerprint, folder_state, model_copy, run_cli
from fake_runner import FakeRunner, write_task
from reachtui.assets import DEMO_MODEL_DIR
from reachtui.engine.audit import run_audit
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tasks import load_task

BIG = "9" * 5000                   # an integer Python will not convert (over 4,300 digits)
DEEP = 100_000                      # nesting deeper than any parser's recursion limit


@dataclass
class Env:
    root: Path

    def __getitem__(self, name: str) -> str:
        return str(self.root / name)


def _store_with_runs(path: Path, task: Path, seeds=(1, 2)) -> None:
    with Store(path) as store:
        t = load_task(str(task))
        for seed in seeds:
            run_audit(store, FakeRunner(), model_name="fake", task=t,
                      protocol=Protocol(probes=(ProbeSpec("sample", budget=2),), seed=seed))
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def _edited(root: Path, name: str, *statements: str) -> Path:
    """A copy of the good store changed by `statements` as the sqlite3 shell would run them (foreign keys off)."""
    path = root / name
    shutil.copy(root / "good.sqlite", path)
    con = sqlite3.connect(path)
    for sql in statements:
        con.execute(sql)
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return path


def _without_tensor(model: Path, name: str) -> Path:
    from safetensors.torch import load_file, save_file

    tensors = load_file(model / "model.safetensors")
    del tensors[name]
    save_file(tensors, model / "model.safetensors", metadata={"format": "pt"})
    return model


def _with_more_tokens(model: Path, extra: int) -> Path:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    tok.add_tokens([f"<extra{i}>" for i in range(extra)])
    tok.save_pretrained(str(model))
    return model


def _null_device(path: Path) -> bool:
    """A character device like /dev/null of our own (these tests never write to the system's /dev: a
    regression would replace it for every process on the machine)."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        return True
    except (OSError, AttributeError):
        return False


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad2")
    task = write_task(root / "t.jsonl", 6)
    _store_with_runs(root / "good.sqlite", task)
    # -- stores: orphaned rows, damaged schemas --------------------------------------------------------
    _edited(root, "orphans.sqlite", "DELETE FROM runs WHERE id = 2")
    _edited(root, "no_attempts.sqlite", "DROP TABLE attempts")
    _edited(root, "no_outcomes.sqlite", "DROP TABLE outcomes")
    _edited(root, "no_fts.sqlite", "DROP TABLE attempts_fts")
    _edited(root, "no_trigger.sqlite", "DROP TRIGGER attempts_ai")
    _edited(root, "no_column.sqlite", "ALTER TABLE runs DROP COLUMN note")
    _edited(root, "negative_version.sqlite", "UPDATE meta SET value = '-1' WHERE key = 'schema_version'")
    _edited(root, "text_version.sqlite", "UPDATE meta SET value = '4x' WHERE key = 'schema_version'")
    _edited(root, "correct_yes.sqlite", "DELETE FROM outcome_runs",
            "UPDATE attempts SET correct = 'yes' WHERE id = (SELECT min(id) FROM attempts WHERE probe = 'sample')")
    con = sqlite3.connect(root / "meta_alone.sqlite")
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    con.execute("INSERT INTO meta VALUES ('app', 'reachtui'), ('schema_version', '5')")
    con.commit()
    con.close()
    os.mkfifo(root / "fifo")
    _null_device(root / "null")
    # -- inputs --------------------------------------------------------------------------------------
    qids = [f"q{i:03d}" for i in range(6)]
    gens = [{"question_id": q, "probe": "realized", "attempt": 0, "output": "#### 1"} for q in qids]
    _jsonl(root / "gens.jsonl", gens)
    (root / "adir").mkdir()
    # -- 3. models that do not match their weights -------------------------------------------------------
    if HAVE_DEMO:
        cfg = json.loads((DEMO_MODEL_DIR / "config.json").read_text())
        model_copy(root, "more_layers", config=dict(cfg, num_hidden_layers=cfg["num_hidden_layers"] + 2))
        _without_tensor(model_copy(root, "missing_tensor"), "model.layers.3.mlp.up_proj.weight")
        _with_more_tokens(model_copy(root, "big_tokenizer"), 5)
    # -- 4. golds no answer format can grade -----------------------------------------------------------------
    good_q = {"question": "What is 2 + 3?", "answer": "5"}
    for name, answer in (("nan", "NaN"), ("inf", "Infinity"), ("huge", "1e400"), ("banana", "banana")):
        _jsonl(root / f"gold_{name}.jsonl", [dict(good_q, id="a"), dict(good_q, id="b", answer=answer)])
    _jsonl(root / "gold_json_nan.jsonl", ['{"id": "a", "question": "q?", "answer": NaN}'])
    _jsonl(root / "gold_json_inf.jsonl", ['{"id": "a", "question": "q?", "answer": 1e400}'])
    _jsonl(root / "gold_choice.jsonl", [dict(good_q, id="a", answer="banana")])
    _jsonl(root / "gens_ab.jsonl", [{"question_id": q, "probe": "realized", "attempt": 0, "output": "#### 5"}
                                    for q in "ab"])
    _jsonl(root / "gens_a.jsonl", [{"question_id": "a", "probe": "realized", "attempt": 0, "output": "(A)"}])
    for name, qid in (("newline", "q\n1"), ("nul", "q\x001"), ("cr", "q1\r"), ("bidi", "q\u202e1"),
                      ("line_separator", "q\u20281")):
        _jsonl(root / f"id_{name}.jsonl", [dict(good_q, id=qid)])
    for name, lp in (("inf", "Infinity"), ("neg_inf", "-Infinity"), ("huge", "1e400"), ("big_int", "9" * 400)):
        _jsonl(root / f"gens_lp_{name}.jsonl",
               [f'{{"question_id": "{q}", "probe": "realized", "attempt": 0, "output": "#### 1", '
                f'"mean_logprob": {lp}}}' for q in qids])
    # -- 5. unbounded work ------------------------------------------------------------------------------------
    for field, value in (("max_block", 10**12), ("max_actions", 10**9), ("max_repeat", 10**6), ("max_frac", 1e9)):
        (root / f"proto_{field}.toml").write_text(f"[route_sampler]\n{field} = {value}\n")
    with gzip.open(root / "bomb.jsonl.gz", "wb", compresslevel=9) as fh:
        line = b" " * (1 << 20)
        for _ in range(12):                # 12 MiB of blanks: over the test's limit of 8 MiB
            fh.write(line)
    # -- 6. Python's own limits ---------------------------------------------------------------------------------
    _jsonl(root / "task_big_answer.jsonl", [f'{{"id": "a", "question": "q?", "answer": {BIG}}}'])
    _jsonl(root / "task_big_id.jsonl", [f'{{"id": {BIG}, "question": "q?", "answer": "1"}}'])
    _jsonl(root / "task_deep.jsonl", ['{"id": "a", "question": "q?", "answer": "1", "x": ' + "[" * DEEP + "]" * DEEP
                                      + "}"])
    _jsonl(root / "gens_big_attempt.jsonl", [f'{{"question_id": "q000", "probe": "realized", "attempt": {BIG}, '
                                             f'"output": "#### 1"}}'])
    (root / "proto_deep.toml").write_text("stop = " + "[" * DEEP + "]" * DEEP + "\n")
    (root / "proto_big_int.toml").write_text(f"seed = {BIG}\n")
    (root / "proto_big_seed.toml").write_text(f"seed = {2**64}\n")
    (root / "proto_tiny_t.toml").write_text("temperature = 1e-300\n")
    (root / "proto_tiny_probe_t.toml").write_text('[[probes]]\nname = "sample"\ntemperature = 1e-5\n')
    (root / "proto_float_overflow.toml").write_text(f"top_p = {10**400}\n")
    (root / "keys_deep.toml").write_text("a = " + "[" * DEEP + "]" * DEEP + "\n")
    (root / "keys_big.toml").write_text(f'"filter.failure" = {BIG}\n')
    (root / "keys_too_deep.toml").write_text('[filter.failure.x]\ny = "F"\n')
    if HAVE_DEMO:
        model_copy(root, "deep_config", config='{"a": ' + "[" * DEEP + "]" * DEEP + "}")
    for flt in ("[1, 2]", '{"a": 1}'):
        name = "list" if flt.startswith("[") else "object"
        _jsonl(root / f"lm_eval_filter_{name}.jsonl",
               [f'{{"doc_id": {i}, "resps": [["#### 1"]], "filtered_resps": ["1"], "filter": {flt}}}' for i in range(6)])
    (root / "device_map_deep.json").write_text("[" * DEEP + "]" * DEEP)
    # -- 11. the rest ---------------------------------------------------------------------------------------------
    (root / "keys_shift_clash.toml").write_text('"filter.all" = "F"\n"filter.failure" = "shift+f"\n')
    (root / "keys_alias_clash.toml").write_text('"filter.all" = "ctrl+i"\n"app.focus_next" = "tab"\n')
    (root / "keys_unknown_name.toml").write_text('"filter.all" = "shfit+f"\n')
    (root / "keys_control_char.toml").write_text('"filter.all" = "\\u0007"\n')
    try:
        yield Env(root)
    finally:
        import gc

        gc.collect()


def _fill(arg: str, env: Env) -> str:
    if arg.startswith("{") and arg.endswith("}"):
        return env[arg[1:-1]]
    return arg


S = "{good.sqlite}"

#: (id, argv, exit status, a piece of the error line, what it needs: "demo" | None)
CASES = [
    # -- 1. an output path that could destroy data -------------------------------------------------------
    ("export-output-is-the-store", ["export", "summary", "--store", S, "-o", S], 2, "is the audit store", None),
    ("export-output-is-the-wal", ["export", "summary", "--store", S, "-o", "{good.sqlite-wal}"], 2,
     "is the audit store", None),
    ("export-output-is-the-shm", ["export", "summary", "--store", S, "-o", "{good.sqlite-shm}"], 2,
     "is the audit store", None),
    ("export-output-is-the-journal", ["export", "summary", "--store", S, "-o", "{good.sqlite-journal}"], 2,
     "is the audit store", None),
    ("export-output-is-another-database", ["export", "summary", "--store", S, "-o", "{orphans.sqlite}"], 2,
     "is an SQLite database", None),
    ("compare-output-is-the-store", ["compare", "1", "1", "--store", S, "-o", S], 2, "is the audit store", None),
    ("export-output-fifo-without-reader", ["export", "summary", "--store", S, "-o", "{fifo}"], 2,
     "a pipe that nobody reads", None),
    ("export-output-under-a-file", ["export", "summary", "--store", S, "-o", "{t.jsonl/x.csv}"], 2,
     "not a folder", None),
    # -- 2. orphaned rows --------------------------------------------------------------------------------
    ("import-store-with-orphans", ["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--store", "{orphans.sqlite}"],
     3, "refer to a runs row that is not there", None),
    ("audit-store-with-orphans", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{orphans.sqlite}"], 3,
     "DELETE FROM attempts WHERE run_id NOT IN (SELECT id FROM runs)", None),
    # -- 7. damaged schemas --------------------------------------------------------------------------------
    ("runs-table-dropped", ["runs", "--store", "{no_attempts.sqlite}"], 3, "table attempts is missing", None),
    ("export-table-dropped", ["export", "summary", "--store", "{no_attempts.sqlite}"], 3, "table attempts is missing",
     None),
    ("audit-table-dropped", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{no_attempts.sqlite}"], 3,
     "table attempts is missing", None),
    ("import-table-dropped", ["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--store", "{no_attempts.sqlite}"],
     3, "table attempts is missing", None),
    ("export-outcomes-dropped", ["export", "summary", "--store", "{no_outcomes.sqlite}"], 3,
     "table outcomes is missing", None),
    ("audit-outcomes-dropped", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{no_outcomes.sqlite}"], 3,
     "table outcomes is missing", None),
    ("runs-fts-dropped", ["runs", "--store", "{no_fts.sqlite}"], 3, "table attempts_fts is missing", None),
    ("audit-fts-dropped", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{no_fts.sqlite}"], 3,
     "table attempts_fts is missing", None),
    ("audit-trigger-dropped", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{no_trigger.sqlite}"], 3,
     "trigger attempts_ai is missing", None),
    ("export-column-dropped", ["export", "summary", "--store", "{no_column.sqlite}"], 3,
     "table runs lacks column note", None),
    ("runs-meta-alone", ["runs", "--store", "{meta_alone.sqlite}"], 3, "is missing", None),
    ("audit-meta-alone", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{meta_alone.sqlite}"], 3,
     "is missing", None),
    ("runs-negative-version", ["runs", "--store", "{negative_version.sqlite}"], 3, "schema version is -1", None),
    ("audit-negative-version", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{negative_version.sqlite}"], 3,
     "schema version is -1", None),
    ("open-negative-version", ["open", "--store", "{negative_version.sqlite}"], 3, "schema version is -1", None),
    ("export-text-version", ["export", "summary", "--store", "{text_version.sqlite}"], 3, "is not a number", None),
    ("compare-table-dropped", ["compare", "1", "2", "--store", "{no_attempts.sqlite}"], 3, "is missing", None),
    # -- 11. the rest: a store that is not a regular file, a value the store should not hold -----------------
    ("runs-store-a-fifo", ["runs", "--store", "{fifo}"], 2, "is not a regular file", None),
    ("audit-store-a-fifo", ["audit", "demo", "--task", "{t.jsonl}", "--store", "{fifo}"], 2,
     "is not a regular file", None),
    ("import-store-a-null-device", ["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--store", "{null}"], 2,
     "is not a regular file", "null"),
    ("runs-store-a-null-device", ["runs", "--store", "{null}"], 2, "is not a regular file", "null"),
    # -- 3. a silently wrong model ------------------------------------------------------------------------
    ("audit-more-layers-than-weights", ["audit", "{more_layers}", "--task", "{t.jsonl}", "--store", S], 2,
     "--allow-missing-weights", "demo"),
    ("open-more-layers-than-weights", ["open", "{more_layers}", "--task", "{t.jsonl}", "--store", S], 2,
     "asks for 10 layers", "demo"),
    ("generate-more-layers-than-weights", ["generate", "{more_layers}", "hi"], 2, "--allow-missing-weights",
     "demo"),
    ("audit-missing-tensor", ["audit", "{missing_tensor}", "--task", "{t.jsonl}", "--store", S, "--device", "cpu"], 2,
     "model.layers.3.mlp.up_proj.weight", "demo"),
    ("generate-missing-tensor", ["generate", "{missing_tensor}", "hi", "--device", "cpu"], 2,
     "missing (randomly initialised)", "demo"),
    ("audit-tokenizer-beyond-vocabulary", ["audit", "{big_tokenizer}", "--task", "{t.jsonl}", "--store", S,
                                           "--device", "cpu"], 2, "5 token(s) of its tokenizer have an id past", "demo"),
    ("generate-tokenizer-beyond-vocabulary", ["generate", "{big_tokenizer}", "hi", "--device", "cpu"], 2,
     "embedding rows (ids 0-99", "demo"),
    # -- 4. a silently wrong gold --------------------------------------------------------------------------------
    *[(f"audit-gold-{name}", ["audit", "demo", "--task", f"{{gold_{name}.jsonl}}", "--store", S], 2,
       f"gold_{name}.jsonl:2: the gold answer", None) for name in ("nan", "inf", "huge", "banana")],
    ("import-gold-banana", ["import", "{gens_ab.jsonl}", "--task", "{gold_banana.jsonl}", "--store", S], 2,
     "is not a number", None),
    ("open-gold-banana", ["open", "demo", "--task", "{gold_banana.jsonl}", "--store", S], 2, "is not a number", None),
    ("audit-gold-json-nan", ["audit", "demo", "--task", "{gold_json_nan.jsonl}", "--store", S], 2,
     "'answer' is nan, not a finite number", None),
    ("audit-gold-json-1e400", ["audit", "demo", "--task", "{gold_json_inf.jsonl}", "--store", S], 2,
     "'answer' is inf, not a finite number", None),
    ("import-gold-choice-not-a-letter", ["import", "{gens_a.jsonl}", "--task", "{gold_choice.jsonl}", "--store", S,
                                         "--answer-format", "choice"], 2, "not one of the option letters", None),
    *[(f"audit-id-{name}", ["audit", "demo", "--task", f"{{id_{name}.jsonl}}", "--store", S], 2,
       "holds a control character", None) for name in ("newline", "nul", "cr", "bidi", "line_separator")],
    *[(f"import-logprob-{name}", ["import", f"{{gens_lp_{name}.jsonl}}", "--task", "{t.jsonl}", "--store", S], 2,
       "mean_logprob must be a finite number", None) for name in ("inf", "neg_inf", "huge", "big_int")],
    # -- 5. unbounded work ----------------------------------------------------------------------------------------
    *[(f"audit-route-sampler-{field}", ["audit", "demo", "--task", "{t.jsonl}", "--store", S, "--protocol",
                                        f"{{proto_{field}.toml}}"], 2, f"route_sampler.{field} must be at most", None)
      for field in ("max_block", "max_actions", "max_repeat", "max_frac")],
    ("generate-route-huge-range", ["generate", "demo", "hi", "--route", "0-19999999"], 2, "out of range", None),
    ("generate-route-billion", ["generate", "demo", "hi", "--route", "0-999999999999"], 2, "out of range", None),
    ("generate-silence-huge-range", ["generate", "demo", "hi", "--silence", "0-19999999999"], 2, "out of range",
     None),
    ("generate-route-too-long", ["generate", "demo", "hi", "--route", ",".join(["0-7"] * 3), "--device", "cpu"], 2,
     "length 24 is above 2 times", "demo"),
    ("import-gzip-bomb", ["import", "{bomb.jsonl.gz}", "--task", "{t.jsonl}", "--store", S], 2, "inflates to more than",
     None),
    # -- 6. Python's own limits -------------------------------------------------------------------------------------
    ("audit-task-answer-5000-digits", ["audit", "demo", "--task", "{task_big_answer.jsonl}", "--store", S], 2,
     "a number is too long", None),
    ("audit-task-id-5000-digits", ["audit", "demo", "--task", "{task_big_id.jsonl}", "--store", S], 2,
     "a number is too long", None),
    ("audit-task-deep-json", ["audit", "demo", "--task", "{task_deep.jsonl}", "--store", S], 2, "nested too deeply",
     None),
    ("import-attempt-5000-digits", ["import", "{gens_big_attempt.jsonl}", "--task", "{t.jsonl}", "--store", S], 2,
     "a number is too long", None),
    ("audit-protocol-deep-toml", ["audit", "demo", "--task", "{t.jsonl}", "--store", S, "--protocol",
                                  "{proto_deep.toml}"], 2, "nested too deeply", None),
    ("audit-protocol-int-5000-digits", ["audit", "demo", "--task", "{t.jsonl}", "--store", S, "--protocol",
                                        "{proto_big_int.toml}"], 2, "a number is too long", None),
    ("audit-protocol-seed-over-64-bits", ["audit", "demo", "--task", "{t.jsonl}", "--store", S, "--protocol",
                                          "{proto_big_seed.toml}"], 2, "seed must be at most", None),
    ("import-protocol-float-overflow", ["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--store", S, "--protocol",
                                        "{proto_float_overflow.toml}"], 2, "top_p must be finite", None),
    ("audit-temperature-1e-300", ["audit", "demo", "--task", "{t.jsonl}", "--store", S, "--temperature", "1e-300"], 2,
     "use 0 for greedy", None),
    ("open-temperature-tiny", ["open", "demo", "--task", "{t.jsonl}", "--store", S, "--temperature", "0.001"], 2,
     "use 0 for greedy", None),
    ("audit-protocol-default-temperature-tiny", ["audit", "demo", "--task", "{t.jsonl}", "--store", S, "--protocol",
                                                 "{proto_tiny_t.toml}"], 2, "use 0 for greedy", None),
    ("audit-protocol-probe-temperature-tiny", ["audit", "demo", "--task", "{t.jsonl}", "--store", S, "--protocol",
                                               "{proto_tiny_probe_t.toml}"], 2, "use 0 for greedy", None),
    ("generate-temperature-tiny", ["generate", "demo", "hi", "--temperature", "1e-300"], 2, "use 0 for greedy", None),
    ("generate-route-5000-digits", ["generate", "demo", "hi", "--route", BIG], 2, "out of range", None),
    ("generate-silence-5000-digits", ["generate", "demo", "hi", "--silence", "1," + BIG], 2, "out of range", None),
    ("open-keymap-deep", ["open", "--store", S, "--keymap", "{keys_deep.toml}"], 2, "nested too deeply", None),
    ("open-keymap-int-5000-digits", ["open", "--store", S, "--keymap", "{keys_big.toml}"], 2, "a number is too long",
     None),
    ("open-keymap-deeper-than-ids", ["open", "--store", S, "--keymap", "{keys_too_deep.toml}"], 2,
     "filter.failure must be a key name", None),
    ("audit-config-deep", ["audit", "{deep_config}", "--task", "{t.jsonl}", "--store", S], 2, "nested too deeply",
     "demo"),
    ("audit-device-map-deep", ["audit", "demo", "--task", "{t.jsonl}", "--store", S, "--device-map",
                               "{device_map_deep.json}"], 2, "nested too deeply", None),
    *[(f"import-lm-eval-filter-{name}", ["import", f"{{lm_eval_filter_{name}.jsonl}}", "--task", "{t.jsonl}",
                                         "--store", S], 2, "filter must be a filter's name", None)
      for name in ("list", "object")],
    ("open-keymap-shift-f-clashes-with-F", ["open", "--store", S, "--keymap", "{keys_shift_clash.toml}"], 2,
     "key 'F' would run both filter.all and filter.failure", None),
    ("open-keymap-alias-clash", ["open", "--store", S, "--keymap", "{keys_alias_clash.toml}"], 2,
     "key 'tab' would run both", None),
    ("open-keymap-unknown-key-name", ["open", "--store", S, "--keymap", "{keys_unknown_name.toml}"], 2,
     "'shfit+f' is not a key Textual knows", None),
    ("open-keymap-control-character", ["open", "--store", S, "--keymap", "{keys_control_char.toml}"], 2,
     "is not a key Textual knows", None),
    ("serve-keymap-clash", ["serve", "--store", S, "--keymap", "{keys_shift_clash.toml}"], 2, "would run both", None),
    ("serve-budget-0", ["serve", "demo", "--store", S, "--budget", "0"], 2, "budget must be at least 1", None),
    ("serve-probes-empty", ["serve", "demo", "--store", S, "--probes", ""], 2, "names no probe", None),
    ("serve-temperature-tiny", ["serve", "demo", "--store", S, "--temperature", "1e-9"], 2, "use 0 for greedy", None),
    ("serve-device-map-unknown", ["serve", "demo", "--store", S, "--device-map", "everywhere"], 2,
     "unknown device map", None),
    ("serve-gold-banana", ["serve", "demo", "--task", "{gold_banana.jsonl}", "--store", S], 2, "is not a number",
     None),
    ("serve-model-missing", ["serve", "{nope-model}", "--store", S], 2, "not found", None),
    ("serve-store-damaged", ["serve", "--store", "{no_attempts.sqlite}"], 3, "table attempts is missing", None),
    ("serve-compare-unmatched", ["serve", "--store", S, "--compare", "1", "2"], 2, "not a matched comparison", None),
    ("generate-route-arabic-digits", ["generate", "demo", "hi", "--route", "\u0660-\u0663"], 2, "ASCII digits", None),
    ("generate-silence-devanagari-digit", ["generate", "demo", "hi", "--silence", "\u0969"], 2, "ASCII digits", None),
    ("generate-route-fullwidth-digits", ["generate", "demo", "hi", "--route", "\uff10-\uff13"], 2, "ASCII digits",
     None),
    # numbers typed in other digits are no numbers (int('٣') is 3 in Python, not on this command line)
    ("audit-budget-arabic-digit", ["audit", "demo", "--task", "demo", "--budget", "\u0663", "--store", S], 2,
     "'\u0663' is not a number written in ASCII digits", None),
    ("audit-temperature-fullwidth", ["audit", "demo", "--task", "demo", "--temperature", "\uff10.5", "--store", S], 2,
     "is not a number written in ASCII digits", None),
    ("export-limit-devanagari", ["export", "summary", "--limit", "\u0969", "--store", S], 2,
     "is not a number written in ASCII digits", None),
    ("serve-port-arabic", ["serve", "--store", S, "--port", "\u0668\u0660\u0668\u0660"], 2,
     "is not a number written in ASCII digits", None),
    # click 8.5 took an explicit default of None beside required=True as given: audit ran with no task
    ("audit-without-task", ["audit", "demo", "--store", S], 2, "Missing option '--task'", None),
    ("export-correct-yes", ["export", "summary", "--run", "all", "--store", "{correct_yes.sqlite}"], 3, "has correct = 'yes'", None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_with_its_exit_status_and_nothing_written(case, env, capsys, monkeypatch):
    name, argv, code, needle, needs = case
    monkeypatch.setattr("reachtui.jsonl.MAX_INFLATED", 8 << 20)      # the gzip bomb: 12 MiB of blanks
    if needs == "demo" and not HAVE_DEMO:
        pytest.skip("no demo model in assets/")
    if needs == "null" and not (env.root / "null").exists():
        pytest.skip("cannot make a character device here (mknod)")
    argv = [_fill(a, env) for a in argv]
    before = folder_state(env.root)

    got, out, err = run_cli(argv, capsys)

    lines = [line for line in err.splitlines() if line.strip()]
    assert got == code, (got, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert lines == [lines[0]] and lines[0].startswith("error: ") and needle in lines[0], err
    assert folder_state(env.root) == before, "a file changed"     # no -journal beside a device either


# -- 1. output paths -----------------------------------------------------------------------------------------


def _runs_in(path: Path) -> list[int]:
    with Store(path, readonly=True) as store:
        return store.run_ids()


def test_an_output_that_is_the_store_keeps_every_run(env, tmp_path, capsys):
    """Before: `export -o` onto the store (or a hard link to it, or a symlink) replaced it with a CSV, exit 0,
    every run gone."""
    store = tmp_path / "s.sqlite"
    shutil.copy(env["good.sqlite"], store)
    os.link(store, tmp_path / "hard.csv")
    (tmp_path / "soft.csv").symlink_to(store)
    for output in (store, tmp_path / "hard.csv", tmp_path / "soft.csv", tmp_path / "." / "s.sqlite"):
        code, out, err = run_cli(["export", "questions", "--store", str(store), "-o", str(output)], capsys)
        assert code == 2 and "is the audit store" in err and len(err.strip().splitlines()) == 1, err
    assert _runs_in(store) == [1, 2]
    assert (tmp_path / "soft.csv").is_symlink() and os.stat(tmp_path / "hard.csv").st_nlink == 2


def test_the_default_store_is_protected_too(env, tmp_path, capsys, monkeypatch):
    store = tmp_path / "store" / "reachtui.sqlite"
    store.parent.mkdir()
    shutil.copy(env["good.sqlite"], store)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REACHTUI_STORE", raising=False)
    code, _, err = run_cli(["export", "summary", "-o", "store/reachtui.sqlite"], capsys)
    assert code == 2 and "is the audit store" in err
    assert _runs_in(store) == [1, 2]


def test_a_character_device_is_written_to_not_replaced(env, tmp_path, capsys):
    """Before: `-o /dev/null` replaced /dev/null with an ordinary file (for every process on the machine)."""
    null = tmp_path / "null"
    if not _null_device(null):
        pytest.skip("cannot make a character device here (mknod)")
    code, _, err = run_cli(["export", "summary", "--store", env["good.sqlite"], "-o", str(null)], capsys)
    assert code == 0, err
    assert stat.S_ISCHR(os.stat(null).st_mode) and os.stat(null).st_rdev == os.makedev(1, 3)


def test_a_fifo_with_a_reader_gets_the_table_and_stays_a_fifo(env, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = {}

    def reader():
        with open(fifo, "rb") as fh:
            got["data"] = fh.read()

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.2)
    code, _, err = run_cli(["export", "passk", "--store", env["good.sqlite"], "--csv", "-o", str(fifo)], capsys)
    t.join(10)
    assert code == 0, err
    assert got["data"].decode().startswith("run,probe,estimator,k,value")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_symlink_stays_a_symlink_and_its_target_gets_the_table(env, tmp_path, capsys):
    target = tmp_path / "real.csv"
    target.write_text("old\n")
    os.chmod(target, 0o644)
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "new.csv")
    for path in (link, dangling):
        code, _, err = run_cli(["export", "passk", "--store", env["good.sqlite"], "-o", str(path)], capsys)
        assert code == 0, err
        assert path.is_symlink()
    assert target.read_text().startswith("run,probe,estimator,k,value")
    assert (tmp_path / "new.csv").read_text() == target.read_text()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644           # the file keeps its permissions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.csv", "link.csv", "new.csv", "real.csv"]


@pytest.mark.skipif(not Path("/proc/self/fd/1").exists(), reason="needs /proc/self/fd")
def test_an_output_that_is_stdout_redirected_to_a_file_is_written_through_it(env, tmp_path):
    """`-o /dev/stdout` (here a link of our own to /proc/self/fd/1, as /dev/stdout is: before, the link itself
    was replaced by an ordinary file) with stdout redirected to a file: the table lands in that file, after
    what it held."""
    stdout = tmp_path / "stdout"
    stdout.symlink_to("/proc/self/fd/1")
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        fh.write("before\n")
        fh.flush()
        proc = subprocess.run([sys.executable, "-m", "reachtui", "export", "passk", "--store", env["good.sqlite"],
                               "--csv", "-o", str(stdout)], stdout=fh, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("before\nrun,probe,estimator,k,value,")
    assert stdout.is_symlink() and os.readlink(stdout) == "/proc/self/fd/1"


# -- 2. orphaned rows and run ids ------------------------------------------------------------------------------


def test_orphaned_attempts_are_never_adopted_by_a_new_run(env, tmp_path, capsys):
    """Before: run 2 deleted with foreign keys off left its attempts; the next import got id 2 and
    `INSERT OR IGNORE` kept the old model's outputs under it, exit 0."""
    store = tmp_path / "s.sqlite"
    shutil.copy(env["orphans.sqlite"], store)
    before = fingerprint(store)
    code, _, err = run_cli(["import", env["gens.jsonl"], "--task", env["t.jsonl"], "--store", str(store)], capsys)
    assert code == 3 and "foreign keys off" in err and "DELETE FROM" in err, err
    assert fingerprint(store) == before
    # the line's own statement repairs the store; then the import is a new run, with its own outputs
    statement = err.split('"')[1]
    con = sqlite3.connect(store)
    con.executescript(statement)
    con.close()
    code, out, err = run_cli(["import", env["gens.jsonl"], "--task", env["t.jsonl"], "--store", str(store)], capsys)
    assert code == 0, err
    with Store(store, readonly=True) as s:
        new = s.run_ids()[-1]
        texts = {r[0] for r in s.conn.execute("SELECT text FROM attempts WHERE run_id = ?", (new,))}
    assert new == 3 and texts == {"#### 1"}         # id 2 is never given again


def test_run_ids_are_never_given_twice(tmp_path):
    path = tmp_path / "s.sqlite"
    _store_with_runs(path, write_task(tmp_path / "t.jsonl", 3), seeds=(1, 2, 3))
    with Store(path) as store:
        store.conn.execute("DELETE FROM runs WHERE id = 3")     # foreign keys on: its rows go with it
        store.conn.commit()
    _store_with_runs(path, tmp_path / "t.jsonl", seeds=(4,))
    with Store(path, readonly=True) as store:
        assert store.run_ids() == [1, 2, 4]


# -- 3. models that do not match their weights ---------------------------------------------------------------


@pytest.mark.skipif(not HAVE_DEMO, reason="no demo model in assets/")
def test_allowed_missing_weights_are_audited_and_the_run_keeps_the_load_report(env, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    base = ["audit", "--task", env["t.jsonl"], "--store", str(store), "--probes", "realized", "--limit", "2",
            "--max-new-tokens", "4", "--device", "cpu"]
    code, _, err = run_cli(base[:1] + [env["missing_tensor"]] + base[1:] + ["--allow-missing-weights"], capsys)
    assert code == 0, err
    code, _, err = run_cli(base[:1] + ["demo"] + base[1:], capsys)
    assert code == 0, err
    with Store(store, readonly=True) as s:
        events = {run: [e["detail"] for e in s.run_events(run) if e["kind"] == "load"] for run in s.run_ids()}
    assert events == {1: ["loaded with --allow-missing-weights: 1 weight(s) missing (randomly initialised): "
                          "model.layers.3.mlp.up_proj.weight"],
                      2: ["every weight loaded from the checkpoint"]}


@pytest.mark.parametrize("arch", ["demo", "demo-tuned", "llama", "qwen2_moe", "gemma2", "gemma3", "gpt2",
                                  "gpt_neox", "phi3", "olmo2", "qwen3_moe", "mistral"])
def test_the_bundled_and_the_test_models_load_with_every_weight(arch, tmp_path):
    """Missing weights are an error now: every model reachtui ships or its tests build (12 architectures,
    tied and untied embeddings) loads with nothing missing or unexpected."""
    from reachtui.assets import BUNDLED_MODELS
    from reachtui.model.load import load_model

    if arch in BUNDLED_MODELS:
        if not (BUNDLED_MODELS[arch] / "config.json").is_file():
            pytest.skip(f"no {arch} model in assets/")
        spec = arch
    else:
        from engine_tiny import build_model, char_tokenizer

        build_model(arch).save_pretrained(tmp_path / arch)
        char_tokenizer().save_pretrained(tmp_path / arch)
        spec = str(tmp_path / arch)
    assert load_model(spec, device="cpu", dtype="float32").load_report == "every weight loaded from the checkpoint"


# -- 4. golds ---------------------------------------------------------------------------------------------------


def test_golds_that_grade_are_kept_and_only_those_that_cannot_are_refused(tmp_path):
    from reachtui.errors import ReachError
    from reachtui.tasks import check_gold

    rows = [{"id": str(i), "question": "q?", "answer": a} for i, a in enumerate(
        ["1,234", "-3", "3/4", "$5", "0.5", "+7", "18 dollars", 12, 14.0])]
    task = load_task(str(_jsonl(tmp_path / "ok.jsonl", rows)))
    check_gold(task, "number")
    bad = load_task(str(_jsonl(tmp_path / "bad.jsonl", rows + [{"id": "x", "question": "q?", "answer": "banana"}])))
    with pytest.raises(ReachError, match=r"bad\.jsonl:10: the gold answer 'banana' of question x is not a number"):
        check_gold(bad, "number")
    check_gold(bad, "exact")                   # any text is an exact answer
    check_gold(bad, "math")


# -- 5. unbounded work --------------------------------------------------------------------------------------------


def test_the_routes_probe_at_the_largest_sampler_settings_finishes(tmp_path):
    """Before: max_block = 10**12 kept the routes probe running past 90 s, the run left `running`."""
    from reachtui.protocol import ROUTE_LIMITS, RouteSamplerParams

    sampler = RouteSamplerParams(min_actions=1, **{k: v for k, (v, _why) in ROUTE_LIMITS.items()})
    protocol = Protocol(probes=(ProbeSpec("routes", budget=16), ProbeSpec("mcts", budget=8)), route_sampler=sampler)
    t0 = time.monotonic()
    with Store(tmp_path / "s.sqlite") as store:
        result = run_audit(store, FakeRunner(num_layers=8), model_name="fake", protocol=protocol,
                           task=load_task(str(write_task(tmp_path / "t.jsonl", 4))))
    assert result.status == "complete" and time.monotonic() - t0 < 30


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the peak memory from /proc")
def test_a_gzip_bomb_is_refused_without_inflating_it(tmp_path):
    """1 GiB of zeros in a 1 MiB gzip (one endless line): before, it was inflated whole, twice. Now it is
    streamed and refused at the limit (64 MiB here): the importing process stays far below the 1 GiB."""
    path = tmp_path / "bomb.jsonl.gz"
    block = b"0" * (64 << 20)
    with gzip.open(path, "wb", compresslevel=1) as fh:
        for _ in range(16):
            fh.write(block)
    task = write_task(tmp_path / "t.jsonl", 3)
    # the peak resident memory of the import: VmHWM (getrusage's maxrss would carry this process's over exec)
    code = ("import sys, reachtui.jsonl as j; j.MAX_INFLATED = 64 << 20\n"
            "from reachtui.cli import main\n"
            "try:\n    main(sys.argv[1:])\n"
            "finally:\n    print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0],"
            " file=sys.stderr)\n")
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code, "import", str(path), "--task", str(task), "--store",
                          str(tmp_path / "s.sqlite")], capture_output=True, text=True, timeout=120)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and lines[0].startswith("error: ") and "inflates to more than 64 MiB" in lines[0], lines
    assert int(lines[-1]) << 10 < 400 << 20, lines        # peak resident memory, kilobytes -> bytes
    assert not (tmp_path / "s.sqlite").exists() and time.monotonic() - t0 < 60


# -- 6. the app's route editor ------------------------------------------------------------------------------------


async def test_the_route_editor_answers_every_bad_route_with_a_line(tmp_path):
    """Before: a route of 5,000 digits killed the app with a traceback (ValueError from int())."""
    from tui_store import build_store
    from reachtui.tui.app import ReachApp

    path = tmp_path / "audit.sqlite"
    build_store(path, n=6, k=2)
    app = ReachApp(path)
    async with app.run_test(size=(150, 42)) as pilot:
        await pilot.press("e")
        route = app.screen.query_one("#route-input")
        for text, needle in ((BIG, "out of range"), ("0-99999999999", "out of range"), ("\u0660-\u0663", "ASCII"),
                             ("0-7," * 4 + "0", "length 33 is above"), ("0-3,3,5-7", "→ route 0-3,3,5-7")):
            route.value = text
            await pilot.pause()
            assert needle in str(app.screen.query_one("#route-error").render()), text
        app.screen.query_one("#silence-input").value = "1," + BIG
        await pilot.pause()
        assert "out of range" in str(app.screen.query_one("#route-error").render())
        app.screen.query_one("#silence-input").value = "5"
        await pilot.pause()
        await pilot.press("enter")
        assert app.intervention.layers == (0, 1, 2, 3, 3, 5, 6, 7) and app.intervention.silenced == {5}


# -- 6. exports of imported runs, a run's unreadable protocol ---------------------------------------------------------


def test_the_attempts_of_a_store_holding_only_imported_runs_export(env, tmp_path, capsys):
    """Before: "no such function: reachtui_seed", exit 1."""
    store = tmp_path / "s.sqlite"
    code, _, err = run_cli(["import", env["gens.jsonl"], "--task", env["t.jsonl"], "--store", str(store)], capsys)
    assert code == 0, err
    code, out, err = run_cli(["export", "attempts", "--store", str(store), "--csv"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("run,question_id,probe,attempt,route,silenced,temperature,seed,text") and len(lines) == 7
    assert lines[1].startswith("1,q000,realized,0,,,,,#### 1,1,hash,")


def test_a_run_whose_protocol_cannot_be_read_is_named_by_its_id(env, tmp_path, capsys):
    """Before: "run None: its stored protocol cannot be read"."""
    path = _edited(Path(env["good.sqlite"]).parent, "unreadable_protocol.sqlite",
                   "UPDATE runs SET protocol_json = '{\"seed\": ' WHERE id = 2")
    code, _, err = run_cli(["export", "attempts", "--store", str(path), "--run", "2"], capsys)
    assert code == 2 and err.startswith("error: run 2: its stored protocol cannot be read"), err
    code, out, err = run_cli(["runs", "--store", str(path), "--json"], capsys)
    assert code == 0 and [r["protocol"] for r in json.loads(out)][1] is None, err


# -- 10. grading that could hang -----------------------------------------------------------------------------------


def test_an_import_whose_math_output_cannot_be_compared_in_time_stores_no_answer(env, tmp_path, capsys, monkeypatch):
    from reachtui import grading

    monkeypatch.setattr(grading, "MATH_TIMEOUT_S", 1.0)
    grading._math_verify.cache_clear()
    task = _jsonl(tmp_path / "m.jsonl", [{"id": "a", "question": "q?", "answer": "5"},
                                         {"id": "b", "question": "q?", "answer": "x^2+1"}])
    gens = _jsonl(tmp_path / "g.jsonl", [
        {"question_id": "a", "probe": "realized", "attempt": 0, "output": "so \\boxed{9^{9^{9^{9}}}}"},
        {"question_id": "b", "probe": "realized", "attempt": 0, "output": "so \\boxed{1 + x^2}"}])
    t0 = time.monotonic()
    code, _, err = run_cli(["import", str(gens), "--task", str(task), "--store", str(tmp_path / "s.sqlite"),
                            "--answer-format", "math"], capsys)
    assert code == 0, err
    assert time.monotonic() - t0 < 30
    with Store(tmp_path / "s.sqlite", readonly=True) as s:
        rows = s.conn.execute("SELECT q.qid, a.answer, a.rule, a.correct FROM attempts a JOIN questions q "
                              "ON q.id = a.question_id ORDER BY q.qid").fetchall()
    assert rows == [("a", None, "timeout", 0), ("b", "1 + x^2", "boxed", 1)]


# -- 11. signals, two audits of one run ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_DEMO, reason="no demo model in assets/")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_an_audit_as_ctrl_c_does(env, tmp_path, sig):
    """Before: the audit ended with no line and left the run `running`. Now: one line, the run `cancelled`,
    and the same command finishes it."""
    import signal

    store = tmp_path / "s.sqlite"
    cmd = [sys.executable, "-m", "reachtui", "audit", "demo", "--task", "demo", "--store", str(store), "--probes",
           "realized,sample", "--budget", "2", "--limit", "60", "--batch-size", "4", "--device", "cpu",
           "--threads", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:             # wait for its first attempts
        time.sleep(0.3)
        if store.is_file():
            try:
                with Store(store, readonly=True) as s:
                    if s.conn.execute("SELECT count(*) FROM attempts").fetchone()[0]:
                        break
            except Exception:  # noqa: BLE001 - the store is being created
                pass
    proc.send_signal(getattr(signal, sig))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and f"{sig}: stopping after the batch in flight" in err
    assert err.strip().splitlines()[-1] == "run 1 was cancelled; run the same command again to continue it"
    with Store(store, readonly=True) as s:
        assert s.get_run(1)["status"] == "cancelled"
        stored = s.conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
    assert 0 < stored < 180
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"({180 - stored} attempts generated now)" in done.stdout
    with Store(store, readonly=True) as s:
        assert s.get_run(1)["status"] == "complete" and s.run_ids() == [1]


def test_an_audit_of_a_run_another_process_works_on_is_refused(tmp_path):
    """Before: two identical audits started together both worked on one run, each generating the other's
    attempts again and reporting them as new. Now the run is claimed: the second is one line, exit 3, and
    once the first has gone the same command resumes the run."""
    from reachtui.engine.audit import open_run
    from reachtui.errors import EnvironmentFault

    task = load_task(str(write_task(tmp_path / "t.jsonl", 4)))
    protocol = Protocol(probes=(ProbeSpec("sample", budget=2),))
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        rid, _ = open_run(store, model_name="fake", model_path=None, model_class=None, num_layers=8, task=task,
                          protocol=protocol)
        store.release_run(rid)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from reachtui.store import Store\n"
        f"s = Store({str(path)!r}); s.claim_run({rid}); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with Store(path) as store:
            with pytest.raises(EnvironmentFault, match=f"run {rid} of .* is being audited by another process"):
                run_audit(store, FakeRunner(), model_name="fake", task=task, protocol=protocol)
            assert store.conn.execute("SELECT count(*) FROM attempts").fetchone()[0] == 0
            assert store.run_ids() == [rid]
    finally:
        holder.kill()
        holder.wait()
    with Store(path) as store:
        result = run_audit(store, FakeRunner(), model_name="fake", task=task, protocol=protocol)
    assert result.run_id == rid and result.resumed and result.generated == 4 * 3


# -- 8. exports that could be turned against their reader ----------------------------------------------------------

NASTY = {"q000": "=HYPERLINK(\"http://x\",\"click\")", "q001": "-2+3+cmd|' /C calc'!A0", "q002": "-3",
         "q003": "@SUM(A1:A9)", "q004": "\ta\r\n\r\nb \\input{/etc/passwd} | c\x00d",
         "q005": "\x1b]0;owned\x07\x1b[31m[/bold] [link=file:///etc]x[/link]"}


@pytest.fixture(scope="module")
def nasty(env):
    """A store whose run has outputs written to act on their reader, under a model named like a formula."""
    path = env.root / "nasty" / "s.sqlite"
    path.parent.mkdir()
    gens = _jsonl(env.root / "nasty" / "g.jsonl",
                  [{"question_id": q, "probe": "realized", "attempt": 0, "output": text} for q, text in NASTY.items()])
    from reachtui.engine.importing import import_file

    import_file(gens, env["t.jsonl"], model="=1+2", store_path=path)
    return path


def _export(nasty, capsys, *args):
    code, out, err = run_cli(["export", *args, "--store", str(nasty)], capsys)
    assert code == 0, err
    return out


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_spreadsheet_formulas_are_neutralised_unless_kept(nasty, capsys, fmt):
    import csv
    import io

    read = lambda text: list(csv.reader(io.StringIO(text), delimiter="," if fmt == "csv" else "\t"))  # noqa: E731
    rows = read(_export(nasty, capsys, "attempts", "--format", fmt, "--columns", "question_id,text"))
    texts = dict(rows[1:])
    assert texts["q000"] == "'" + NASTY["q000"] and texts["q001"] == "'" + NASTY["q001"]
    assert texts["q003"] == "'" + NASTY["q003"] and texts["q004"] == "'" + NASTY["q004"]
    assert texts["q002"] == "-3"                        # a plain number is a number, not a formula
    assert read(_export(nasty, capsys, "summary", "--format", fmt, "--columns", "model"))[1] == ["'=1+2"]
    raw = dict(read(_export(nasty, capsys, "attempts", "--format", fmt, "--columns", "question_id,text",
                            "--keep-formulas"))[1:])
    assert raw == NASTY


def test_latex_cells_options_and_comments_cannot_break_out(nasty, capsys):
    out = _export(nasty, capsys, "attempts", "--format", "latex", "--columns", "question_id,text",
                  "--caption", "a\n\n\\input{/etc/passwd}", "--label", "tab:attempts")
    assert "\r" not in out and "\x00" not in out and "\x1b" not in out
    assert "\n\n" not in out                                     # no paragraph break inside the table
    assert "\\input{" not in out and "\\textbackslash{}input\\{/etc/passwd\\}" in out
    assert all(line.startswith(("%", "\\")) or line.endswith("\\\\") for line in out.splitlines()), out
    assert "\\label{tab:attempts}" in out


@pytest.mark.parametrize("label", ["x}\\input{/etc/passwd", "a b", "x\ny"])
def test_a_latex_label_that_is_not_a_key_is_refused(nasty, capsys, label):
    code, out, err = run_cli(["export", "summary", "--format", "latex", "--label", label, "--store", str(nasty)],
                             capsys)
    assert code == 2 and err.startswith("error: --label") and len(err.strip().splitlines()) == 1 and out == ""


def test_markdown_rows_stay_one_line_each(nasty, capsys):
    out = _export(nasty, capsys, "attempts", "--format", "md", "--columns", "question_id,text")
    lines = out.splitlines()
    assert "\r" not in out and "\x00" not in out and len(lines) == 2 + len(NASTY)
    assert all(line.startswith("|") and line.endswith("|") for line in lines)
    assert lines[2 + 4].count(" | ") == 1                # the | in the output is escaped


def test_the_terminal_gets_no_escape_sequence_and_no_markup(nasty, capsys):
    out = _export(nasty, capsys, "attempts", "--format", "table", "--columns", "question_id,text")
    assert "\x1b" not in out and "\x07" not in out and "␛]0;owned␇" in out and "[/bold]" in out
    code, out, err = run_cli(["runs", "--store", str(nasty)], capsys)
    assert code == 0 and "=1+2" in out, err


def test_an_id_with_a_newline_in_an_older_store_is_listed_as_one_line(env, tmp_path, capsys):
    path = _edited(Path(env["good.sqlite"]).parent, "newline_id.sqlite", "UPDATE questions SET qid = 'q\nX' WHERE qid = 'q001'")
    code, out, err = run_cli(["compare", "1", "2", "--store", str(path), "--allow-unmatched", "--list",
                              "realized:never"], capsys)
    assert code == 0, err
    assert out.splitlines() == ["q␊X", "q002", "q003", "q004"]     # one line, its newline shown as ␊


@pytest.mark.parametrize("argv, needle", [
    (["import", "{gens.jsonl}", "--task", "{t.jsonl}", "--model", "a\nb"], "--model 'a\\nb' holds a control"),
    (["audit", "demo", "--task", "{t.jsonl}", "--task-name", "t\x1b[31m"], "--task-name"),
])
def test_names_with_control_characters_are_refused(env, capsys, argv, needle):
    before = folder_state(env.root)
    code, _, err = run_cli([_fill(a, env) for a in argv] + ["--store", env["good.sqlite"]], capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert folder_state(env.root) == before
