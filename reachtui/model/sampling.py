"""Choosing each row's next token: greedy, or sampled by the protocol's sampler version.

Sampler 2 (new runs) draws the whole batch at once, by inverse CDF: row r at decoding step t takes the
uniform `uniforms(seeds)[r, t]`, a counter-based hash (splitmix64) of its seed and the step computed with
numpy on the host, so the same seed gives the same noise on every device and in every batch; the token is
the first whose cumulative probability (softmax of logits / T in float32, in token-id order, or in
descending-probability order under top-p) exceeds u x the kept mass. A row's draw depends only on its seed,
its step and its logits, never on its batch companions or their number. On a CPU and a GPU the noise is
identical; the pick can differ only where float32 sums of the two devices round differently across u.

Sampler 1 (runs stored before version 2): one torch.Generator per row, `torch.multinomial` row by row.
Kept so that such runs resume and regenerate exactly.
"""

from __future__ import annotations

import numpy as np
import torch

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_STEP = np.uint64(0xD1B54A32D192ED03)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (uint64 arithmetic wraps modulo 2**64)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def uniforms(seeds, steps: int) -> np.ndarray:
    """[rows, steps] float32 uniforms in [0, 1): element (r, t) is row r's noise at decoding step t, a pure
    function of (seeds[r], t) with 24 random bits (exact in float32)."""
    s = np.asarray([int(x) & 0xFFFFFFFFFFFFFFFF for x in seeds], dtype=np.uint64)
    t = np.arange(1, steps + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = _mix(_mix(s * _GOLDEN)[:, None] + t[None, :] * _STEP)
    return ((x >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24))


def _nucleus(logits: torch.Tensor, temperature: float, top_p: float, *, stable: bool):
    """(probabilities, order): softmax(logits / temperature); under top-p (< 1) sorted in descending order
    (`order` the token ids by position; a stable sort when `stable`, as sampler 2 asks, else torch's default
    as sampler 1 drew) with the tokens past the nucleus zeroed, else in token-id order and `order` None."""
    probs = torch.softmax(logits / temperature, dim=-1)
    order = None
    if top_p < 1.0:
        probs, order = (probs.sort(dim=-1, descending=True, stable=True) if stable
                        else probs.sort(dim=-1, descending=True))
        drop = (probs.cumsum(dim=-1) - probs) > top_p
        probs = probs.masked_fill(drop, 0.0)
    return probs, order


def _back(nxt: torch.Tensor, order: torch.Tensor | None) -> torch.Tensor:
    """Positions picked in `_nucleus`'s order back to token ids."""
    if order is not None:
        nxt = order.gather(1, nxt[:, None])[:, 0]
    return nxt


def pick(logits: torch.Tensor, temperature: float, top_p: float, u: torch.Tensor | None) -> torch.Tensor:
    """Next token of every row (sampler 2): argmax when greedy (u is None or temperature <= 0), else the
    inverse-CDF draw of uniform u[r] from softmax(logits[r] / temperature), restricted to the top-p nucleus
    (the tokens of highest probability whose mass before them is at most top_p). `logits` are float32."""
    if u is None or temperature <= 0:
        return logits.argmax(dim=-1)
    probs, order = _nucleus(logits, temperature, top_p, stable=True)
    cdf = probs.cumsum(dim=-1)
    total = cdf[:, -1:]
    # strictly below the total, so the pick is a token of positive probability
    target = torch.minimum(u.view(-1, 1).to(cdf.dtype) * total, torch.nextafter(total, torch.zeros_like(total)))
    nxt = torch.searchsorted(cdf, target, right=True)[:, 0].clamp_(max=cdf.shape[-1] - 1)
    return _back(nxt, order)


def pick_v1(logits: torch.Tensor, temperature: float, top_p: float, gens) -> torch.Tensor:
    """Sampler 1: row j drawn with its own generator gens[j]; a row whose generator is None (finished,
    still in the batch) takes the argmax and draws nothing."""
    probs, order = _nucleus(logits, temperature, top_p, stable=False)
    picks = [probs[j].argmax(-1, keepdim=True) if g is None else torch.multinomial(probs[j], 1, generator=g)
             for j, g in enumerate(gens)]
    return _back(torch.cat(picks), order)
