"""A PEFT/LoRA adapter directory as MODEL: a LoRA of the demo model trained here for a few steps with the real
peft library opens (the app) and audits (the CLI); what the audit stores is the merged model's own greedy
`generate`, token for token, through the identity route; the run is named base + adapter, so two adapters of
one base are two models; an adapter whose base is missing is one line."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3

import pytest
from conftest import run_main, settle

pytest.importorskip("peft")
torch = pytest.importorskip("torch")

from reachtui.assets import DEMO_MODEL_DIR  # noqa: E402
from reachtui.model_names import adapter_name  # noqa: E402

QUESTIONS = 6


def digest(folder) -> str:
    """The six hex digits an adapter's name carries: of its folder's absolute path."""
    return hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:6]


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    """A LoRA (q, v, down projections) of the demo model: 4 AdamW steps, its base recorded as `demo`."""
    from reachtui.model.training.lora import train_lora

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("lora") / "demo-lora"
    info = train_lora(out, steps=4, batch_size=8, lr=1e-2)
    torch.set_num_threads(threads)
    assert info["steps"] == 4 and (out / "adapter_model.safetensors").is_file()
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == "demo"
    return out


def merged_reference(adapter_dir):
    """The base loaded by transformers, the adapter applied and merged by peft, by hand (not reachtui's path)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(DEMO_MODEL_DIR, dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload().eval()
    return merged, AutoTokenizer.from_pretrained(DEMO_MODEL_DIR)


def greedy(model, tok, prompts, new):
    """The model's own generate, greedy, one prompt at a time: the new token ids, cut after EOS."""
    rows = []
    for p in prompts:
        ids = tok(p, return_tensors="pt").input_ids
        out = model.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=tok.pad_token_id or 0,
                             eos_token_id=tok.eos_token_id)[0, ids.shape[1]:].tolist()
        rows.append(out[: out.index(tok.eos_token_id) + 1] if tok.eos_token_id in out else out)
    return rows


def test_identity_route_equals_the_merged_models_generate(adapter):
    from reachtui.generation import Decoding
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol
    from reachtui.tasks import load_task

    prompts = [Protocol().render_prompt(q.question) for q in load_task("demo").questions[:QUESTIONS]]
    loaded = load_model(str(adapter), device="cpu")
    assert loaded.name == adapter_name("demo", adapter.resolve()) and loaded.path == adapter.resolve()
    assert loaded.load_report.startswith(f"LORA adapter {adapter.resolve()} merged into its base demo")
    assert not any("lora" in name for name, _ in loaded.model.named_parameters())     # merged: a plain model
    ours = Runner(loaded).generate(prompts, decoding=Decoding(max_new_tokens=24))
    merged, tok = merged_reference(adapter)
    assert [g.token_ids for g in ours] == greedy(merged, tok, prompts, 24)
    # MLP 3 silenced: the merged model with that block's output zeroed by hand
    from reachtui.intervention import Intervention

    runner = Runner(loaded)
    silenced = runner.generate(prompts, runner.resolve(Intervention.parse(None, "3", loaded.arch.num_layers)),
                               decoding=Decoding(max_new_tokens=24))
    hook = merged.model.layers[3].mlp.register_forward_hook(lambda module, args, out: torch.zeros_like(out))
    try:
        assert [g.token_ids for g in silenced] == greedy(merged, tok, prompts, 24) != [g.token_ids for g in ours]
    finally:
        hook.remove()
    # the adapter changed the model: the base's greedy tokens are not these
    base = load_model("demo", device="cpu")
    assert [g.token_ids for g in Runner(base).generate(prompts, decoding=Decoding(max_new_tokens=24))] != \
        [g.token_ids for g in ours]


def test_the_adapter_audits_through_the_cli_as_base_plus_adapter(adapter, tmp_path):
    store = tmp_path / "s.sqlite"
    common = ["--task", "demo", "--probes", "realized,routes", "--budget", "2", "--limit", str(QUESTIONS),
              "--store", str(store), "--device", "cpu", "--threads", "1"]
    code, out, err = run_main(["audit", str(adapter), *common])
    assert code == 0, err
    other = tmp_path / "other-lora"                 # the same adapter in another folder: another model
    shutil.copytree(adapter, other)
    assert run_main(["audit", str(other), *common])[0] == 0
    con = sqlite3.connect(store)
    names = [n for (n,) in con.execute("SELECT m.name FROM runs r JOIN models m ON m.id = r.model_id ORDER BY r.id")]
    assert names == [f"demo+demo-lora#{digest(adapter)}", f"demo+other-lora#{digest(other)}"]
    texts = [t for (t,) in con.execute("SELECT a.text FROM attempts a JOIN questions q ON q.id = a.question_id "
                                       "WHERE a.run_id = 1 AND a.probe = 'realized' ORDER BY q.id")]
    con.close()
    from reachtui.store import Store

    with Store(store, readonly=True) as db:         # the run keeps what was loaded: the adapter and its base
        (report,) = [e["detail"] for e in db.run_events(1) if e["kind"] == "load"]
    assert report.startswith(f"LORA adapter {adapter.resolve()} merged into its base demo")
    # the stored default output is the merged model's own generate, cut at the protocol's stop string
    from reachtui.protocol import Protocol
    from reachtui.tasks import load_task

    merged, tok = merged_reference(adapter)
    prompts = [Protocol().render_prompt(q.question) for q in load_task("demo").questions[:QUESTIONS]]
    ref = [tok.decode(ids, skip_special_tokens=True).split("\n")[0] for ids in greedy(merged, tok, prompts, 48)]
    assert texts == ref
    # the same command again finds the complete run by its name: nothing generated
    code, out, _ = run_main(["audit", str(adapter), *common])
    assert code == 0 and "run 1: already complete" in out


