"""Exactness of the intervention engine (routes, MLP silencing, batched generation) on tiny random models
of every supported architecture. Nothing is downloaded.

- identity route, nothing silenced => the model's own greedy `generate` tokens, same logits (fp32 tol);
- routes with repeated layers: cached generation => the tokens of full recomputation at every step;
- a routed forward => a hand-written loop over the same layers (incl. skipping the first layer);
- silencing layer L => that MLP's output projection zeroed;
- batched => one-prompt-at-a-time (demo model, when it is there);
- after any call, also one that raised: outputs bit-identical, no hooks, config unchanged.
"""

from __future__ import annotations

import copy
import functools
import re
import threading
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from engine_tiny import ARCHS, loaded, recompute_greedy  # noqa: E402

from reachtui.assets import DEMO_MODEL_DIR  # noqa: E402
from reachtui.errors import ReachError  # noqa: E402
from reachtui.model import prefill, routing  # noqa: E402
from reachtui.model.layers import discover  # noqa: E402
from reachtui.routes import Route  # noqa: E402
from reachtui.generation import Decoding  # noqa: E402
from reachtui.model.run import Runner  # noqa: E402

PROMPTS = ["12+7=? A:", "What is 3*4?", "hello there, friend: 5-2"]
NEW = 8
torch.set_num_threads(1)


@functools.lru_cache(maxsize=None)
def tiny(arch: str):
    return loaded(arch)


#: How decoding steps run (`Runner.step_mode`): the eager growing cache a CPU uses, and the full-capacity
#: step a GPU captures as a CUDA graph, here run eagerly (plain models; others keep growing).
MODES = ["growing", "full"]


def runner(arch: str, mode: str = "growing") -> Runner:
    r = Runner(tiny(arch))
    r.step_mode = mode
    return r


def hf_greedy(lm, prompts, new=NEW, model=None):
    """The model's own generate (greedy), left-padded batch; rows cut after their first EOS."""
    model = model or lm.model
    enc = lm.tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
    out = model.generate(**enc, max_new_tokens=new, do_sample=False, pad_token_id=0, eos_token_id=2,
                         output_logits=True, return_dict_in_generate=True)
    rows = out.sequences[:, enc.input_ids.shape[1]:].tolist()
    cut = [r[: r.index(2) + 1] if 2 in r else r for r in rows]
    return cut, torch.stack(out.logits, dim=1)


def fingerprint(lm):
    m = lm.model
    ids = lm.tokenizer(PROMPTS[2], return_tensors="pt").input_ids
    with torch.inference_mode():
        logits = m(input_ids=ids).logits.clone()
    hooks = sum(len(x._forward_hooks) + len(x._forward_pre_hooks) for x in m.modules())
    params = {k: (v.data_ptr(), v.clone()) for k, v in m.state_dict().items()}
    arch = lm.arch
    return dict(
        logits=logits,
        hooks=hooks,
        params=params,
        layers=arch.layers_owner._modules[arch.layers_attr],
        layer_idx=[getattr(arch.attention(i), "layer_idx", None) for i in range(arch.num_layers)],
        mlps=[arch.mlp(i) for i in range(arch.num_layers)],
        config=m.config.to_dict(),
        modules=len(list(m.modules())),
    )


def assert_same(a, b):
    assert torch.equal(a["logits"], b["logits"])          # bit-identical
    assert a["hooks"] == b["hooks"] == 0
    assert a["params"].keys() == b["params"].keys()
    for k in a["params"]:
        assert a["params"][k][0] == b["params"][k][0]
        assert torch.equal(a["params"][k][1], b["params"][k][1])
    assert a["layers"] is b["layers"]
    assert a["layer_idx"] == b["layer_idx"] == list(range(len(a["layer_idx"])))
    assert all(x is y for x, y in zip(a["mlps"], b["mlps"]))
    assert a["config"] == b["config"]
    assert a["modules"] == b["modules"]


# ------------------------------------------------------------------------------------------ discovery

EXPECTED_TYPES = {
    "mistral": ["sliding_attention"] * 4,
    "qwen2": ["full_attention", "full_attention", "sliding_attention", "sliding_attention"],
    "gemma2": ["sliding_attention", "full_attention"] * 2,
    "gemma3": ["sliding_attention", "full_attention"] * 2,
}


@pytest.mark.parametrize("arch", ARCHS)
def test_discover(arch):
    lm = tiny(arch)
    a = lm.arch
    assert a.num_layers == 4 and len(a.layers) == 4
    assert a.layers_owner._modules[a.layers_attr] is a.layers
    assert a.final_norm is not None and "norm" in type(a.final_norm).__name__.lower()
    for i in range(4):
        mlp = a.mlp(i)
        assert re.search("mlp|moe", type(mlp).__name__, re.I), type(mlp).__name__
    assert a.layer_types == EXPECTED_TYPES.get(arch, ["full_attention"] * 4)
    if arch in ("qwen2_moe", "qwen3_moe"):
        assert "Sparse" in type(a.mlp(0)).__name__
    assert a.model_class == type(lm.model).__name__


