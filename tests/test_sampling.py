"""The sampler (reachtui.model.sampling): sampler 2 draws the whole batch at once, from noise that is a pure
function of (seed, step) computed on the host; a row's draw never depends on its batch companions; it
draws from the right distribution and never outside the top-p nucleus. Sampler 1 (older runs) is kept."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from reachtui.generation import Decoding  # noqa: E402
from reachtui.model.sampling import pick, pick_v1, uniforms  # noqa: E402


def test_uniforms_are_a_fixed_function_of_seed_and_step():
    u = uniforms([0, 1, 2**62 + 5], 4)
    assert u.shape == (3, 4) and u.dtype == np.float32
    assert ((u >= 0) & (u < 1)).all()
    # the noise itself is part of the sampler's definition (sampler 2): these literals guard it
    assert u[0].tolist() == [0.5079605579376221, 0.4224191904067993, 0.3771812915802002, 0.4763246774673462]
    assert np.array_equal(uniforms([1], 4)[0], u[1])                      # a row's noise is its own
    assert np.array_equal(uniforms([2**62 + 5, 0], 6)[:, :4], u[[2, 0]])  # and does not depend on the steps asked
    assert len({float(x) for x in uniforms(list(range(1000)), 1)[:, 0]}) > 990
    assert abs(float(uniforms(list(range(20000)), 1).mean()) - 0.5) < 0.01


def test_a_rows_draw_depends_on_its_seed_step_and_logits_only():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(9, 50, generator=g) * 3
    seeds = list(range(100, 109))
    u = torch.from_numpy(uniforms(seeds, 3))
    for top_p in (1.0, 0.8):
        together = pick(logits, 0.7, top_p, u[:, 2])
        alone = torch.cat([pick(logits[i: i + 1], 0.7, top_p, u[i: i + 1, 2]) for i in range(9)])
        assert torch.equal(together, alone)
        shuffled = [4, 0, 8, 2]
        assert torch.equal(pick(logits[shuffled], 0.7, top_p, u[shuffled, 2]), together[shuffled])
    assert torch.equal(pick(logits, 0.0, 1.0, u[:, 0]), logits.argmax(-1))
    assert torch.equal(pick(logits, 1.0, 1.0, None), logits.argmax(-1))


def test_draws_follow_the_tempered_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -30.0]])
    n = 20000
    u = torch.from_numpy(uniforms(range(n), 1))[:, 0]
    got = pick(logits.expand(n, -1), 0.8, 1.0, u)
    p = torch.softmax(logits[0] / 0.8, -1)
    counts = torch.bincount(got, minlength=5).double()
    chi2 = float((((counts - n * p) ** 2) / (n * p).clamp_min(1e-9))[:4].sum())
    assert chi2 < 20, (counts.tolist(), (n * p).tolist())     # 3 degrees of freedom: p < 0.001 above 16.3
    assert counts[4] == 0                                      # (probability ~1e-16)


def test_top_p_never_draws_outside_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    u = torch.from_numpy(uniforms(range(4000), 1))[:, 0]
    got = pick(logits.expand(4000, -1), 1.0, 0.7, u)          # nucleus: 0.5 (+0.3: mass before it 0.5 <= 0.7)
    assert set(got.tolist()) == {0, 1}
    share = float((got == 0).double().mean())
    assert abs(share - 0.5 / 0.8) < 0.03
    top = pick(logits.expand(50, -1), 1.0, 0.4, u[:50])        # only the most probable token
    assert set(top.tolist()) == {0}


def test_a_zero_probability_token_is_never_drawn_even_at_u_near_one():
    logits = torch.tensor([[0.0, 0.0, float("-inf"), float("-inf")]])
    u = torch.tensor([1.0 - 2.0 ** -24, 0.0, 0.5])
    got = pick(logits.expand(3, -1), 1.0, 1.0, u)
    assert got.tolist() == [1, 0, 1]


def test_sampler_1_draws_row_by_row_with_its_generators():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 20, generator=g)
    gens = [torch.Generator().manual_seed(s) for s in (5, 6, 7)]
    got = pick_v1(logits, 1.0, 1.0, gens)
    probs = torch.softmax(logits, -1)
    want = [int(torch.multinomial(probs[j], 1, generator=torch.Generator().manual_seed(s))) for j, s in
            enumerate((5, 6, 7))]
    assert got.tolist() == want
    assert pick_v1(logits, 1.0, 1.0, [None, None, None]).tolist() == logits.argmax(-1).tolist()


def test_decoding_carries_the_protocols_sampler():
    from reachtui.protocol import Protocol

    assert Decoding().sampler == 2
    assert Decoding.of(Protocol(sampler=1)).sampler == 1 and Decoding.of(Protocol()).sampler == 2
    assert math.isfinite(Decoding().top_p)