def test_generate_runs_the_merged_model(adapter):
    code, out, err = run_main(["generate", str(adapter), "What is 3 plus 4?", "--json", "--device", "cpu"])
    assert code == 0, err
    shown = json.loads(out)
    merged, tok = merged_reference(adapter)
    ids = greedy(merged, tok, ["Question: What is 3 plus 4?\nAnswer:"], 48)[0]
    assert shown["model"].startswith("demo+") and shown["text"] == tok.decode(ids, skip_special_tokens=True).split(
        "\n")[0]


async def test_the_adapter_opens_in_the_app(adapter, tmp_path, monkeypatch):
    """`reachtui open ADAPTER ...` as the command parses it: the app loads the adapter and its audit fills the
    table."""
    import reachtui.commands.open as open_cmd
    from reachtui.tui.app import ReachApp

    started = {}
    monkeypatch.setattr(open_cmd, "_run_app", lambda path, run_id, launch, **kw: started.update(
        path=path, run_id=run_id, launch=launch))
    path = tmp_path / "live.sqlite"
    code, _, err = run_main(["open", str(adapter), "--limit", "4", "--probes", "realized", "--store", str(path),
                             "--device", "cpu", "--threads", "1"])
    assert code == 0, err
    app = ReachApp(path, started["run_id"], launch=started["launch"])
    async with app.run_test(size=(150, 42)) as pilot:
        await settle(app, pilot, 0.6)
        for _ in range(60):
            if app.run_info is not None and app.run_info.status == "complete":
                break
            await pilot.pause(0.5)
            await settle(app, pilot)
        assert app.run_info is not None and app.run_info.status == "complete"
        assert len(app.table.rows) == 4 and all(r.realized is not None for r in app.table.rows)
        assert app.runner.loaded.name == adapter_name("demo", adapter.resolve())


def test_an_adapter_whose_base_is_missing_is_one_line(adapter, tmp_path):
    broken = tmp_path / "orphan"
    shutil.copytree(adapter, broken)
    config = json.loads((broken / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tmp_path / "no-such-base")
    (broken / "adapter_config.json").write_text(json.dumps(config))
    for args in (["audit", str(broken), "--task", "demo", "--store", str(tmp_path / "s.sqlite")],
                 ["generate", str(broken), "1 + 1?"]):
        code, out, err = run_main(args)
        assert code == 2 and out == ""
        assert err == (f"error: adapter {broken.resolve()}: its base model (base_model_name_or_path in "
                       f"adapter_config.json) cannot be loaded: model {str(tmp_path / 'no-such-base')!r} not found: "
                       f"no such directory\n")
    (broken / "adapter_model.safetensors").unlink()
    config["base_model_name_or_path"] = "demo"
    (broken / "adapter_config.json").write_text(json.dumps(config))
    code, _, err = run_main(["generate", str(broken), "1 + 1?"])
    assert (code, err) == (2, f"error: adapter {broken.resolve()} holds no weights (adapter_model.safetensors)\n")


def test_an_adapter_with_a_base_given_as_a_directory(adapter, tmp_path):
    """The base as peft usually records it, a path (here the demo model's folder): the same model."""
    moved = tmp_path / "by-path"
    shutil.copytree(adapter, moved)
    config = json.loads((moved / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(DEMO_MODEL_DIR)
    (moved / "adapter_config.json").write_text(json.dumps(config))
    outs = [json.loads(run_main(["generate", str(d), "What is 9 minus 2?", "--json", "--device", "cpu"])[1])
            for d in (adapter, moved)]
    assert outs[0]["text"] == outs[1]["text"]
    assert outs[1]["model"] == f"{DEMO_MODEL_DIR.resolve()}+by-path#{digest(moved)}"