def test_discover_unsupported():
    import torch.nn as nn

    class Config:
        num_hidden_layers = 3

    class Strange(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = Config()
            self.body = nn.Linear(4, 4)

    with pytest.raises(ReachError, match="unsupported model Strange: no ModuleList of decoder blocks of length 3"):
        discover(Strange())

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = nn.Linear(4, 4)
            self.other = nn.Linear(4, 4)

    class NoMlp(Strange):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Block() for _ in range(3)])

    with pytest.raises(ReachError, match=r"unsupported model NoMlp: no MLP block found in layer 0 \(Block"):
        discover(NoMlp())


# ------------------------------------------------------------------------------------------ identity

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("mode", MODES)
def test_identity_route_matches_generate(arch, mode):
    lm, r = tiny(arch), runner(arch, mode)
    ref, ref_logits = hf_greedy(lm, PROMPTS)
    batched = r.generate(PROMPTS, decoding=Decoding(max_new_tokens=NEW))
    assert [g.token_ids for g in batched] == ref
    for i, p in enumerate(PROMPTS):
        one, _ = hf_greedy(lm, [p])
        assert r.generate([p], decoding=Decoding(max_new_tokens=NEW))[0].token_ids == one[0] == ref[i]
    # the routing machinery itself (forced on the identity route) gives the same tokens and logits
    one, logits = hf_greedy(lm, [PROMPTS[0]])
    gen, steps = r.trace(PROMPTS[0], decoding=Decoding(max_new_tokens=NEW), force=True)
    assert gen.token_ids == one[0]
    torch.testing.assert_close(steps, logits[0, : len(steps)].float(), atol=1e-5, rtol=1e-5)
    ids = lm.tokenizer(PROMPTS[1], return_tensors="pt").input_ids
    with torch.inference_mode():
        plain = lm.model(input_ids=ids).logits
        with routing.installed(lm.arch, None, force=True):
            routed = routing.forward_full_logits(lm.model, ids)
    torch.testing.assert_close(routed, plain, atol=1e-6, rtol=1e-6)


# ------------------------------------------------------------------------------------------ routes

ROUTES = [(0, 1, 1, 2, 3, 3), (1, 2, 1, 2, 3)]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("mode", MODES)
def test_repeated_layers_cached_equals_recompute(arch, mode):
    lm, r = tiny(arch), runner(arch, mode)
    for route in ROUTES:
        gens = r.generate(PROMPTS, route=Route(route), decoding=Decoding(max_new_tokens=NEW))
        for p, g in zip(PROMPTS, gens):
            assert g.token_ids == recompute_greedy(lm, p, route), (arch, route, p)
            assert g.layers_executed == len(route)
    # a route really changes the computation (the test would catch a route that is ignored)
    ident = r.generate(PROMPTS, decoding=Decoding(max_new_tokens=NEW))
    routed = r.generate(PROMPTS, route=Route(ROUTES[0]), decoding=Decoding(max_new_tokens=NEW))
    assert [g.token_ids for g in ident] != [g.token_ids for g in routed]


# routes that start like the identity for 0, 1, 2, 3 and all 4 positions, and an MLP-silenced identity
SHARING = [((1, 2, 3), ()), ((0, 0, 1, 2, 3), ()), ((0, 1, 1, 2, 3), ()), ((0, 1, 2, 2, 3), ()),
           ((0, 1, 2, 3), ()), ((0, 1, 2, 3), (2,)), ((0, 1, 2, 3, 3), (1,))]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("mode", MODES)
def test_many_interventions_share_the_identity_prefill_exactly(arch, mode):
    """generate_many over interventions that begin like the identity replays a recorded identity prefill for
    those positions: bit-identical tokens and log-probs to one generate call per intervention."""
    r = runner(arch, mode)
    prompts = PROMPTS + [PROMPTS[0]]          # a repeated prompt is prefilled once
    plans = [(Route(route), frozenset(sil)) for route, sil in SHARING]
    for dec in (Decoding(max_new_tokens=NEW), Decoding(max_new_tokens=NEW, temperature=1.0)):
        seeds = [[10 * i + j for j in range(len(prompts))] for i in range(len(plans))]
        done = []
        many = r.generate_many(prompts, plans, decoding=dec, seeds=seeds,
                               on_done=lambda i, gens: done.append((i, [g.token_ids for g in gens])))
        for (route, sil), got, row_seeds in zip(plans, many, seeds):
            want = r.generate(prompts, route=route, silenced=sil, decoding=dec, seeds=row_seeds)
            assert [g.token_ids for g in got] == [g.token_ids for g in want], (arch, route, sil)
            assert [g.mean_logprob for g in got] == [g.mean_logprob for g in want]
        assert done == [(i, [g.token_ids for g in gens]) for i, gens in enumerate(many)]
    if arch == "llama":                        # the sharing really happened (plain full-attention model)
        calls = []
        real = prefill.record
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(prefill, "record", lambda *a: (calls.append(a[2]), real(*a))[1])
            r.generate_many(prompts, plans, decoding=Decoding(max_new_tokens=2))
        assert calls == [4]


