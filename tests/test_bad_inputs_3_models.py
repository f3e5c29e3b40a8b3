"""Bad inputs, round 3 (issue 33), the model side and what reads a store back: PEFT adapters that peft would
apply silently wrong or fail on without naming why, options a command accepted and ignored, a model's own files
failing late (a tokenizer's ids past the embedding, a padding id past it, a config that does not describe the
weights), exports that did not read back as written, the Python API raising what it does not document, readers
leaving -wal/-shm files behind, and library warnings printed as Python prints them.

Every refused command answers with one line (`error: ...`) and its exit status (2 bad input, 3 the environment),
no traceback, and leaves every file of the test folder as it was (`folder_state`). The adapters and tokenizers
are made here from the demo model (peft's own `get_peft_model`, random LoRA weights: `init_lora_weights=False`,
so that a LoRA that is not applied is seen); nothing is downloaded.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from cli_helpers import HAVE_DEMO, folder_state, model_copy, run_cli
from fake_runner import FakeRunner, write_task
from reachtui.engine.audit import run_audit
from reachtui.errors import ReachError
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tables.formats import neutral_cell
from reachtui.tasks import load_task


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


HAVE_PEFT = HAVE_DEMO and _have("peft")


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _checkpointed(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def _store_with_runs(path: Path, task: Path, probes=("sample",), seeds=(1, 2)) -> None:
    with Store(path) as store:
        t = load_task(str(task))
        for seed in seeds:
            run_audit(store, FakeRunner(), model_name="fake", task=t,
                      protocol=Protocol(probes=tuple(ProbeSpec(p, budget=2) for p in probes), seed=seed))
    _checkpointed(path)


# -- the broken adapters, tokenizers and configs -------------------------------------------------------------


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _make_adapters(root: Path) -> None:
    """A LoRA of the demo model (q and v projections, rank 4, random weights) and broken copies of it."""
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    from reachtui.assets import DEMO_MODEL_DIR

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(DEMO_MODEL_DIR)
    lora = root / "lora"
    with warnings.catch_warnings():     # peft asks transformers for a deprecated property
        warnings.simplefilter("ignore", FutureWarning)
        get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)) \
            .save_pretrained(lora)
    _edit_json(lora / "adapter_config.json", lambda c: c.update(base_model_name_or_path="demo"))
    weights = load_file(lora / "adapter_model.safetensors")

    def copy(name, config=None, tensors=None) -> Path:
        out = root / f"ad_{name}"
        shutil.copytree(lora, out)
        if config is not None:
            _edit_json(out / "adapter_config.json", config)
        if tensors is not None:
            save_file(tensors, out / "adapter_model.safetensors")
        return out

    copy("empty", tensors={})
    copy("extra", tensors={**weights, "FOO": torch.zeros(2)})
    copy("half", tensors=dict(sorted(weights.items())[: len(weights) // 2]))
    copy("foo_only", tensors={"FOO": torch.zeros(2)})
    copy("type_foo", config=lambda c: c.update(peft_type="FOO"))
    copy("type_none", config=lambda c: c.pop("peft_type"))
    copy("prompt", config=lambda c: (c.clear(), c.update(peft_type="PROMPT_TUNING", task_type="CAUSAL_LM",
                                                          num_virtual_tokens=4, base_model_name_or_path="demo")))
    copy("rank", config=lambda c: c.update(r=8))
    copy("target", config=lambda c: c.update(target_modules=["nonexistent"]))
    copy("embed", config=lambda c: c.update(modules_to_save=["embed_tokens"]))
    copy("resized", config=lambda c: c.update(modules_to_save=["embed_tokens"]),
         tensors={**weights, "base_model.model.model.embed_tokens.weight": torch.zeros(105, 128)})
    copy("narrow", tensors={k: (v[:, :64].contiguous() if "lora_A" in k else v) for k, v in weights.items()})
    copy("nan", tensors={k: torch.full_like(v, float("nan")) for k, v in weights.items()})
    (copy("garbage") / "adapter_model.safetensors").write_bytes(b"not a safetensors file")
    data = (lora / "adapter_model.safetensors").read_bytes()
    (copy("cut") / "adapter_model.safetensors").write_bytes(data[: len(data) // 2])
    pickled = copy("pickled_empty")
    (pickled / "adapter_model.safetensors").unlink()
    torch.save({}, pickled / "adapter_model.bin")


def _make_models(root: Path) -> None:
    """Copies of the demo model whose tokenizer or config does not belong to its weights."""
    sparse = model_copy(root, "tok_sparse")       # one token's id moved to 5000: 100 tokens, ids up to 5000
    _edit_json(sparse / "tokenizer.json", lambda d: d["model"]["vocab"].update(M=5000))
    added = model_copy(root, "tok_added")         # an added token (tokenizers gives it the next id, 100)
    _edit_json(added / "tokenizer.json", lambda d: d["added_tokens"].append(
        {"id": 300, "content": "<extra>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}))
    nopad = model_copy(root, "pad_past")          # no pad or eos in the tokenizer; the config's eos is 500
    _edit_json(nopad / "tokenizer_config.json", lambda d: (d.pop("pad_token"), d.pop("eos_token")))
    _edit_json(nopad / "config.json", lambda d: d.update(eos_token_id=500))
    _edit_json(nopad / "generation_config.json", lambda d: d.update(eos_token_id=500, pad_token_id=None))
    _edit_json(model_copy(root, "cfg_vocab") / "config.json", lambda d: d.update(vocab_size=50))
    _edit_json(model_copy(root, "cfg_mlp") / "config.json", lambda d: d.update(intermediate_size=400))
    _edit_json(model_copy(root, "cfg_heads") / "config.json", lambda d: d.update(num_attention_heads=3))
    _edit_json(model_copy(root, "cfg_rope") / "config.json", lambda d: d.update(rope_parameters={"rope_type": "x9"}))
    (model_copy(root, "tok_gone") / "tokenizer.json").unlink()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad3m")
    task = write_task(root / "t.jsonl", 6)
    _store_with_runs(root / "good.sqlite", task)
    _store_with_runs(root / "routes.sqlite", task, probes=("routes",), seeds=(1,))
    with Store(root / "two.sqlite") as store:      # run 1 has sample, run 2 routes: no probe in common
        t = load_task(str(task))
        for probes in (("sample",), ("routes",)):
            run_audit(store, FakeRunner(), model_name="fake", task=t,
                      protocol=Protocol(probes=tuple(ProbeSpec(p, budget=2) for p in probes)))
    _checkpointed(root / "two.sqlite")
    if HAVE_DEMO:
        _make_models(root)
    if HAVE_PEFT:
        _make_adapters(root)
    return root


S = "{good.sqlite}"


def _fill(arg: str, root: Path) -> str:
    return str(root / arg[1:-1]) if arg.startswith("{") and arg.endswith("}") else arg


def _audit(model: str, store: str = S) -> list[str]:
    return ["audit", model, "--task", "{t.jsonl}", "--store", store, "--probes", "realized", "--device", "cpu",
            "--threads", "1"]


def _generate(model: str) -> list[str]:
    return ["generate", model, "What is 2 + 3?", "--device", "cpu"]


#: (id, argv, exit status, a piece of the error line, what it needs: None | "demo" | "peft")
CASES = [
    # -- 2. an adapter peft would apply as a no-op, or with weights missing or dropped ---------------------
    ("audit-adapter-no-tensors", _audit("{ad_empty}"), 2, "adapter_model.safetensors holds no tensors", "peft"),
    ("generate-adapter-no-tensors", _generate("{ad_empty}"), 2, "holds no tensors", "peft"),
    ("open-adapter-no-tensors", ["open", "{ad_empty}", "--store", S], 2, "holds no tensors", "peft"),
    ("serve-adapter-no-tensors", ["serve", "{ad_empty}", "--store", S], 2, "holds no tensors", "peft"),
    ("audit-adapter-half-missing", _audit("{ad_half}"), 2,
     "16 weight(s) its adapter_config.json describes are not in adapter_model.safetensors", "peft"),
    ("generate-adapter-unexpected-tensor", _generate("{ad_extra}"), 2,
     "1 tensor(s) in adapter_model.safetensors have no place in the adapter its adapter_config.json describes (FOO)",
     "peft"),
    ("generate-adapter-only-a-stranger", _generate("{ad_foo_only}"), 2, "32 weight(s) its adapter_config.json", "peft"),
    ("generate-adapter-pickle-without-tensors", _generate("{ad_pickled_empty}") + ["--allow-pickle"], 2,
     "are not in adapter_model.bin", "peft"),
    ("generate-adapter-nan-weights", _generate("{ad_nan}"), 2, "holds NaN or infinite values", "peft"),
    # -- 5. adapter failures that named no cause --------------------------------------------------------------
    ("generate-adapter-unknown-type", _generate("{ad_type_foo}"), 2, "unknown peft_type 'FOO' (peft", "peft"),
    ("audit-adapter-no-type", _audit("{ad_type_none}"), 2, "adapter_config.json names no peft_type", "peft"),
    ("generate-adapter-prompt-tuning", _generate("{ad_prompt}"), 2,
     "is PROMPT_TUNING, a prompt-learning adapter", "peft"),
    ("generate-adapter-other-rank", _generate("{ad_rank}"), 2,
     "is [4, 128] in adapter_model.safetensors but [8, 128] for this base", "peft"),
    ("audit-adapter-other-architecture", _audit("{ad_narrow}"), 2,
     "is [4, 64] in adapter_model.safetensors but [4, 128] for this base", "peft"),
    ("generate-adapter-target-not-in-base", _generate("{ad_target}"), 2, "Target modules {'nonexistent'} not found",
     "peft"),
    ("audit-adapter-not-safetensors", _audit("{ad_garbage}"), 2, "cannot be read: not a safetensors file", "peft"),
    ("audit-adapter-cut-short", _audit("{ad_cut}"), 2, "cannot be read: cut short", "peft"),
    # -- 6. the model's own files, checked when it loads (before any run exists) ---------------------------
    ("audit-tokenizer-id-past-embedding", _audit("{tok_sparse}"), 2, "'M' is id 5000", "demo"),
    ("generate-tokenizer-id-past-embedding", _generate("{tok_sparse}"), 2, "'M' is id 5000", "demo"),
    ("audit-added-token-past-embedding", _audit("{tok_added}"), 2, "'<extra>' is id 100", "demo"),
    ("audit-padding-id-past-embedding", _audit("{pad_past}"), 2, "its padding id 500", "demo"),
    ("generate-padding-id-past-embedding", _generate("{pad_past}"), 2, "its padding id 500", "demo"),
    ("audit-config-vocab-not-the-weights", _audit("{cfg_vocab}"), 2,
     "model.embed_tokens.weight ([100, 128] in the checkpoint, [50, 128] by the config)", "demo"),
    ("generate-config-mlp-not-the-weights", _generate("{cfg_mlp}"), 2,
     "24 weight(s) of another shape", "demo"),
    # the lines after a first line ending in ':', and a KeyError's key, were left out
    ("generate-config-heads-do-not-divide", _generate("{cfg_heads}"), 2,
     "validate_architecture': ValueError: The hidden size (128) is not a multiple of the number of attention heads "
     "(3).", "demo"),
    ("audit-config-unknown-rope-type", _audit("{cfg_rope}"), 2, "'x9' is missing or unknown (KeyError)", "demo"),
    ("generate-tokenizer-file-missing", _generate("{tok_gone}"), 2,
     "from one of: (1) a `tokenizers` library serialization file,", "demo"),
    # -- 4. options accepted and ignored -------------------------------------------------------------------------
    ("export-inspect-where", ["export", "inspect", "-o", "{x.eval}", "--where", "1", "--store", S], 2,
     "--where does not apply to export inspect", None),
    ("export-inspect-table-options", ["export", "inspect", "-o", "{x.eval}", "--columns", "probe", "--limit", "1",
                                      "--order", "probe", "--keep-formulas", "--store", S], 2,
     "--columns, --order, --limit, --keep-formulas do not apply to export inspect", None),
    ("export-inspect-format-csv", ["export", "inspect", "-o", "{x.eval}", "--format", "csv", "--store", S], 2,
     "--format does not apply to export inspect", None),
    ("export-inspect-bootstrap", ["export", "inspect", "-o", "{x.eval}", "--bootstrap", "5", "--store", S], 2,
     "--bootstrap does not apply to export inspect", None),
    ("export-column-twice", ["export", "questions", "--columns", "question_id,question_id", "--json", "--store", S],
     2, "column 'question_id' is asked for twice", None),
    ("export-column-twice-flags", ["export", "summary", "-c", "probe", "-c", "probe", "--csv", "--store", S], 2,
     "column 'probe' is asked for twice", None),
    ("export-caption-on-json", ["export", "summary", "--json", "--caption", "T", "--store", S], 2,
     "--caption does not apply to json output (only to latex)", None),
    ("export-label-on-md", ["export", "summary", "--format", "md", "--label", "tab:x", "--store", S], 2,
     "--label does not apply to md output", None),
    ("export-ci-on-csv", ["export", "summary", "--csv", "--ci", "inline", "--store", S], 2,
     "--ci does not apply to csv output", None),
    ("export-no-headers-on-json", ["export", "summary", "--json", "--no-headers", "--store", S], 2,
     "--no-headers does not apply to json output", None),
    ("export-keep-formulas-on-latex", ["export", "summary", "--format", "latex", "--keep-formulas", "--store", S], 2,
     "--keep-formulas does not apply to latex output", None),
    ("export-allow-unmatched-one-run", ["export", "summary", "--csv", "--allow-unmatched", "--store", S], 2,
     "--allow-unmatched does not apply to the summary table", None),
    ("export-bootstrap-without-intervals", ["export", "attempts", "--csv", "--bootstrap", "10", "--store", S], 2,
     "--bootstrap does not apply to the attempts table", None),
    ("export-param-without-where", ["export", "questions", "--csv", "-p", "x", "1", "--store", S], 2,
     "--param does not apply without --where or --order", None),
    ("export-where-timeout-without-where", ["export", "questions", "--csv", "--where-timeout", "3", "--store", S], 2,
     "--where-timeout does not apply without --where or --order", None),
    ("compare-keep-formulas-table", ["compare", "1", "2", "--keep-formulas", "--store", S], 2,
     "--keep-formulas does not apply to table output", None),
    ("compare-list-bootstrap", ["compare", "1", "2", "--list", "realized:gained", "--bootstrap", "10", "--store", S],
     2, "--bootstrap does not apply to --list", None),
    ("plot-dpi-on-pdf", ["plot", "passk", "1", "-o", "{p.pdf}", "--dpi", "100", "--store", S], 2,
     "--dpi does not apply to a pdf figure", None),
    ("plot-bootstrap-on-passk", ["plot", "passk", "1", "-o", "{p.png}", "--bootstrap", "10", "--store", S], 2,
     "--bootstrap does not apply to plot passk", None),
    ("plot-probe-on-mlp-scan", ["plot", "mlp-scan", "1", "-o", "{p.png}", "--probe", "sample", "--store", S], 2,
     "--probe does not apply to plot mlp-scan", None),
    ("open-browse-audit-options", ["open", "--store", S, "--probes", "routes", "--budget", "3"], 2,
     "--probes, --budget do not apply without MODEL", None),
    ("open-browse-task", ["open", "--store", S, "--task", "demo"], 2, "--task does not apply without MODEL", None),
    ("serve-browse-audit-options", ["serve", "--store", S, "--batch-size", "4"], 2,
     "--batch-size does not apply without MODEL", None),
    ("open-allow-unmatched-without-compare", ["open", "--store", S, "--allow-unmatched"], 2,
     "--allow-unmatched does not apply without --compare", None),
    ("open-compare-with-run", ["open", "--store", S, "--compare", "1", "2", "--run", "1"], 2,
     "--run does not apply with --compare", None),
    ("protocol-run-with-presets", ["protocol", "1", "--presets", "--store", S], 2,
     "RUN, --store do not apply to --presets or --preset", None),
    ("protocol-presets-and-preset", ["protocol", "--presets", "--preset", "gsm8k-cot"], 2,
     "--presets lists the presets, --preset NAME prints one", None),
    ("generate-raw-with-template", ["generate", "demo", "hi", "--raw", "--template", "Q: {question}"], 2,
     "--template does not apply with --raw", None),
    ("generate-raw-with-chat-and-system", ["generate", "demo", "hi", "--raw", "--chat", "--system", "x"], 2,
     "--chat, --system do not apply with --raw", None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_with_its_exit_status_and_nothing_written(case, env, capsys):
    name, argv, code, needle, needs = case
    if needs == "demo" and not HAVE_DEMO:
        pytest.skip("no demo model in assets/")
    if needs == "peft" and not HAVE_PEFT:
        pytest.skip("peft is not installed")
    argv = [_fill(a, env) for a in argv]
    before = folder_state(env, every_file=True)

    got, out, err = run_cli(argv, capsys)

    lines = [line for line in err.splitlines() if line.strip()]
    assert got == code, (got, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert lines == [lines[0]] and lines[0].startswith("error: ") and needle in lines[0], err
    assert folder_state(env, every_file=True) == before, "a file changed"


# -- 2. an adapter with missing or unexpected weights, allowed ------------------------------------------------


@pytest.mark.skipif(not HAVE_PEFT, reason="peft is not installed")
def test_allow_missing_weights_applies_a_partial_adapter_and_the_run_says_so(env, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    argv = [_fill(a, env) for a in _audit(str(env / "ad_half"), str(store))]
    code, out, err = run_cli(argv + ["--allow-missing-weights", "--limit", "2"], capsys)
    assert code == 0, err
    with Store(store, readonly=True) as db:
        (report,) = [e["detail"] for e in db.run_events(1) if e["kind"] == "load"]
    assert f"LORA adapter {(env / 'ad_half').resolve()} merged into its base demo" in report
    assert "with --allow-missing-weights (16 weight(s) its adapter_config.json describes are not in " \
           "adapter_model.safetensors" in report


def _reachtui(*argv: str) -> subprocess.CompletedProcess:
    """The command as a user runs it: a process of its own (in this one pytest records warnings itself, and
    Python prints a warning once per place and process)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "REACHTUI_DEBUG")}
    return subprocess.run([sys.executable, "-m", "reachtui", *argv], capture_output=True, text=True, timeout=300,
                          env=env)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_PEFT, reason="peft is not installed")
