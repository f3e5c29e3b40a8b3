"""Exactness of the trace (`Runner.inspect`, `reachtui.engine.trace`): the logit lens along a route and the
divergence between two greedy outputs, against plain transformers.

- the lens at the last route position is the model's own logits: every step, the 12 architectures of the
  engine tests, the identity route and a route with a repeated layer;
- the lens at every route position p is the logits of a stock model physically re-stacked from the route's
  first p+1 layers (so at a repeated layer's second position: its second application, own KV slot);
- the divergence point, the top-5 under each output and the gold's rank equal those of plain transformers:
  `generate` and forward passes of the model and of a copy with the MLP's output projection zeroed;
- a model whose final norm cannot be found: the trace says so in one line and shows no lens.

Probabilities are compared within 1e-5 absolute: the routed, cached decode and a stock forward over the
whole sequence add the same float32 terms in a different order (test_engine compares logits at 1e-5 too),
and a probability moves less than its logit.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest

torch = pytest.importorskip("torch")

from engine_tiny import ARCHS  # noqa: E402
from test_engine import stock_route_model, tiny, zeroed_copy  # noqa: E402

from reachtui.assets import DEMO_MODEL_DIR  # noqa: E402
from reachtui.engine.trace import Cancelled, divergence, lens_rows, lens_summary, trace_json, trace_question  # noqa: E402
from reachtui.errors import ReachError  # noqa: E402
from reachtui.generation import Decoding  # noqa: E402
from reachtui.intervention import Intervention  # noqa: E402
from reachtui.model.lens import LensHead  # noqa: E402
from reachtui.model.run import Runner  # noqa: E402
from reachtui.protocol import Protocol  # noqa: E402
from reachtui.routes import Route  # noqa: E402

PROMPT = "12+7=? A:"
TOL = 1e-5
ROUTES = [(0, 1, 2, 3), (0, 1, 1, 2, 3)]        # the identity; layer 1 repeated


def _logits(model, ids) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1].float()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("route", ROUTES, ids=["identity", "repeated"])
def test_lens_along_the_route_equals_restacked_models(arch, route):
    lm = tiny(arch)
    r = Runner(lm)
    [t] = r.inspect(PROMPT, [Intervention(Route(route))], decoding=Decoding(max_new_tokens=5))
    assert t.lens_problem is None and t.route == route
    prompt_ids = r.encode(PROMPT)
    vocab = list(range(lm.model.config.vocab_size))
    stacked = {p: stock_route_model(lm, route[: p + 1]) for p in range(len(route))}
    whole = lm.model if route == ROUTES[0] else stacked[len(route) - 1]
    for step in range(len(t.token_ids)):
        context = prompt_ids + list(t.token_ids[:step])
        rows = r.lens(t.key, step, vocab)
        assert [row.layer for row in rows] == list(route)
        own = torch.softmax(_logits(whole, context), -1)
        # the last position: the model's own logits (for the repeated route, the re-stacked model's)
        torch.testing.assert_close(torch.tensor(rows[-1].probs), own, atol=TOL, rtol=0)
        assert rows[-1].top == int(own.argmax()) == t.token_ids[step]
        assert [rank for rank, _ in r.ranks(t.key, step, vocab)] == list(rows[-1].ranks)
        for p, row in enumerate(rows):     # every position: a model of the route's first p + 1 layers
            want = torch.softmax(_logits(stacked[p], context), -1)
            torch.testing.assert_close(torch.tensor(row.probs), want, atol=TOL, rtol=0, msg=f"{arch} {route} p={p}")


@pytest.mark.parametrize("arch", ARCHS)
def test_interventions_traced_together_read_as_traced_alone(arch):
    """Several interventions of one call decode as one mixed batch (plain models) or in turn: the tokens are
    those of each traced alone, and so are the log-probs and the lens (the same float32 terms, summed in
    batches of other shapes: within the tolerance above; log-probs, up to ~5 in size, within 1e-4)."""
    lm = tiny(arch)
    ivs = [Intervention(), Intervention(Route((0, 1, 1, 2, 3)), frozenset({2})), Intervention(None, frozenset({3}))]
    r = Runner(lm)
    together = r.inspect(PROMPT, ivs, decoding=Decoding(max_new_tokens=6))
    vocab = range(lm.model.config.vocab_size)
    for iv, t in zip(ivs, together):
        alone = Runner(lm)
        [a] = alone.inspect(PROMPT, [iv], decoding=Decoding(max_new_tokens=6))
        assert t.token_ids == a.token_ids and t.route == a.route and t.pieces == a.pieces
        assert t.lens_problem is None and a.lens_problem is None
        torch.testing.assert_close(torch.tensor(t.logprobs), torch.tensor(a.logprobs), atol=1e-4, rtol=0)
        for step in range(len(t.token_ids)):
            for got, want in zip(r.lens(t.key, step, vocab), alone.lens(a.key, step, vocab)):
                assert got.layer == want.layer
                torch.testing.assert_close(torch.tensor(got.probs), torch.tensor(want.probs), atol=TOL, rtol=0)
    assert r.inspect(PROMPT, ivs[::-1], decoding=Decoding(max_new_tokens=6)) == together[::-1]     # kept


def test_repeated_position_is_the_second_application():
    """Position 2 of 0,1,1,2,3 is layer 1 applied to its own first application's output, not a copy of it."""
    lm = tiny("llama")
    r = Runner(lm)
    [t] = r.inspect(PROMPT, [Intervention(Route((0, 1, 1, 2, 3)))], decoding=Decoding(max_new_tokens=3))
    rows = r.lens(t.key, 0, range(lm.model.config.vocab_size))
    assert rows[1].layer == rows[2].layer == 1
    assert max(abs(a - b) for a, b in zip(rows[1].probs, rows[2].probs)) > 1e-3