# an MCTS round: every route on its own few prompts (routes of different lengths, one silenced MLP)
MIXED_PROMPTS = PROMPTS + ["1+1=", "abc", "Question: 7*8? Answer in full"]
MIXED = [((0, 1, 1, 2, 3), (), [4, 0]), ((1, 2, 3), (), [2]), ((0, 1, 2, 3), (1,), [5, 3, 1]),
         ((0, 2, 3), (), [1, 4]), ((0, 1, 2, 2, 3, 3), (), [0, 3, 5, 2])]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("mode", MODES)
def test_interventions_on_their_own_prompts_decode_as_one_batch(arch, monkeypatch, mode):
    """generate_many with rows (each intervention on its own prompts, in any order): the tokens of one
    generate call per intervention; greedy and sampled; on a plain model one forward per decoding step for
    all of them, and the same numbers when the call is repeated."""
    r = runner(arch, mode)
    plans = [(Route(route), frozenset(sil)) for route, sil, _ in MIXED]
    rows = [rs for _, _, rs in MIXED]
    for dec in (Decoding(max_new_tokens=NEW), Decoding(max_new_tokens=NEW, temperature=1.0)):
        seeds = [[7 * k + j for j in range(len(rs))] for k, rs in enumerate(rows)]
        done = []
        many = r.generate_many(MIXED_PROMPTS, plans, decoding=dec, seeds=seeds, rows=rows,
                               on_done=lambda i, gens: done.append(i))
        assert sorted(done) == list(range(len(plans)))
        for (route, sil), rs, got, ss in zip(plans, rows, many, seeds):
            want = r.generate([MIXED_PROMPTS[j] for j in rs], route=route, silenced=sil, decoding=dec, seeds=ss)
            assert [g.token_ids for g in got] == [g.token_ids for g in want], (arch, route, sil)
            assert [g.text for g in got] == [g.text for g in want]
            assert [g.layers_executed for g in got] == [len(route)] * len(rs)
            assert [g.mean_logprob for g in got] == pytest.approx([g.mean_logprob for g in want], abs=1e-5)
        again = r.generate_many(MIXED_PROMPTS, plans, decoding=dec, seeds=seeds, rows=rows)
        assert [[g.mean_logprob for g in x] for x in again] == [[g.mean_logprob for g in x] for x in many]
    steps = []
    real = routing.forward_last_logits
    monkeypatch.setattr(routing, "forward_last_logits", lambda m, ids, *a: (steps.append(ids.shape), real(m, ids, *a))[1])
    r.generate_many(MIXED_PROMPTS, plans, decoding=Decoding(max_new_tokens=3), rows=rows)
    decode_steps = [s for s in steps if s[1] == 1]
    if r.mixing:          # one batch of every row (less those already finished): 2 steps after the prefill
        assert len(decode_steps) == 2 and decode_steps[0][0] > max(len(rs) for rs in rows)
    else:                 # a model that cannot mix (sliding layers): one batch per intervention
        assert len(decode_steps) == 2 * len(plans)
    if arch == "llama":
        assert r.mixing


def _numbers(many):
    return [[(g.token_ids, g.mean_logprob) for g in gens] for gens in many]


@pytest.mark.parametrize("arch", ARCHS)
def test_mixed_calls_replay_identity_prefills_kept_across_calls(arch, monkeypatch):
    """A mixed call replays each prompt's identity prefill (recorded alone, kept across calls) for the
    positions a route shares with the identity: the same numbers on a fresh runner, after other calls
    filled the store, and with a store that keeps nothing (as a resumed run gets an uninterrupted run's);
    a kept prompt is not recorded again; forget_prefixes empties the store."""
    plans = [(Route(route), frozenset(sil)) for route, sil, _ in MIXED]
    rows = [rs for _, _, rs in MIXED]
    dec = Decoding(max_new_tokens=NEW)
    fresh = runner(arch).generate_many(MIXED_PROMPTS, plans, decoding=dec, rows=rows)
    r = runner(arch)
    r.generate_many(MIXED_PROMPTS, plans[::-1], decoding=dec, rows=[rs[::-1] for rs in rows[::-1]])
    recorded = []
    real = prefill.record_alone
    monkeypatch.setattr(prefill, "record_alone", lambda runner, ids, depth: (
        runner is r and recorded.append(len(ids)), real(runner, ids, depth))[1])
    again = r.generate_many(MIXED_PROMPTS, plans, decoding=dec, rows=rows)
    keeps_none = runner(arch)
    keeps_none.prefixes.budget = 0
    none = keeps_none.generate_many(MIXED_PROMPTS, plans, decoding=dec, rows=rows)
    assert _numbers(fresh) == _numbers(again) == _numbers(none)
    assert recorded == []
    if r.mixing:                  # routes that start like the identity: their prompts are kept
        assert len(r.prefixes) == len(MIXED_PROMPTS) and not len(keeps_none.prefixes)
    r.forget_prefixes()
    assert len(r.prefixes) == 0 and r.prefixes.used == 0