def test_a_whole_adapter_changes_the_model_and_prints_no_library_warning(env):
    """The LoRA's weights are random, so applied they change the greedy text; peft's wrapping asks
    transformers for a deprecated property, whose FutureWarning (with a source path) every command printed."""
    lora = _reachtui(*_generate(str(env / "lora")))
    assert lora.returncode == 0 and lora.stderr.splitlines()[0].startswith("route 0-7;"), lora.stderr
    assert len(lora.stderr.splitlines()) == 1
    base = _reachtui(*_generate("demo"))
    assert base.returncode == 0 and lora.stdout.splitlines()[0] != base.stdout.splitlines()[0]


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_PEFT, reason="peft is not installed")
@pytest.mark.parametrize("adapter,error", [
    # modules_to_save names the embedding, the file lacks it: was "error: ...: 'base_model.model.model.embed_tokens.weight'"
    ("ad_embed", "lacks the weight model.embed_tokens.weight, which its adapter_config.json asks for"),
    # the adapter saved a resized embedding: was "Error(s) in loading state_dict for PeftModel:"
    ("ad_resized", "is [105, 128] in adapter_model.safetensors but [100, 128] for this base"),
])
def test_a_library_warning_is_one_line_of_our_own(adapter, error, env):
    """peft warns (UserWarning) that a tied embedding is in the adapter: one `warning:` line, without the
    source path and code line Python adds, then the error line naming the cause."""
    before = folder_state(env, every_file=True)
    proc = _reachtui(*_generate(str(env / adapter)))
    code, lines = proc.returncode, proc.stderr.splitlines()
    assert code == 2 and len(lines) == 2, proc.stderr
    assert lines[0].startswith("warning: Model has `tie_word_embeddings=True`") and ".py" not in lines[0]
    assert lines[1].startswith(f"error: adapter {env / adapter}") and error in lines[1]
    assert folder_state(env, every_file=True) == before


