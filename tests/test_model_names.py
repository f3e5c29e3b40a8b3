"""An adapter run's model is named readably and stably, `BASE+FOLDER#DIGEST` (`reachtui.model_names`): two
folders of one name are two models, the same folder always the same one; a store written under the old rule
(`BASE+/the/whole/path`) is renamed by a writer, so the old adapter's run is found and resumed by its new
name, while a reader reads the old store as it is."""

from __future__ import annotations

import hashlib
import sqlite3

from fake_runner import FakeRunner, write_task
from reachtui.engine.audit import completed_audit, run_audit
from reachtui.model_names import adapter_name, renamed_adapter, stored_model
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.tasks import load_task


def test_a_stored_run_loads_its_model_from_its_path_while_that_exists(tmp_path):
    """`trace`, `export lens` and the app load a stored run's model by one rule: the stored path if it is still
    there (a local folder), else the stored name (`demo`, a hub id in the cache)."""
    folder = tmp_path / "my-model"
    assert stored_model("my-model", str(folder)) == "my-model"            # moved or deleted: the name
    folder.mkdir()
    assert stored_model("my-model", str(folder)) == str(folder)
    assert stored_model("demo", None) == "demo"


def test_the_name_is_the_base_the_folder_and_six_digits_of_the_path():
    digest = hashlib.sha256(b"/runs/a/checkpoint-500").hexdigest()[:6]
    assert adapter_name("demo", "/runs/a/checkpoint-500") == f"demo+checkpoint-500#{digest}"
    assert adapter_name("demo", "/runs/b/checkpoint-500") != adapter_name("demo", "/runs/a/checkpoint-500")
    assert adapter_name("Qwen/Qwen2.5-0.5B@main", "/x/lora") .startswith("Qwen/Qwen2.5-0.5B@main+lora#")
    assert renamed_adapter("demo+/runs/a/checkpoint-500", "/runs/a/checkpoint-500") == f"demo+checkpoint-500#{digest}"
    assert renamed_adapter("/models/base", "/models/base") is None          # a plain directory model
    assert renamed_adapter("demo+/runs/a/lora", "/elsewhere/lora") is None   # its path is not the name's


def test_a_store_from_before_is_renamed_by_a_writer_and_its_run_is_found_again(tmp_path):
    folder = "/adapters/demo-lora"
    task = load_task(str(write_task(tmp_path / "t.jsonl", 4)))
    protocol = Protocol(probes=(ProbeSpec("sample", budget=2),))
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        run_audit(store, FakeRunner(), model_name=f"demo+{folder}", model_path=folder, task=task, protocol=protocol)
        run_audit(store, FakeRunner(), model_name="demo", model_path="/bundled/demo", task=task, protocol=protocol)
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")     # as version 7 left it
    con.commit()
    con.close()
    with Store(path, readonly=True) as old:         # a reader: the store as it is
        assert [r["model"] for r in old.list_runs()] == [f"demo+{folder}", "demo"]
    new = adapter_name("demo", folder)
    with Store(path) as store:                      # a writer migrates
        assert [r["model"] for r in store.list_runs()] == [new, "demo"]
        assert completed_audit(store, model_name=new, task=task, protocol=protocol) == (1, True)
        assert store.resolve_run(new) == 1


def test_runs_at_80_columns_keeps_every_name_legible(tmp_path, monkeypatch):
    """`reachtui runs` at 80 columns: batch and updated are left to --json, the protocol hash is cut to 8, and
    model and task names fold in wide pieces (never 5-character slices); every line fits."""
    from conftest import run_main

    task = load_task(str(write_task(tmp_path / "gsm8k-train-subset.jsonl", 4)))
    protocol = Protocol(probes=(ProbeSpec("sample", budget=2),))
    path = tmp_path / "s.sqlite"
    names = ("demo", adapter_name("demo", "/home/me/experiments/lora-r16-alpha32"),
             "/home/me/models/Meta-Llama-3.1-8B-Instruct-AWQ")
    with Store(path) as store:
        for name in names:
            run_audit(store, FakeRunner(), model_name=name, task=task, protocol=protocol)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _err = run_main(["runs", "--store", str(path)])
    digest = hashlib.sha256(b"/home/me/experiments/lora-r16-alpha32").hexdigest()[:6]
    h = protocol.hash()[:8]
    lines = [line.rstrip() for line in out.splitlines()]
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80
    top = next(i for i, line in enumerate(lines) if line.startswith("run model"))   # under the store's path, folded
    assert lines[top:top + 8] == [
        "run model                      task         protocol status   Qs attempts real %",
        "─" * 80,
        f"  1 demo                       gsm8k-train- {h} complete  4       12   25.0",
        "                               subset",
        f"  2 demo+lora-r16-alpha32#{digest[:4]} gsm8k-train- {h} complete  4       12   25.0",
        f"    {digest[4:]}                         subset",
        f"  3 /home/me/models/Meta-Llama gsm8k-train- {h} complete  4       12   25.0",
        "    -3.1-8B-Instruct-AWQ       subset"]