def test_mixed_steps_follow_every_route_in_order():
    """A mixed batch lays its plans' routes on one sequence of steps (a common supersequence): each route
    runs at increasing steps, each step one layer (silenced or not); routes that skip layers share the
    identity's steps, a repeated block adds its own."""
    from reachtui.intervention import Intervention
    from reachtui.model.mixed import schedule

    plans = [Intervention(Route(route), frozenset(sil)) for route, sil, _ in MIXED] + [Intervention(Route((0, 1, 2, 3)))]
    steps, slots = schedule(plans)
    for iv, mine in zip(plans, slots):
        assert all(a < b for a, b in zip(mine, mine[1:]))
        assert [steps[t] for t in mine] == [(layer, layer in iv.silenced) for layer in iv.route.layers]
    skips = [Intervention(Route(r)) for r in [(0, 1, 2, 3, 4, 5, 6, 7), (0, 1, 2, 4, 5, 6, 7), (0, 3, 4, 5, 6, 7),
                                               (0, 1, 2, 3, 4, 5, 7)]]
    assert schedule(skips)[0] == [(layer, False) for layer in range(8)]
    repeat = skips + [Intervention(Route((0, 1, 2, 3, 2, 3, 4, 5, 6, 7)))]
    assert len(schedule(repeat)[0]) == 10


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma2", "gpt2"])
def test_prefill_in_sub_batches_gives_the_same_tokens(arch):
    """Prompts prefilled in sub-batches (each padded to its own longest prompt, written into one decode
    batch) give the tokens of one prefill of the whole batch."""
    r = runner(arch)
    prompts = PROMPTS + ["1+1=", "abc", "Question: 7*8? Answer in full"]
    whole = r.generate(prompts, route=Route((0, 1, 1, 2, 3)), decoding=Decoding(max_new_tokens=NEW))
    r.prefill_tokens = 1                       # one prompt per prefill forward
    try:
        split = r.generate(prompts, route=Route((0, 1, 1, 2, 3)), decoding=Decoding(max_new_tokens=NEW))
    finally:
        r.prefill_tokens = Runner(tiny(arch)).prefill_tokens
    assert [g.token_ids for g in split] == [g.token_ids for g in whole]
    for a, b in zip(split, whole):
        assert a.mean_logprob == pytest.approx(b.mean_logprob, abs=1e-5)


def test_repeated_layer_gets_its_own_cache_slot():
    lm = tiny("llama")
    route = (0, 1, 1, 3)
    with routing.installed(lm.arch, route):
        installed = lm.arch.layers_owner._modules[lm.arch.layers_attr]
        assert len(installed) == 4 and lm.arch.config.num_hidden_layers == 4
        assert [blk.self_attn.layer_idx for blk in installed] == [0, 1, 2, 3]
        assert installed[1].self_attn.q_proj is installed[2].self_attn.q_proj is lm.arch.layers[1].self_attn.q_proj
        cache = routing.new_cache(lm.arch)
        ids = lm.tokenizer(PROMPTS[0], return_tensors="pt").input_ids
        with torch.inference_mode():
            routing.forward_last_logits(lm.model, ids, torch.ones_like(ids), None, cache)
        assert len(cache.layers) == 4
        assert all(layer.keys.shape[-2] == ids.shape[1] for layer in cache.layers)
    assert lm.arch.layers[1].self_attn.layer_idx == 1


def _hand_loop_logits(lm, ids, route):
    """Embed, run the listed decoder layers in order (no cache), final norm, LM head."""
    m = lm.model
    assert m.config._attn_implementation == "sdpa"  # attention_mask=None then means causal
    pos = torch.arange(ids.shape[1])[None]
    if type(m).__name__ == "GPT2LMHeadModel":
        tr = m.transformer
        h = tr.wte(ids) + tr.wpe(pos)
        for i in route:
            h = tr.h[i](h, None, None, position_ids=pos)
        return m.lm_head(tr.ln_f(h))
    base = m.model
    h = base.embed_tokens(ids)
    pe = base.rotary_emb(h, pos)
    for i in route:
        h = base.layers[i](h, attention_mask=None, position_embeddings=pe, position_ids=pos)
    return m.lm_head(base.norm(h))