# -- 6. a model that cannot load leaves no store behind ------------------------------------------------------


@pytest.mark.parametrize("model", ["no-such-model", "{tok_sparse}", "{ad_empty}"])
def test_an_audit_whose_model_cannot_load_creates_no_store(model, env, tmp_path, capsys):
    """Before: the store (and its folder) was made before the model was looked at; an IndexError run was left
    in it as failed."""
    if model != "no-such-model" and not (env / model[1:-1]).exists():
        pytest.skip("needs the demo model (and peft)")
    store = tmp_path / "new" / "s.sqlite"
    code, out, err = run_cli(["audit", _fill(model, env), "--task", str(env / "t.jsonl"), "--store", str(store),
                              "--device", "cpu"], capsys)
    assert code == 2 and err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not HAVE_DEMO, reason="no demo model in assets/")
def test_a_tokenizer_with_a_sparse_id_fails_at_load_not_mid_run(env, tmp_path, capsys):
    """The tokenizer counts 100 tokens (what the earlier check compared) but gives 'M' the id 5000: a prompt
    holding an M was an IndexError after the run was created (a failed run in the store)."""
    store = tmp_path / "s.sqlite"
    shutil.copy(env / "good.sqlite", store)
    _jsonl(tmp_path / "m.jsonl", [{"id": "a", "question": "What is M + 1?", "answer": "2"}])
    before = folder_state(tmp_path, every_file=True)
    code, out, err = run_cli(["audit", str(env / "tok_sparse"), "--task", str(tmp_path / "m.jsonl"), "--store",
                              str(store), "--device", "cpu"], capsys)
    assert code == 2 and "1 token(s) of its tokenizer have an id past the model's embedding rows (ids 0-99; 'M' " \
                          "is id 5000)" in err
    assert folder_state(tmp_path, every_file=True) == before


