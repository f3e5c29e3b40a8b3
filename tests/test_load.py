"""Model resolution and loading (load.py) and the `reachtui generate` command: what resolves, what fails
with one line (exit 2), and that resolving imports neither torch nor transformers. Nothing is downloaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import run_main

from reachtui.errors import ReachError
from reachtui.model import load as load_mod
from reachtui.model.load import find_in_cache, hf_cache_dir, resolve_model


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A fake hub cache holding org/tiny (refs/main -> snapshot) and org/loose (no refs)."""
    cache = tmp_path / "hub"
    for repo, commit, ref in [("org/tiny", "abc123", True), ("org/loose", "def456", False)]:
        d = cache / ("models--" + repo.replace("/", "--"))
        snap = d / "snapshots" / commit
        snap.mkdir(parents=True)
        (snap / "config.json").write_text("{}")
        if ref:
            (d / "refs").mkdir()
            (d / "refs" / "main").write_text(commit)
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_resolve_demo_directory_and_cache(tmp_path, hub, monkeypatch):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    assert resolve_model(str(model_dir)) == model_dir.resolve()
    assert resolve_model("org/tiny") == hub / "models--org--tiny" / "snapshots" / "abc123"
    assert resolve_model("org/loose") == hub / "models--org--loose" / "snapshots" / "def456"
    assert find_in_cache("org/none") is None
    fake_demo = tmp_path / "demo"
    fake_demo.mkdir()
    (fake_demo / "config.json").write_text("{}")
    monkeypatch.setitem(load_mod.BUNDLED_MODELS, "demo", fake_demo)
    assert resolve_model("demo") == fake_demo
    assert resolve_model("demo-tuned").name == "demo-tuned"     # the bundled pair, found by name


def test_cache_location_follows_env(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hf_cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    assert hf_cache_dir() == tmp_path / "c"


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("org/absent", "not in the Hugging Face cache at"),
        ("./no/such/dir", "no such directory"),
        ("/no/such/dir", "no such directory"),
        ("", "no model given"),
    ],
)
def test_resolve_errors(spec, fragment, hub):
    with pytest.raises(ReachError) as err:
        resolve_model(spec)
    assert fragment in str(err.value) and "\n" not in str(err.value)
    if spec == "org/absent":
        assert str(hub) in str(err.value) and "--allow-download" in str(err.value)


def test_resolve_bad_directories_and_offline(tmp_path, hub, monkeypatch):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReachError, match="has no config.json"):
        resolve_model(str(tmp_path / "empty"))
    (tmp_path / "f.bin").write_text("x")
    with pytest.raises(ReachError, match="is a file"):
        resolve_model(str(tmp_path / "f.bin"))
    monkeypatch.setitem(load_mod.BUNDLED_MODELS, "demo-tuned", tmp_path / "nodemo")
    with pytest.raises(ReachError, match="the bundled demo-tuned model is missing"):
        resolve_model("demo-tuned")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ReachError, match="HF_HUB_OFFLINE is set"):
        resolve_model("org/absent", allow_download=True)


def test_resolve_imports_no_torch(hub):
    code = (
        "import sys; from reachtui.model.load import resolve_model\n"
        "print(resolve_model('org/tiny').name)\n"
        "print([m for m in ('torch', 'transformers') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["abc123", "[]"]


# ------------------------------------------------------------------------------------------ loading

@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    pytest.importorskip("torch")
    import transformers as T
    from engine_tiny import build_model, char_tokenizer

    root = tmp_path_factory.mktemp("models")
    good = root / "tiny-llama"
    build_model("llama").save_pretrained(good)
    char_tokenizer().save_pretrained(good)
    mamba = root / "tiny-mamba"
    T.MambaForCausalLM(T.MambaConfig(vocab_size=97, hidden_size=16, state_size=4, num_hidden_layers=2,
                                     intermediate_size=32)).save_pretrained(mamba)
    char_tokenizer().save_pretrained(mamba)
    vit = root / "vit"
    T.ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16).save_pretrained(vit)
    return {"good": good, "mamba": mamba, "vit": vit}


def test_load_model(tiny_dirs):
    from reachtui.model.load import load_model

    lm = load_model(str(tiny_dirs["good"]), device="cpu", dtype="auto")
    assert lm.dtype == "float32" and lm.device == "cpu"
    assert lm.arch.num_layers == 4 and lm.arch.model_class == "LlamaForCausalLM"
    assert not lm.model.training
    assert lm.name == str(tiny_dirs["good"].resolve())
    assert lm.tokenizer("12+3").input_ids
    lm16 = load_model(str(tiny_dirs["good"]), device="cpu", dtype="bfloat16")
    assert str(next(lm16.model.parameters()).dtype) == "torch.bfloat16"


@pytest.mark.parametrize(
    "which, kwargs, fragment",
    [
        ("vit", {}, "is not a causal language model"),
        ("mamba", {}, "unsupported model MambaForCausalLM: no MLP block found"),
        ("good", {"device": "tpu"}, "unknown device 'tpu'"),
        ("good", {"dtype": "int3"}, "unknown dtype 'int3'"),
    ],
)
def test_load_errors(tiny_dirs, which, kwargs, fragment):
    from reachtui.model.load import load_model

    with pytest.raises(ReachError) as err:
        load_model(str(tiny_dirs[which]), **{"device": "cpu", **kwargs})
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_cuda_unavailable_is_one_line(tiny_dirs):
    import torch

    from reachtui.model.load import load_model

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ReachError, match="CUDA is not available"):
        load_model(str(tiny_dirs["good"]), device="cuda:0")


# ------------------------------------------------------------------------------------------ CLI