@pytest.mark.parametrize("arch", ["llama", "qwen3", "gpt2"])
def test_routed_forward_equals_hand_written_loop(arch):
    lm = tiny(arch)
    ids = lm.tokenizer(PROMPTS[2], return_tensors="pt").input_ids
    for route in [(1, 2, 3), (0, 0, 1, 3), (0, 1, 1, 2, 3, 3), (3, 2, 1, 0), (2,)]:
        with torch.inference_mode():
            want = _hand_loop_logits(lm, ids, route)
            with routing.installed(lm.arch, route):
                got = routing.forward_full_logits(lm.model, ids)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def stock_route_model(lm, route):
    """An independent reference: a stock model of the same class built with len(route) layers, layer p
    holding the weights of original layer route[p], per-layer config lists (layer types, dense-MLP
    layers) permuted the same way. Its own forward and `generate` (with its own cache) are the truth."""
    from transformers import AutoModelForCausalLM

    cfg = copy.deepcopy(lm.model.config)
    cfg.num_hidden_layers = len(route)
    if isinstance(cfg.__dict__.get("layer_types"), list):
        cfg.layer_types = [lm.arch.layer_types[i] for i in route]
    if getattr(cfg, "mlp_only_layers", None):
        orig = set(cfg.mlp_only_layers)
        cfg.mlp_only_layers = [p for p, i in enumerate(route) if i in orig]
    torch.manual_seed(123)
    ref = AutoModelForCausalLM.from_config(cfg).eval()
    prefix = next(n for n, mod in lm.model.named_modules() if mod is lm.arch.layers) + "."
    state = {}
    for key, value in lm.model.state_dict().items():
        if key.startswith(prefix):
            idx, rest = key[len(prefix):].split(".", 1)
            for p, i in enumerate(route):
                if i == int(idx):
                    state[f"{prefix}{p}.{rest}"] = value
        else:
            state[key] = value
    ref.load_state_dict(state, strict=True)
    return ref


@pytest.mark.parametrize("arch", ARCHS)
def test_route_equals_stock_model_built_from_those_layers(arch):
    """Per-position attention types (sliding stays sliding), cache slots and rotary all line up with a
    model that was simply built with the route's layers."""
    lm, r = tiny(arch), runner(arch)
    for route in [(0, 1, 1, 2, 3, 3), (1, 3, 2)]:
        ref = stock_route_model(lm, route)
        want, _ = hf_greedy(lm, PROMPTS, model=ref)
        got = r.generate(PROMPTS, route=Route(route), decoding=Decoding(max_new_tokens=NEW))
        assert [g.token_ids for g in got] == want, (arch, route)
        ids = lm.tokenizer(PROMPTS[2], return_tensors="pt").input_ids
        with torch.inference_mode():
            expect = ref(input_ids=ids).logits
            with routing.installed(lm.arch, route):
                routed = routing.forward_full_logits(lm.model, ids)
        torch.testing.assert_close(routed, expect, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------------ silencing

_OUT_PROJ = re.compile(r"(down_proj|c_proj|dense_4h_to_h)")


def zeroed_copy(model, arch, layer):
    m = copy.deepcopy(model)
    mlp = discover(m).mlp(layer)
    names = [n for n, _ in mlp.named_parameters() if _OUT_PROJ.search(n)]
    assert names, type(mlp).__name__
    with torch.no_grad():
        for n, p in mlp.named_parameters():
            if _OUT_PROJ.search(n):
                p.zero_()
    return m


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("mode", MODES)
def test_silencing_equals_zeroed_output_projection(arch, mode):
    lm, r = tiny(arch), runner(arch, mode)
    layer = 1
    zm = zeroed_copy(lm.model, lm.arch, layer)
    ids = lm.tokenizer(PROMPTS[2], return_tensors="pt").input_ids
    with torch.inference_mode():
        want = zm(input_ids=ids).logits
        with routing.installed(lm.arch, None, {layer}):
            got = routing.forward_full_logits(lm.model, ids)
        plain = lm.model(input_ids=ids).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(got, plain, atol=1e-3)
    ref, _ = hf_greedy(lm, PROMPTS, model=zm)
    gens = r.generate(PROMPTS, silenced=frozenset({layer}), decoding=Decoding(max_new_tokens=NEW))
    assert [g.token_ids for g in gens] == ref
    # composes with a route: every occurrence of the silenced layer is silenced
    route = (0, 1, 1, 3)
    zarch = discover(zm)
    with torch.inference_mode():
        with routing.installed(zarch, route):
            want = routing.forward_full_logits(zm, ids)
        with routing.installed(lm.arch, route, {layer}):
            got = routing.forward_full_logits(lm.model, ids)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------------ restore

def test_model_restored_after_calls_and_failures(monkeypatch):
    lm, r = tiny("gemma2"), runner("gemma2")
    before = fingerprint(lm)
    r.generate(PROMPTS, route=Route((0, 1, 1, 3)), silenced=frozenset({2}), decoding=Decoding(max_new_tokens=4))
    r.generate(PROMPTS, decoding=Decoding(max_new_tokens=4, temperature=1.0, top_p=0.9), seeds=[1, 2, 3])
    r.trace(PROMPTS[0], route=Route((1, 2, 3)), decoding=Decoding(max_new_tokens=3))
    assert_same(before, fingerprint(lm))

    calls = {"n": 0}
    real = routing.forward_last_logits

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("boom")
        return real(*a, **k)

    monkeypatch.setattr(routing, "forward_last_logits", flaky)
    with pytest.raises(RuntimeError, match="boom"):
        r.generate(PROMPTS, route=Route((0, 0, 1, 2, 3)), silenced=frozenset({0}),
                   decoding=Decoding(max_new_tokens=6))
    monkeypatch.undo()
    assert_same(before, fingerprint(lm))
    with pytest.raises(ReachError, match="out of range"):
        r.generate(PROMPTS, silenced=frozenset({7}))
    assert_same(before, fingerprint(lm))


# ------------------------------------------------------------------------------------------ decoding

@pytest.mark.parametrize("mode", MODES)
def test_sampling_is_seeded_per_prompt(mode):
    r = runner("llama", mode)
    dec = Decoding(max_new_tokens=NEW, temperature=1.0, top_p=0.9)
    together = r.generate(PROMPTS, decoding=dec, seeds=[11, 12, 13], batch_size=3)
    alone = [r.generate([p], decoding=dec, seeds=[s])[0] for p, s in zip(PROMPTS, [11, 12, 13])]
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]
    again = r.generate(PROMPTS, decoding=dec, seeds=[11, 12, 13], batch_size=2)
    assert [g.token_ids for g in again] == [g.token_ids for g in together]
    other = r.generate(PROMPTS, decoding=dec, seeds=[21, 22, 23])
    assert [g.token_ids for g in other] != [g.token_ids for g in together]
    for g in together:
        assert g.mean_logprob < 0 and g.new_tokens == len(g.token_ids)