# -- 5. the lm-eval note without --task ---------------------------------------------------------------------


def test_the_lm_eval_note_without_task_asks_about_the_field(tmp_path, capsys):
    rows = [{"doc_id": i, "doc": {"question": f"What is {i} + 1?", "answer": str(i + 1)}, "filter": "none",
             "target": str(i + 2), "resps": [["#### 1"]], "filtered_resps": ["1"]} for i in range(3)]
    samples = _jsonl(tmp_path / "samples.jsonl", rows)
    store = tmp_path / "s.sqlite"
    code, out, err = run_cli(["import", str(samples), "--format", "lm-eval", "--store", str(store)], capsys)
    assert code == 0, err
    (note,) = [line for line in err.splitlines() if "lm-eval targets differ" in line]
    assert note == ("note: 3 of 3 lm-eval targets differ from task samples's gold (first: line 1, question 0: target "
                    "'2', gold '1'); the gold was read from the rows' docs: is that the answer field? "
                    "(--answer-field names another)")
    task = _jsonl(tmp_path / "t.jsonl", [{"id": i, "question": f"What is {i} + 1?", "answer": str(i + 1)}
                                         for i in range(3)])
    code, out, err = run_cli(["import", str(samples), "--format", "lm-eval", "--task", str(task), "--store",
                              str(store)], capsys)
    assert code == 0 and "is --task the right file?" in err and "--answer-field" not in err


