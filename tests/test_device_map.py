"""Models loaded with a device map (accelerate hooks): routes stay exact, the model is left as it was, and
bad or impossible device-map requests are one line. Runs on a CPU: a tiny random-weight model is saved to
disk and loaded with layers 1 and 2 offloaded to "disk", which makes accelerate install its hooks (an
instance `forward` built around `_old_forward`) on every module, and weights that live on the meta device
between calls. Nothing is downloaded.
"""

from __future__ import annotations

import functools
import json
import sys

import pytest
from conftest import run_main

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from engine_tiny import build_model, char_tokenizer, recompute_greedy  # noqa: E402

from reachtui.errors import ReachError  # noqa: E402
from reachtui.model import routing  # noqa: E402
from reachtui.model.load import load_model  # noqa: E402
from reachtui.routes import Route  # noqa: E402
from reachtui.generation import Decoding  # noqa: E402
from reachtui.model.run import Runner  # noqa: E402

PROMPTS = ["12+7=? A:", "What is 3*4?", "hello there, friend: 5-2"]
NEW = 8
ROUTES = [(0, 1, 1, 2, 3), (0, 1, 1, 2, 2, 3), (2, 1, 2, 3), (0, 3, 3)]
torch.set_num_threads(1)


def disk_map(prefix: str, n: int, offloaded=(1, 2)) -> dict:
    m = {f"{prefix}.embed_tokens": "cpu", f"{prefix}.norm": "cpu", f"{prefix}.rotary_emb": "cpu", "lm_head": "cpu"}
    m.update({f"{prefix}.layers.{i}": ("disk" if i in offloaded else "cpu") for i in range(n)})
    return m


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("dm")
    out = {}
    for arch in ("llama", "qwen2"):
        d = root / arch
        build_model(arch).save_pretrained(d)
        char_tokenizer().save_pretrained(d)
        (root / f"{arch}.json").write_text(json.dumps(disk_map("model", 4)))
        out[arch] = d
    return root, out


@functools.lru_cache(maxsize=None)
def _load(path: str, mapped: bool, folder: str):
    if mapped:
        return load_model(path, dtype="float32", device_map=str(path) + ".json", offload_folder=folder)
    return load_model(path, device="cpu", dtype="float32")


def pair(saved, arch):
    root, dirs = saved
    return _load(str(dirs[arch]), False, ""), _load(str(dirs[arch]), True, str(root / f"off-{arch}"))


def hf_greedy(lm, prompts, new=NEW):
    enc = lm.tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
    out = lm.model.generate(**enc, max_new_tokens=new, do_sample=False, pad_token_id=0, eos_token_id=2)
    rows = out[:, enc.input_ids.shape[1]:].tolist()
    return [r[: r.index(2) + 1] if 2 in r else r for r in rows]