@pytest.mark.parametrize("mode", MODES)
def test_stop_strings_eos_and_compute(mode):
    lm, r = tiny("qwen2"), runner("qwen2", mode)
    free = r.generate(PROMPTS, decoding=Decoding(max_new_tokens=12))
    # pick, per row, a character that the free run produces, and stop there
    texts = [g.text for g in free]
    stop = next(t[3] for t in texts if len(t) > 3)
    gens = r.generate(PROMPTS, route=Route((0, 1, 1, 2, 3)), decoding=Decoding(max_new_tokens=12, stop=(stop,)))
    for g in gens:
        assert stop not in g.text
        assert g.compute == 5 * (g.prompt_tokens + g.new_tokens)
        assert g.layers_executed == 5
    stopped = r.generate(PROMPTS, decoding=Decoding(max_new_tokens=12, stop=(stop,)))
    for f, s in zip(free, stopped):
        if stop in f.text:
            assert s.finish == "stop" and s.text == f.text[: f.text.index(stop)]
            assert s.new_tokens < f.new_tokens or f.finish != "length"
            assert s.token_ids == f.token_ids[: s.new_tokens]
        else:
            assert s.text == f.text
    prompt_len = len(lm.tokenizer(PROMPTS[0]).input_ids)
    assert free[0].prompt_tokens == prompt_len
    assert free[0].compute == 4 * (prompt_len + free[0].new_tokens)


@pytest.mark.parametrize("arch", ["gemma2", "gpt2"])
@pytest.mark.parametrize("mode", MODES)
def test_finished_rows_leave_the_batch_exactly(arch, monkeypatch, mode):
    """Rows that stop early are dropped from the batch (and the cache) once they are a quarter of it;
    the others go on unchanged, greedy and sampled (each row keeps its own generator, and finished rows
    still in the batch draw nothing from anyone's)."""
    r = runner(arch, mode)
    prompts = PROMPTS + ["1+1=", "abc", "Question: 7*8?"]
    for dec in (Decoding(max_new_tokens=12), Decoding(max_new_tokens=12, temperature=1.0)):
        free = r.generate(prompts, decoding=dec, seeds=list(range(len(prompts))), route=Route((0, 1, 1, 2, 3)))
        # a stop string that at least a quarter of the rows produce early and at least one row never does
        stop = next(ch for f in free for ch in f.text[:4]
                    if 4 * sum(ch in g.text[:6] for g in free) >= len(free) and any(ch not in g.text for g in free))
        calls = []
        real = routing.select_rows
        monkeypatch.setattr(routing, "select_rows", lambda c, i: (calls.append(len(i)), real(c, i)))
        gens = r.generate(prompts, decoding=replace(dec, stop=(stop,)), seeds=list(range(len(prompts))),
                          route=Route((0, 1, 1, 2, 3)))
        monkeypatch.undo()
        assert calls, "no row left the batch"
        for f, g in zip(free, gens):
            if stop in f.text:
                assert g.finish == "stop" and g.text == f.text[: f.text.index(stop)]
                assert g.token_ids == f.token_ids[: g.new_tokens]
            else:
                assert g.token_ids == f.token_ids and g.text == f.text