def test_generate_json(tiny_dirs):
    path = str(tiny_dirs["good"])
    code, out, err = run_main(["generate", path, "12+7=", "--json", "--max-new-tokens", "6", "--device", "cpu", "--raw"])
    assert code == 0, err
    obj = json.loads(out)
    for key in ("text", "answer", "route", "silenced", "layers_executed", "new_tokens", "mean_logprob", "compute"):
        assert key in obj
    assert obj["route"] == "0-3" and obj["silenced"] == [] and obj["layers_executed"] == 4
    assert 1 <= obj["new_tokens"] <= 6
    code, out2, _ = run_main(["generate", path, "12+7=", "--json", "--max-new-tokens", "6", "--route", "0,1,1,3",
                          "--silence", "2", "--temperature", "0.8", "--seed", "3", "--device", "cpu", "--raw"])
    obj2 = json.loads(out2)
    assert obj2["route"] == "0-1,1,3" and obj2["silenced"] == [2] and obj2["layers_executed"] == 4
    assert obj2["compute"] == 4 * (len("12+7=") + obj2["new_tokens"])  # char tokenizer, no BOS added


def test_generate_renders_the_protocol_s_prompt_as_the_app_does(tiny_dirs, tmp_path):
    """Without --raw, PROMPT is a question in the protocol's prompt, decoded as the app's live run decodes it
    (`reachtui.engine.live.live_run`: the protocol's stop strings, max new tokens, decoding and seed)."""
    from reachtui.engine.live import live_run
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol, protocol_to_toml

    path = str(tiny_dirs["good"])
    code, out, err = run_main(["generate", path, "What is 3*4?", "--json", "--device", "cpu"])
    assert code == 0, err
    obj = json.loads(out)
    assert obj["prompt"] == "Question: What is 3*4?\nAnswer:"
    runner = Runner(load_model(path, device="cpu"))
    live = live_run(runner, Protocol(), {"question": "What is 3*4?", "gold": "12"})
    assert (obj["text"], obj["new_tokens"]) == (live.text, live.new_tokens)
    proto = Protocol(template="Q: {question}\nA:", max_new_tokens=5, stop=("4",))
    (tmp_path / "p.toml").write_text(protocol_to_toml(proto))
    code, out, err = run_main(["generate", path, "What is 3*4?", "--json", "--device", "cpu", "--protocol",
                           str(tmp_path / "p.toml")])
    obj = json.loads(out)
    live = live_run(runner, proto, {"question": "What is 3*4?", "gold": "12"})
    assert obj["prompt"] == "Q: What is 3*4?\nA:" and (obj["text"], obj["new_tokens"]) == (live.text, live.new_tokens)
    assert obj["new_tokens"] <= 5


def test_generate_plain_matches_runner(tiny_dirs):
    from reachtui.model.load import load_model
    from reachtui.generation import Decoding
    from reachtui.model.run import Runner

    path = str(tiny_dirs["good"])
    code, out, err = run_main(["generate", path, "What is 3*4?", "--max-new-tokens", "5", "--route", "0-1,1-3",
                           "--device", "cpu", "--raw"])
    assert code == 0, err
    lines = out.split("\n")
    assert lines[-2].startswith("answer: ")
    want = Runner(load_model(path, device="cpu")).generate(
        ["What is 3*4?"], route=(0, 1, 1, 2, 3), decoding=Decoding(max_new_tokens=5))[0].text
    assert "\n".join(lines[:-2]) == want


def test_generate_says_what_each_figure_is_and_takes_threads(monkeypatch):
    """The answer's rule and the compute are labelled (what the bracket read, layer-tokens = layers x tokens),
    and --threads sets torch's threads (the environment and torch's count restored after the test)."""
    import os

    import torch

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "2")
    before = torch.get_num_threads()
    try:
        code, out, err = run_main(["generate", "demo", "What is 12 plus 7?", "--route", "0-3,3,5-7", "--silence", "2",
                                   "--threads", "1"])
        assert (torch.get_num_threads(), os.environ["OMP_NUM_THREADS"]) == (1, "1")
    finally:
        torch.set_num_threads(before)
    assert code == 0, err
    assert out == ' 1*20*3. 1+9=19. #### 19\nanswer: 19  (rule hash: the first "#### N")\n'
    assert err == ("route 0-3,3,5-7, MLP silenced in 2; 25 new tokens (ended at a stop string); compute 488 "
                   "layer-tokens (8 layers x 61 tokens, prompt and new)\n")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["generate", "/no/such/model", "hi"], "no such directory"),
        (["generate", "{good}", "hi", "--route", "3-1,99"], "descending range 3-1"),
        (["generate", "{good}", "hi", "--route", "0-9"], "layer 9 is out of range"),
        (["generate", "{good}", "hi", "--silence", "7"], "out of range"),
        (["generate", "{mamba}", "hi"], "unsupported model MambaForCausalLM"),
        (["generate", "{vit}", "hi"], "not a causal language model"),
        (["generate", "{good}", "hi", "--top-p", "0"], "--top-p"),
    ],
)
def test_generate_bad_input_is_one_line_exit_2(tiny_dirs, args, fragment):
    args = [a.format(**{k: str(v) for k, v in tiny_dirs.items()}) for a in args]
    code, out, err = run_main(args + ["--device", "cpu"])
    assert code == 2
    assert err.startswith("error: ") and fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_generate_subprocess(tiny_dirs):
    out = subprocess.run([sys.executable, "-m", "reachtui", "generate", str(tiny_dirs["good"]), "hi",
                          "--route", "3-1,99", "--device", "cpu"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("error: ") and "Traceback" not in out.stderr