def state(lm):
    """What a routed call must leave exactly as it was: logits, hooks and their forward wrappers (still
    bound to the original modules), layer indices, the layer list, the config."""
    m, arch = lm.model, lm.arch
    ids = lm.tokenizer(PROMPTS[2], return_tensors="pt").input_ids
    with torch.inference_mode():
        logits = m(input_ids=ids).logits.clone()
    hooked = {}
    for name, mod in m.named_modules():
        d = mod.__dict__
        if "_hf_hook" in d:
            fwd, old = d["forward"], d["_old_forward"]
            hooked[name] = (id(d["_hf_hook"]), fwd.args[0] is mod, old.__self__ is mod)
    return dict(logits=logits, hooked=hooked, layers=arch.layers_owner._modules[arch.layers_attr],
                layer_idx=[arch.attention(i).layer_idx for i in range(arch.num_layers)],
                devices={k: str(v.device) for k, v in m.named_parameters()}, config=m.config.to_dict())


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_hooks_are_really_installed(saved, arch):
    _, lm = pair(saved, arch)
    layers = lm.arch.layers
    assert "_hf_hook" in layers[1].__dict__ and "_hf_hook" in layers[1].self_attn.__dict__
    assert layers[1].self_attn.q_proj.weight.device.type == "meta"      # offloaded: loaded per call
    assert layers[0].self_attn.q_proj.weight.device.type == "cpu"
    assert lm.device == "cpu+disk" and lm.device_map["model.layers.1"] == "disk"
    st = state(lm)
    assert len(st["hooked"]) > 20 and all(a and b for _, a, b in st["hooked"].values())


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_identity_route_matches_generate_under_device_map(saved, arch):
    plain, lm = pair(saved, arch)
    want = hf_greedy(lm, PROMPTS)
    assert want == hf_greedy(plain, PROMPTS)          # the offloaded model is the same model
    r = Runner(lm)
    assert [g.token_ids for g in r.generate(PROMPTS, decoding=Decoding(max_new_tokens=NEW))] == want
    gen, _ = r.trace(PROMPTS[0], decoding=Decoding(max_new_tokens=NEW), force=True)   # through the clones
    assert gen.token_ids == want[0]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_routes_with_repeated_layers_exact_under_device_map(saved, arch):
    plain, lm = pair(saved, arch)
    before = state(lm)
    r, rp = Runner(lm), Runner(plain)
    for route in ROUTES:
        gens = r.generate(PROMPTS, route=Route(route), decoding=Decoding(max_new_tokens=NEW))
        for p, g in zip(PROMPTS, gens):
            assert g.token_ids == recompute_greedy(lm, p, route), (arch, route, p)
        ref = rp.generate(PROMPTS, route=Route(route), decoding=Decoding(max_new_tokens=NEW))
        assert [g.token_ids for g in gens] == [g.token_ids for g in ref], (arch, route)
    silenced = r.generate(PROMPTS, route=Route((0, 1, 1, 3)), silenced=frozenset({1}),
                          decoding=Decoding(max_new_tokens=NEW, temperature=1.0), seeds=[1, 2, 3])
    ref = rp.generate(PROMPTS, route=Route((0, 1, 1, 3)), silenced=frozenset({1}),
                      decoding=Decoding(max_new_tokens=NEW, temperature=1.0), seeds=[1, 2, 3])
    assert [g.token_ids for g in silenced] == [g.token_ids for g in ref]
    after = state(lm)
    assert torch.equal(before["logits"], after["logits"])
    for key in ("hooked", "layer_idx", "devices", "config"):
        assert before[key] == after[key], key
    assert before["layers"] is after["layers"]
    assert after["layer_idx"] == [0, 1, 2, 3]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_shared_identity_prefill_exact_under_device_map(saved, arch):
    """generate_many replays a recorded identity prefill through hooked (offloaded) layers: the same
    tokens and log-probs as one call per intervention, and as the unmapped model."""
    plain, lm = pair(saved, arch)
    r, rp = Runner(lm), Runner(plain)
    plans = [(Route(route), frozenset()) for route in ROUTES] + [(Route((0, 1, 2, 3)), frozenset({2}))]
    dec = Decoding(max_new_tokens=NEW)
    many = r.generate_many(PROMPTS, plans, decoding=dec)
    for (route, sil), got in zip(plans, many):
        one = r.generate(PROMPTS, route=route, silenced=sil, decoding=dec)
        ref = rp.generate(PROMPTS, route=route, silenced=sil, decoding=dec)
        assert [g.token_ids for g in got] == [g.token_ids for g in one] == [g.token_ids for g in ref]
        assert [g.mean_logprob for g in got] == [g.mean_logprob for g in one]


def _slots(lm, route):
    """Keys per cache slot after one routed prefill of PROMPTS[0]."""
    ids = lm.tokenizer(PROMPTS[0], return_tensors="pt").input_ids
    with routing.installed(lm.arch, route), torch.inference_mode():
        cache = routing.new_cache(lm.arch)
        routing.forward_last_logits(lm.model, ids, torch.ones_like(ids), None, cache)
        return ids.shape[1], [0 if layer.keys is None else layer.keys.shape[-2] for layer in cache.layers]


def test_clone_of_hooked_layer_writes_its_own_cache_slot(saved, monkeypatch):
    _, lm = pair(saved, "llama")
    n, slots = _slots(lm, (0, 1, 1, 2, 2, 3))
    assert slots == [n] * 6
    # Without the rebinding, a clone's hook would call the original layer (its layer_idx): the second
    # application of layer 1 would land in slot 1 again, and slot 2 would stay empty. The test sees it.
    monkeypatch.setattr(routing, "_rebind_hooked_forward", lambda new, module: None)
    _, broken = _slots(lm, (0, 1, 1, 2, 2, 3))
    assert broken != [n] * 6


def test_unknown_instance_forward_is_refused(saved):
    plain, _ = pair(saved, "llama")
    attn = plain.arch.layers[1].self_attn
    attn.forward = lambda *a, **k: None              # someone else's wrapper: we cannot rebind it
    try:
        with pytest.raises(ReachError, match="cannot route .* instance forward"):
            with routing.installed(plain.arch, (0, 1, 1, 3)):
                pass
    finally:
        del attn.forward
    assert plain.arch.layers_owner._modules[plain.arch.layers_attr] is plain.arch.layers