# -- 10. a figure of runs with no probe in common ------------------------------------------------------------


@pytest.mark.slow
def test_plot_compare_without_a_common_probe_prints_no_warning(env, tmp_path):
    """Before: matplotlib's UserWarning that it found no curve to put in a legend, with its source path."""
    pytest.importorskip("matplotlib")
    out_file = tmp_path / "c.png"
    proc = _reachtui("plot", "compare", "1", "2", "--store", str(env / "two.sqlite"), "-o", str(out_file))
    assert proc.returncode == 0 and proc.stderr == "" and out_file.stat().st_size > 0, proc.stderr


# -- 7. every export reads back as the rows written --------------------------------------------------------------

#: Texts a model, a task or a person may write: each must come back from every data format as it went in.
ODD_TEXTS = ["a\rb #### 1", "c\nd #### 1", "cr-lf\r\nx", "\r", "tab\there", 'q"uo,te;', "nul\x00x", "ünï ☃ 𝔘 \u202e",
             "=1+1", "-3", "@x", "\tlead", "9" * 30, "", " spaced "]


@pytest.fixture(scope="module")
def odd_store(tmp_path_factory):
    """Two imported runs whose texts, question ids, golds, questions and metadata hold ODD_TEXTS, and (as an
    older version could store them) infinite mean log-probs and the largest SQLite integer as a compute."""
    root = tmp_path_factory.mktemp("odd")
    _jsonl(root / "t.jsonl", [{"id": f"q{i}", "question": f"What\r is {i}?{ODD_TEXTS[i % len(ODD_TEXTS)]}",
                               "answer": "1", "note": ODD_TEXTS[(i + 3) % len(ODD_TEXTS)]} for i in range(8)])
    for run in (1, 2):
        rows = []
        for i in range(8):
            rows.append({"question_id": f"q{i}", "probe": "realized", "attempt": 0,
                         "output": ODD_TEXTS[(i + run) % len(ODD_TEXTS)]})
            for a in range(3):
                rows.append({"question_id": f"q{i}", "probe": "sample", "attempt": a,
                             "output": ODD_TEXTS[(3 * i + a + run) % len(ODD_TEXTS)]})
        _jsonl(root / f"g{run}.jsonl", rows)
        code = _import(root / f"g{run}.jsonl", root / "t.jsonl", root / "s.sqlite", f"m ☃ {run}")
        assert code == 0
    con = sqlite3.connect(root / "s.sqlite")
    con.execute("UPDATE attempts SET mean_logprob = 9e999 WHERE id = 1")
    con.execute("UPDATE attempts SET mean_logprob = -9e999 WHERE id = 2")
    con.execute("UPDATE attempts SET mean_logprob = -0.25 WHERE id = 3")
    con.execute("UPDATE attempts SET compute = 9223372036854775807, new_tokens = -1 WHERE id = 4")
    con.commit()
    con.close()
    _checkpointed(root / "s.sqlite")
    return root / "s.sqlite"