# ---- the divergence against plain transformers (the demo model, demo-0026, MLP 4) --------------------------

needs_demo = pytest.mark.skipif(not (DEMO_MODEL_DIR / "config.json").is_file(), reason="no demo model in assets/")


@functools.lru_cache(maxsize=None)
def demo_runner() -> Runner:
    from reachtui.model.load import load_model

    return Runner(load_model("demo", device="cpu"))


def demo_question(qid: str) -> dict:
    from reachtui.tasks import load_task

    q = next(q for q in load_task("demo").questions if q.id == qid)
    return dict(qid=q.id, question=q.question, gold=q.answer)


def _hf_greedy(model, ids, n) -> list[int]:
    out = model.generate(torch.tensor([ids]), max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    return out[0, len(ids):].tolist()


@needs_demo
def test_divergence_topk_and_gold_rank_equal_plain_transformers():
    r = demo_runner()
    protocol = Protocol()
    t = trace_question(r, protocol, demo_question("demo-0026"), Intervention(None, frozenset({4})))
    model = r.loaded.model
    silenced = zeroed_copy(model, r.arch, 4)
    prompt_ids = r.encode(t.prompt)
    outputs = {"default": model, "edited": silenced}
    tokens = {}
    for name, m in outputs.items():
        o = t.default if name == "default" else t.edited
        tokens[name] = _hf_greedy(m, prompt_ids, len(o.tokens))
        assert tokens[name] == list(o.tokens), name
    d = next(i for i, (a, b) in enumerate(zip(tokens["default"], tokens["edited"])) if a != b)
    assert t.divergence == d == divergence(t.default.tokens, t.edited.tokens) == 11
    assert t.position == d
    assert (t.default.pieces[d], t.edited.pieces[d]) == ("+", "-")
    assert t.gold_token.text == "1" and t.gold_position == 23
    for a in t.at:
        probs = torch.softmax(_logits(outputs[a.output], prompt_ids + tokens[a.output][:d]), -1)
        best = probs.topk(5)
        assert [x.id for x in a.top] == best.indices.tolist()
        torch.testing.assert_close(torch.tensor([x.prob for x in a.top], dtype=torch.float64), best.values.double(),
                                   atol=TOL, rtol=0)
        assert a.gold_rank == int((probs > probs[t.gold_token.id]).sum()) + 1
        assert a.gold_prob == pytest.approx(float(probs[t.gold_token.id]), abs=TOL)
        assert a.chosen.id == tokens[a.output][d] and a.lens[-1].top == a.chosen.id
        # every token's log-prob, as a forward over the whole output gives it
        with torch.inference_mode():
            logp = torch.log_softmax(outputs[a.output](input_ids=torch.tensor([prompt_ids + tokens[a.output]]))
                                     .logits[0, len(prompt_ids) - 1:-1].float(), -1)
        o = t.default if a.output == "default" else t.edited
        want = logp.gather(1, torch.tensor(tokens[a.output])[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(o.logprobs), want, atol=1e-4, rtol=0)
    assert [w.label for w in t.watched] == ["default", "edited", "gold"]


@needs_demo
def test_no_edit_reads_the_first_answer_token_and_move_reads_another():
    r = demo_runner()
    t = trace_question(r, Protocol(), demo_question("demo-0026"))
    assert t.edited is None and t.divergence is None
    assert t.position == t.gold_position == 23 and t.default.pieces[23] == "2"
    [a] = t.at
    assert [w.label for w in t.watched] == ["default", "gold"]
    assert a.gold_rank == r.ranks(t.default.traced.key, 23, [t.gold_token.id])[0][0]
    from reachtui.engine.trace import move

    m = move(r, t, 5)
    assert m.position == 5 and m.at[0].chosen.text == t.default.pieces[5]
    with pytest.raises(ReachError, match=r"^position 26 is out of range: the output has 26 tokens \(positions 0-25\)$"):
        move(r, t, 26)


@needs_demo
def test_a_newer_request_cancels_between_steps():
    r = demo_runner()
    with pytest.raises(Cancelled):
        trace_question(r, Protocol(), demo_question("demo-0027"), Intervention(None, frozenset({3})),
                       cancelled=lambda: True)


def test_lens_summary_finds_the_best_rank_and_the_last_top_k_position():
    from reachtui.generation import LensRow

    ranks = [9, 3, 1, 2, 7, 40]
    rows = [LensRow(p, layer, (rank,), (1.0 / rank,), 0) for p, (layer, rank) in enumerate(zip((0, 1, 1, 2, 3, 4), ranks))]
    s = lens_summary(rows, k=5)
    assert (s["best_rank"], s["best_position"], s["best_layer"]) == (1, 2, 1)
    assert (s["last_topk_position"], s["last_topk_layer"], s["final_rank"], s["pushed_out"]) == (3, 2, 40, True)


def test_no_final_norm_is_one_line_and_no_lens():
    lm = tiny("llama")
    blind = dataclasses.replace(lm, arch=dataclasses.replace(lm.arch, final_norm=None))
    r = Runner(blind)
    q = dict(qid="q1", question="12+7=?", gold="19")
    p = Protocol(max_new_tokens=6, stop=())
    t = trace_question(r, p, q, Intervention(Route((0, 1, 1, 2, 3))))
    assert t.lens_problem == "no logit lens: LlamaForCausalLM's final norm was not found"
    assert all(a.lens is None for a in t.at) and len(t.at) == 2
    assert trace_json(t)["lens_problem"] == t.lens_problem
    with pytest.raises(ReachError, match="final norm was not found"):
        r.lens(t.default.traced.key, 0, [1])
    rows = lens_rows(r, p, [q])
    assert rows[0]["best_rank"] is None and rows[0]["note"] in (t.lens_problem, "the output has no token where the gold would begin")


def test_a_head_that_does_not_give_the_models_logits_is_refused():
    lm = tiny("gemma2")                   # soft-capped logits: the lens must cap them too
    head = LensHead(lm.model, lm.arch)
    assert head.softcap == lm.model.config.final_logit_softcapping
    state = torch.randn(32)
    assert head.check(state, head(state), "Gemma2ForCausalLM") is None
    head.softcap = None
    line = head.check(state, torch.tanh(head(state) / 0.5) * 0.5, "Gemma2ForCausalLM")
    assert line.startswith("no logit lens: Gemma2ForCausalLM's final norm and unembedding do not give its own logits")