def test_auto_map_on_a_cpu_machine(saved):
    """`--device-map auto` where only a CPU is there: accelerate puts everything on it (no hooks); the same
    tokens as a plain load."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: auto would use it")
    plain, _ = pair(saved, "llama")
    lm = load_model(str(saved[1]["llama"]), dtype="float32", device_map="auto")
    assert lm.device == "cpu" and lm.dtype == "float32"
    dec = Decoding(max_new_tokens=NEW)
    for route in (None, Route((0, 1, 1, 2, 3))):
        got = Runner(lm).generate(PROMPTS, route=route, decoding=dec)
        want = Runner(plain).generate(PROMPTS, route=route, decoding=dec)
        assert [g.token_ids for g in got] == [g.token_ids for g in want]


# ------------------------------------------------------------------------------------------ errors

@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"device_map": "everywhere"}, "unknown device map 'everywhere'"),
        ({"device_map": "auto", "device": "cpu"}, "--device cpu and --device-map auto: give one"),
        ({"device_map": "/no/such/map.json"}, "device map file /no/such/map.json: cannot be read"),
        ({"offload_folder": "/tmp/x"}, "--offload-folder only applies with --device-map"),
    ],
)
def test_device_map_errors_are_one_line(saved, kwargs, fragment):
    with pytest.raises(ReachError) as err:
        load_model(str(saved[1]["llama"]), **kwargs)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_bad_map_files(saved, tmp_path):
    path = str(saved[1]["llama"])
    bad = tmp_path / "bad.json"
    for text, fragment in [("[1, 2]", "must be a JSON object"), ('{"model": "tpu"}', "unknown device 'tpu'"),
                           ("{", "cannot be read")]:
        bad.write_text(text)
        with pytest.raises(ReachError) as err:
            load_model(path, device_map=str(bad))
        assert fragment in str(err.value) and "\n" not in str(err.value)
    bad.write_text(json.dumps({"model.layers.0": "disk", "lm_head": "cpu"}))   # a map that misses modules
    with pytest.raises(ReachError) as err:
        load_model(path, device_map=str(bad), offload_folder=str(tmp_path / "o"))
    assert str(err.value).startswith(f"cannot load model {path!r}") and "\n" not in str(err.value)
    bad.write_text(json.dumps(disk_map("model", 4)))
    with pytest.raises(ReachError, match="offloads to disk: pass --offload-folder"):
        load_model(path, device_map=str(bad))


def test_without_accelerate_one_line(saved, monkeypatch):
    monkeypatch.setitem(sys.modules, "accelerate", None)      # import accelerate -> ImportError
    with pytest.raises(ReachError) as err:
        load_model(str(saved[1]["llama"]), device_map="auto")
    assert "needs accelerate" in str(err.value) and "reachtui[gpu]" in str(err.value)


def test_generate_cli_with_device_map(saved, tmp_path, monkeypatch):
    root, dirs = saved
    path = str(dirs["llama"])
    args = ["generate", path, "What is 3*4?", "--json", "--max-new-tokens", "6", "--route", "0,1,1,2,2,3"]
    code, plain, err = run_main(args + ["--device", "cpu"])
    assert code == 0, err
    code, mapped, err = run_main(args + ["--device-map", str(root / "llama.json"), "--offload-folder",
                                     str(tmp_path / "off")])
    assert code == 0, err
    assert json.loads(mapped) == json.loads(plain)
    code, _, err = run_main(args + ["--device-map", "sideways"])
    assert code == 2 and err.startswith("error: unknown device map 'sideways'") and err.count("\n") == 1
    monkeypatch.setitem(sys.modules, "accelerate", None)
    code, _, err = run_main(args + ["--device-map", "auto"])
    assert code == 2 and "needs accelerate" in err and err.count("\n") == 1 and "Traceback" not in err
    # audit and open refuse the same way, before any model, store or app work
    for cmd in (["audit", path, "--task", "demo", "--store", str(tmp_path / "s.sqlite")],
                ["open", path, "--store", str(tmp_path / "s.sqlite")]):
        code, _, err = run_main(cmd + ["--device-map", "auto"])
        assert code == 2 and "needs accelerate" in err and err.count("\n") == 1, (cmd, err)
        code, _, err = run_main(cmd + ["--device-map", "auto", "--device", "cpu"])
        assert code == 2 and "give one" in err and err.count("\n") == 1, (cmd, err)
    assert not (tmp_path / "s.sqlite").exists()