def test_out_of_memory_halves_the_batch(monkeypatch):
    r = runner("llama")
    real = r._generate_batch
    sizes = []

    def small_memory(ids, *a, **k):
        sizes.append(len(ids))
        if len(ids) > 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(ids, *a, **k)

    monkeypatch.setattr(r, "_generate_batch", small_memory)
    gens = r.generate(PROMPTS, decoding=Decoding(max_new_tokens=4), batch_size=4)
    assert sizes[:3] == [3, 2, 1] and len(gens) == 3
    assert r.batch_size_hint == 1
    sizes.clear()
    r.generate(PROMPTS, decoding=Decoding(max_new_tokens=2), batch_size=4)
    assert sizes == [1, 1, 1]          # later calls start at the size that fitted
    monkeypatch.undo()
    r.batch_size_hint = None
    assert [g.token_ids for g in gens] == [g.token_ids for g in r.generate(PROMPTS, decoding=Decoding(max_new_tokens=4))]


def test_a_capture_that_fails_without_a_message_is_one_note_and_decoding_goes_on(monkeypatch):
    """A CUDA graph capture that fails (here forced on a CPU, with an error that has no message) falls back to
    the same step run eagerly: the same tokens, and one note for the run naming the error by its type."""
    from reachtui.model.steppers import FullStepper

    r = runner("llama", "full")
    want = [g.token_ids for g in r.generate(PROMPTS, decoding=Decoding(max_new_tokens=NEW))]
    real_init = FullStepper.__init__

    def capturing(self, *a, **k):
        real_init(self, *a, **k)
        self.capture, self.checked = True, True       # as on a GPU, its host-sync check done

    def fails(self):
        raise RuntimeError()

    monkeypatch.setattr(FullStepper, "__init__", capturing)
    monkeypatch.setattr(FullStepper, "_capture", fails)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    r.capture = True
    assert [g.token_ids for g in r.generate(PROMPTS, decoding=Decoding(max_new_tokens=NEW))] == want
    assert r.take_notes() == ["decoding steps run eagerly: a CUDA graph could not be captured (RuntimeError)"]
    assert r.take_notes() == [] and not r.capture