def _import(gens: Path, task: Path, store: Path, model: str) -> int:
    from reachtui.cli import main

    try:
        main(["import", str(gens), "--task", str(task), "--store", str(store), "--model", model])
    except SystemExit as exc:
        return exc.code
    return 0


def _typed(cell: str, kind: str):
    """A csv/tsv cell read back as the column's kind (csv has no types: the table's kinds say them)."""
    if cell == "":
        return None
    if kind == "int":
        return int(cell)
    if kind in ("frac", "float", "pvalue"):
        return float(cell)
    if kind == "bool":
        return {"1": True, "0": False}[cell]
    return cell


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b and type(a) is type(b) if isinstance(a, bool) or isinstance(b, bool) else a == b


TABLES = [("attempts", ["all"]), ("questions", ["1", "2"]), ("summary", ["all"]), ("passk", ["1"]),
          ("hits", ["2"]), ("compare", ["1", "2"]), ("compare-questions", ["1", "2"])]


@pytest.mark.parametrize("fmt", ["csv", "tsv", "json", "ndjson", "parquet"])
@pytest.mark.parametrize("table,runs", TABLES, ids=[t for t, _ in TABLES])
def test_every_export_reads_back_as_the_rows_written(odd_store, table, runs, fmt, tmp_path, capsys):
    """The rows the API gives (what `export --json` writes) against the file each format wrote, read back by
    the format's own reader. csv/tsv with --keep-formulas cell for cell; without it every cell that starts like a
    formula comes back with its leading ' and no row is split. JSON has no infinity: an infinite float is null,
    and a note says so."""
    from reachtui import api

    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    with api.open_store(odd_store) as audit:
        want = audit.table(table, *runs, bootstrap=20)
    kinds = want.columns
    out = tmp_path / f"t.{fmt}"
    args = ["export", table, *[a for r in runs for a in ("--run", r)], "--store", str(odd_store), "--format", fmt]
    args += ["--bootstrap", "20"] if table in ("summary", "compare") else []
    args += ["-o", str(out)]
    before = folder_state(odd_store.parent, every_file=True)
    code, _, err = run_cli(args + (["--keep-formulas"] if fmt in ("csv", "tsv") else []), capsys)
    assert code == 0, err
    if fmt in ("csv", "tsv"):
        with open(out, newline="", encoding="utf-8") as fh:
            read = list(csv.reader(fh, delimiter="," if fmt == "csv" else "\t"))
        assert read[0] == list(kinds)
        got = [{n: _typed(c, kinds[n]) for n, c in zip(read[0], r)} for r in read[1:]]
        # csv has no null: a missing value and an empty text are both an empty cell (as every csv reader reads it)
        wanted = [{n: (None if (isinstance(v, float) and math.isnan(v)) or v == "" else v) for n, v in r.items()}
                  for r in want]
        code, text, err = run_cli(args[:-2], capsys)          # the default: formulas neutralised, to stdout
        plain = list(csv.reader(io.StringIO(text, newline=""), delimiter="," if fmt == "csv" else "\t"))
        texts = [kinds[n] == "text" for n in read[0]]           # a number is never neutralised
        assert len(plain) == len(read)
        assert [[neutral_cell(c) if t else c for c, t in zip(r, texts)] for r in read[1:]] == plain[1:]
    elif fmt in ("json", "ndjson"):
        text = out.read_text(encoding="utf-8")
        got = json.loads(text) if fmt == "json" else [json.loads(line) for line in text.splitlines()]
        wanted = [{n: (None if isinstance(v, float) and math.isinf(v) else v) for n, v in r.items()} for r in want]
        infinite = sum(1 for r in want for v in r.values() if isinstance(v, float) and math.isinf(v))
        assert ("JSON has no infinity" in err) == bool(infinite), err
    else:
        import pyarrow.parquet as pq

        got = pq.read_table(out).to_pylist()
        wanted = list(want)
    assert len(got) == len(wanted) and len(wanted) > 0
    for g, w in zip(got, wanted):
        assert list(g) == list(w)
        assert all(_same(g[k], w[k]) for k in w), [(k, g[k], w[k]) for k in w if not _same(g[k], w[k])]
    assert folder_state(odd_store.parent, every_file=True) == before