def test_one_owner_at_a_time():
    r = runner("llama")
    assert isinstance(r.lock, type(threading.RLock()))
    want = [g.token_ids for g in r.generate(PROMPTS, route=Route((0, 1, 1, 3)), decoding=Decoding(max_new_tokens=4))]
    got = {}

    def job(k):
        route = Route((0, 1, 1, 3)) if k % 2 == 0 else None
        got[k] = [g.token_ids for g in r.generate(PROMPTS, route=route, decoding=Decoding(max_new_tokens=4))]

    threads = [threading.Thread(target=job, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] == got[2] == want
    assert got[1] == got[3] != want


# ------------------------------------------------------------------------------------------ demo model

@pytest.mark.skipif(not (DEMO_MODEL_DIR / "config.json").is_file(), reason="demo model not built yet")
def test_batched_equals_one_at_a_time_on_demo_model():
    from reachtui.model.load import load_model
    from reachtui.protocol import Protocol
    from reachtui.tasks import load_task

    lm = load_model("demo", device="cpu")
    r = Runner(lm)
    proto = Protocol()
    questions = load_task("demo").questions[:8]
    prompts = [proto.render_prompt(q.question, lm.tokenizer) for q in questions]
    dec = Decoding(max_new_tokens=proto.max_new_tokens, stop=proto.stop)
    batched = r.generate(prompts, decoding=dec, batch_size=4)
    single = [r.generate([p], decoding=dec, batch_size=1)[0] for p in prompts]
    assert [g.token_ids for g in batched] == [g.token_ids for g in single]
    assert [g.text for g in batched] == [g.text for g in single]
    route = Route((0, 1, 1) + tuple(range(2, lm.arch.num_layers)))
    routed = r.generate(prompts[:3], route=route, decoding=dec)
    routed_single = [r.generate([p], route=route, decoding=dec)[0] for p in prompts[:3]]
    assert [g.token_ids for g in routed] == [g.token_ids for g in routed_single]


def test_a_rendered_chat_prompt_gets_no_second_bos():
    """Chat templates write the BOS themselves; the runner must not add another one."""
    from reachtui.model.run import Runner

    class Tok:
        bos_token = "<s>"

        def __call__(self, text, add_special_tokens=True):
            ids = [ord(c) for c in text]
            return {"input_ids": ([1] if add_special_tokens else []) + ids}

    runner = Runner.__new__(Runner)
    runner.tokenizer = Tok()
    assert Runner.encode(runner, "hi") == [1, ord("h"), ord("i")]
    assert Runner.encode(runner, "<s>hi")[0] == ord("<")  # the template's own BOS, no extra 1 in front
    assert 1 not in Runner.encode(runner, "<s>hi")


def test_batch_size_suggestion_from_free_memory(monkeypatch):
    """CPU: 64. GPU: as many prompts as 80% of the free memory holds after the prefill's room, from the
    KV bytes a token takes at one position (measured) x (longest prompt + new tokens) x route length; no
    fixed cap (a GPU that holds thousands of rows decodes them in one batch)."""
    r = runner("llama")
    assert r.suggest_batch_size(PROMPTS, 8, 4) == (64, "cpu")
    kv = r.kv_bytes_per_token()
    assert kv == 2 * 2 * 8 * 4                     # K and V, 2 KV heads (GQA) of 8 dims, float32

    class Cuda:
        type = "cuda"

    monkeypatch.setattr(r, "device", Cuda())
    reserve = r.prefill_tokens * (4 * 32 + 3 * r.arch.config.intermediate_size) * 4 + r.share_bytes
    longest = max(len(r.encode(p)) for p in PROMPTS) + 8
    per_row = longest * 6 * kv + 3 * 4 * r.model.config.vocab_size
    big = 10 * reserve                            # no fixed cap: what the memory holds
    for free, want in ((reserve / 0.8 + 10.5 * per_row / 0.8, 10), (reserve / 0.8, 1),
                       (big, int((0.8 * big - reserve) // per_row))):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device, f=free: (int(f), int(4 * f)))
        size, why = r.suggest_batch_size(PROMPTS, 8, 6)
        assert size == want, (free, size, why)
    assert "GiB free" in why and f"{longest} tokens x 6 layers" in why


@pytest.mark.parametrize("arch", ["llama", "qwen3_moe", "gpt2"])
def test_interventions_over_the_same_prompts_pack_into_one_batch(arch, monkeypatch):
    """On a GPU (`packing`), generate_many decodes as many interventions as the memory holds as one mixed
    batch (here: two per batch): the tokens of one call per intervention, log-probs within float error;
    an out-of-memory error in a pack halves the packs (that one and the rest) and remembers the smaller size."""
    r = runner(arch, "full")
    r.packing = True
    prompts = PROMPTS + ["1+1=", "abc"]
    plans = [(Route(route), frozenset(sil)) for route, sil in SHARING]
    monkeypatch.setattr(r, "_rows_that_fit", lambda tokens, positions: (2 * len(prompts), "test"))
    packs = []
    real = Runner._decode_mixed
    monkeypatch.setattr(r, "_decode_mixed", lambda jobs, *a, **k: (packs.append(len(jobs)), real(r, jobs, *a, **k))[1])
    greedy = None
    for dec in (Decoding(max_new_tokens=NEW), Decoding(max_new_tokens=NEW, temperature=1.0)):
        seeds = [[10 * i + j for j in range(len(prompts))] for i in range(len(plans))]
        done = []
        many = r.generate_many(prompts, plans, decoding=dec, seeds=seeds, on_done=lambda i, g: done.append(i))
        greedy = greedy or many
        assert packs == [2, 2, 2, 1] and sorted(done) == list(range(len(plans)))
        packs.clear()
        r.packing = False
        for (route, sil), got, row_seeds in zip(plans, many, seeds):
            want = r.generate(prompts, route=route, silenced=sil, decoding=dec, seeds=row_seeds)
            assert [g.token_ids for g in got] == [g.token_ids for g in want], (arch, route, sil)
            assert [g.layers_executed for g in got] == [len(route)] * len(prompts)
            assert [g.mean_logprob for g in got] == pytest.approx([g.mean_logprob for g in want], abs=1e-5)
        r.packing = True

    def small_memory(jobs, *a, **k):
        packs.append(len(jobs))
        if len(jobs) > 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(r, jobs, *a, **k)

    monkeypatch.setattr(r, "_decode_mixed", small_memory)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    gens = r.generate_many(prompts, plans[:4], decoding=Decoding(max_new_tokens=NEW),
                           seeds=[[10 * i + j for j in range(len(prompts))] for i in range(4)])
    assert packs == [2, 1, 1, 1, 1] and r.backoff.pack_rows == len(prompts)   # the rest packed at the size learnt
    assert [[g.token_ids for g in x] for x in gens] == [[g.token_ids for g in x] for x in greedy[:4]]


def test_one_token_attention_ways_agree():
    """The ways a one-token step can attend (`routing.choose_decode_attention` keeps the fastest on a GPU):
    torch's SDPA on packed query heads and two batched matrix products give the same output."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(s, generator=g) for s in ((5, 2, 3, 8), (5, 2, 11, 8), (5, 2, 11, 8)))
    mask = torch.ones((5, 1, 1, 11), dtype=torch.bool)
    mask[:, :, :, :4] = torch.rand((5, 1, 1, 4), generator=g) > 0.5
    want = routing._attend(q, k, v, mask, None, None)
    for backend in ("bmm", "math"):
        torch.testing.assert_close(routing._attend(q, k, v, mask, None, backend), want, atol=1e-5, rtol=1e-5)
    # and the same as attending with every query head over its own expanded copy of the key/value heads
    full = torch.nn.functional.scaled_dot_product_attention(q.reshape(5, 6, 1, 8), k.repeat_interleave(3, 1),
                                                            v.repeat_interleave(3, 1), attn_mask=mask)
    torch.testing.assert_close(want.reshape(5, 6, 1, 8), full, atol=1e-5, rtol=1e-5)