def test_the_odd_store_holds_what_the_round_trip_is_about(odd_store):
    """The fixture itself: the texts with a lone CR and a NUL, the infinities and the largest integer are there
    (a round trip of plain values would prove nothing)."""
    con = sqlite3.connect(f"file:{odd_store}?mode=ro&immutable=1", uri=True)
    texts = {t for (t,) in con.execute("SELECT text FROM attempts")}
    lps = {lp for (lp,) in con.execute("SELECT mean_logprob FROM attempts WHERE mean_logprob IS NOT NULL")}
    big = con.execute("SELECT max(compute) FROM attempts").fetchone()[0]
    con.close()
    assert {"a\rb #### 1", "\r", "nul\x00x"} <= texts and {math.inf, -math.inf} <= lps and big == 2**63 - 1


# -- 8. the Python API --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call,line", [
    (lambda a: a.attempts(1, limit=-1), "limit must be 0 or more, not -1"),
    (lambda a: a.attempts(1, limit="3"), "limit must be an integer, not '3'"),
    (lambda a: a.attempts(1, limit=2.0), "limit must be an integer, not 2.0"),
    (lambda a: a.attempts(1, limit=True), "limit must be an integer, not True"),
    (lambda a: a.summary(1, bootstrap=-5), "bootstrap must be 0 or more, not -5"),
    (lambda a: a.summary(1, bootstrap=10**6), "bootstrap must be 0 or more and at most 100000, not 1000000"),
    (lambda a: a.summary(1, seed="x"), "seed must be an integer, not 'x'"),
    (lambda a: a.attempts(1, columns=["probe", "probe"]), "column 'probe' is asked for twice"),
    (lambda a: a.attempts(1, columns=[1]), "columns is a list of column names or one string 'a,b', not [1]"),
    (lambda a: a.attempts(1, where=1), "where is SQL text, not int"),
    (lambda a: a.attempts(1, order=["probe"]), "order is SQL text, not list"),
    (lambda a: a.attempts(1, where="x = :x", params=5), "params is a dict of :name values"),
    (lambda a: a.attempts(1, where="nope = 1"), "bad --where for table attempts"),
    (lambda a: a.compare(1, 2, allow_unmatched="yes"), "allow_unmatched is True or False, not 'yes'"),
    (lambda a: a.attempts(1.5), "a run is an id, 'latest', 'all' or a model name, not 1.5"),
    (lambda a: a.attempts(True), "a run is an id, 'latest', 'all' or a model name, not True"),
    (lambda a: a.attempts("all", 1), "'all' cannot be combined with other runs"),
    (lambda a: a.attempts(99), "no run 99 in the audit store"),
    (lambda a: a.table(3), "a table is named by a string"),
    (lambda a: a.table("nope"), "unknown table 'nope'"),
], ids=lambda v: None if callable(v) else v[:40])
def test_the_api_raises_reach_error_for_every_bad_argument(env, call, line):
    from reachtui import api

    before = folder_state(env, every_file=True)
    with api.open_store(env / "good.sqlite") as audit:
        with pytest.raises(ReachError) as caught:
            call(audit)
    assert line in str(caught.value) and len(str(caught.value).splitlines()) == 1
    assert folder_state(env, every_file=True) == before


def test_the_api_takes_what_the_cli_takes(env):
    from reachtui import api

    with api.open_store(os.fsencode(env / "good.sqlite")) as audit:       # a bytes path, as os functions take
        assert audit.attempts(1, columns="question_id", limit=2) == [{"question_id": "q000"}] * 2
        assert audit.attempts(1, columns="question_id, probe", limit=1) == [{"question_id": "q000",
                                                                             "probe": "realized"}]
        assert len(audit.attempts("all")) == len(audit.attempts(1)) + len(audit.attempts(2))
        assert {r["run"] for r in audit.summary("ALL")} == {1, 2}
        assert audit.attempts(1, limit=0) == []
    with api.open_store(Path(env / "good.sqlite")) as audit:
        assert audit.run_id("latest") == 2


def test_a_closed_store_and_a_path_that_is_none_are_reach_errors(env):
    from reachtui import api

    audit = api.open_store(env / "good.sqlite")
    audit.close()
    audit.close()                                   # twice: nothing happens
    for call in (audit.runs, lambda: audit.summary(1), lambda: audit.run_id(1)):
        with pytest.raises(ReachError, match="is closed: open it again with open_store"):
            call()
    for path, line in ((5, "open_store takes a path (str, bytes or os.PathLike), not int"),
                       (env / "nope.sqlite", "no audit store at"), (env, "is a directory, not an audit store")):
        with pytest.raises(ReachError, match=line.replace("(", r"\(").replace(")", r"\)")):
            api.open_store(path)


def test_to_pandas_keeps_an_integer_past_int64(env, tmp_path):
    """An older version stored a metadata integer of 10**30: a nullable Int64 column cannot hold it
    (OverflowError); the frame keeps the exact value instead."""
    pd = pytest.importorskip("pandas")
    from reachtui import api

    store = tmp_path / "s.sqlite"
    shutil.copy(env / "good.sqlite", store)
    con = sqlite3.connect(store)
    con.execute("UPDATE questions SET meta = '{\"big\": 1000000000000000000000000000000, \"small\": 3}'")
    con.commit()
    con.close()
    with api.open_store(store) as audit:
        rows = audit.questions(1)
        frame = rows.to_pandas()
    # (typed int here; where metadata past int64 is stored as text, the frame holds the same digits)
    assert [int(v) for v in frame["meta_big"]] == [10**30] * 6
    assert str(frame["meta_small"].dtype) == "Int64" and len(frame) == 6 and isinstance(frame, pd.DataFrame)


# -- 8. reading a store leaves no -wal or -shm beside it -------------------------------------------------------

READERS = [
    ["export", "summary", "--csv"], ["export", "attempts", "--run", "all", "--json"], ["runs"], ["runs", "--json"],
    ["compare", "1", "2", "--allow-unmatched"], ["protocol", "1"], ["plot", "passk", "1", "-o", "{out}/p.png"],
    ["export", "inspect", "1", "-o", "{out}/x.eval"], ["export", "summary", "--format", "parquet", "-o", "{out}/s.pq"],
]


@pytest.mark.parametrize("argv", READERS, ids=[" ".join(a[:2]) for a in READERS])
def test_a_reader_leaves_the_folder_as_it_found_it(argv, env, tmp_path, capsys):
    if argv[0] == "plot":
        pytest.importorskip("matplotlib")
    if "inspect" in argv:
        pytest.importorskip("inspect_ai")
    if "parquet" in argv:
        pytest.importorskip("pyarrow")
    folder = tmp_path / "store"
    folder.mkdir()
    shutil.copy(env / "good.sqlite", folder / "s.sqlite")       # a WAL store, no -wal or -shm beside it
    before = folder_state(folder, every_file=True)
    argv = [a.replace("{out}", str(tmp_path)) for a in argv]
    code, out, err = run_cli([*argv, "--store", str(folder / "s.sqlite")], capsys)
    assert code == 0, err
    assert folder_state(folder, every_file=True) == before, sorted(os.listdir(folder))


def test_the_api_leaves_the_folder_as_it_found_it_and_sees_a_writer(env, tmp_path):
    """The API reads as any SQLite connection (not a frozen snapshot): a run a writer adds while it is open is
    there at the next call; once both have closed, no -wal or -shm is left."""
    from reachtui import api

    shutil.copy(env / "good.sqlite", tmp_path / "s.sqlite")
    before = folder_state(tmp_path, every_file=True)
    with api.open_store(tmp_path / "s.sqlite") as audit:
        assert len(audit.runs()) == 2
    assert folder_state(tmp_path, every_file=True) == before
    audit = api.open_store(tmp_path / "s.sqlite")
    try:
        assert [r["id"] for r in audit.runs()] == [1, 2]
        with Store(tmp_path / "s.sqlite") as writer:
            run_audit(writer, FakeRunner(), model_name="fake", task=load_task(str(env / "t.jsonl")),
                      protocol=Protocol(probes=(ProbeSpec("sample", budget=2),), seed=3))
        assert [r["id"] for r in audit.runs()] == [1, 2, 3]
    finally:
        audit.close()
    assert not (tmp_path / "s.sqlite-wal").exists() and not (tmp_path / "s.sqlite-shm").exists()
    with Store(tmp_path / "s.sqlite", readonly=True, check=True) as store:
        assert store.run_ids() == [1, 2, 3]


def test_a_reader_beside_a_writer_creates_nothing_and_changes_nothing(env, tmp_path, capsys):
    """While a writer is connected (its -wal is there) a reader opens read-only as before; the writer's files
    and the store are the writer's alone."""
    shutil.copy(env / "good.sqlite", tmp_path / "s.sqlite")
    writer = sqlite3.connect(tmp_path / "s.sqlite")
    try:
        writer.execute("SELECT count(*) FROM runs").fetchone()
        before = folder_state(tmp_path, every_file=True)
        assert (tmp_path / "s.sqlite-wal").exists()
        code, out, err = run_cli(["export", "summary", "--csv", "--store", str(tmp_path / "s.sqlite")], capsys)
        assert code == 0, err
        assert folder_state(tmp_path, every_file=True) == before
    finally:
        writer.close()


def test_open_store_leaves_the_folder_as_it_found_it_and_follows_a_writer(env, tmp_path):
    """`open --store`: its checks before the app (`prepare`, the app not started) and the app's reader
    (`AuditData`), which must see a run the app's own writer adds while it is open."""
    from reachtui.commands.open import open_, prepare
    from reachtui.tui.data import AuditData

    store = tmp_path / "s.sqlite"
    shutil.copy(env / "good.sqlite", store)
    before = folder_state(tmp_path, every_file=True)
    with open_.make_context("reachtui open", ["--store", str(store)]) as ctx:
        launch = prepare(**ctx.params)
    assert callable(launch) and folder_state(tmp_path, every_file=True) == before
    data = AuditData(store)
    try:
        assert data.latest_run_id() == 2
        with Store(store) as writer:
            run_audit(writer, FakeRunner(), model_name="fake", task=load_task(str(env / "t.jsonl")),
                      protocol=Protocol(probes=(ProbeSpec("sample", budget=2),), seed=9))
        assert data.latest_run_id() == 3
    finally:
        data.close()
    assert sorted(os.listdir(tmp_path)) == ["s.sqlite", "s.sqlite.lock"]     # the writer's run lock, no -wal/-shm
