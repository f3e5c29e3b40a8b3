"""Identity prefills kept across calls, for mixed calls (MCTS rounds, per-question routes).

Such calls prefill the same prompts again and again, each time under another route, and most routes
start like the identity (route[p] = p for their first positions). A prompt's identity prefill is recorded
once — every position's output and keys/values (`prefill.PrefillTap`) — and replayed into the prefill of
every later route for the positions it shares with the identity; only the rest is computed.

A recording is made for one prompt alone (a batch of one, no padding), so its numbers are the prompt's
own: a row's prefill does not depend on which prompts were recorded before, on what the store could keep,
or on its batch companions for the shared positions (a resumed run gets the same numbers as an
uninterrupted one). The store keeps recordings up to a byte budget and never evicts: a prompt that does
not fit is recorded again (to the depth it needs) whenever it is needed. `clear()` ends its use.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Recording:
    """One prompt's identity prefill over its first `depth` positions: per position its output [1, T, H]
    and keys/values [1, heads, T, head_dim]."""

    outputs: list
    kv: list

    @property
    def depth(self) -> int:
        return len(self.kv)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.outputs) + \
            sum(t.numel() * t.element_size() for kv in self.kv for t in kv)


class PrefixStore:
    """Recordings by prompt token ids, up to `budget` bytes (kept in arrival order, never evicted)."""

    def __init__(self, budget: int) -> None:
        self.budget = int(budget)
        self.used = 0
        self._recordings: dict[tuple[int, ...], Recording] = {}

    def __len__(self) -> int:
        return len(self._recordings)

    def get(self, ids, depth: int) -> Recording | None:
        """The prompt's recording if it holds at least `depth` positions."""
        rec = self._recordings.get(tuple(ids))
        return rec if rec is not None and rec.depth >= depth else None

    def fits(self, nbytes: int) -> bool:
        return self.used + nbytes <= self.budget

    def put(self, ids, rec: Recording) -> bool:
        """Keep `rec` if it fits the budget; returns whether it was kept."""
        key = tuple(ids)
        old = self._recordings.get(key)
        grow = rec.nbytes - (old.nbytes if old is not None else 0)
        if not self.fits(grow):
            return False
        self._recordings[key] = rec
        self.used += grow
        return True

    def clear(self) -> None:
        self._recordings.clear()
        self.used = 0


def padded(recordings: list[Recording], width: int, depth: int) -> tuple[list, list]:
    """The sub-batch form `PrefillTap` replays (per position: outputs [b, width, H] and keys/values [b,
    heads, width, head_dim]) of one recording per row, each left-padded with zeros to `width` (padding is
    masked; zeros keep it finite)."""
    outputs, kv = [], []
    for p in range(depth):
        outputs.append(_stack([r.outputs[p] for r in recordings], width))
        kv.append((_stack([r.kv[p][0] for r in recordings], width),
                   _stack([r.kv[p][1] for r in recordings], width)))
    return outputs, kv


def _stack(parts: list, width: int):
    """[1, ..., T_i, D] tensors (sequence in dim -2) left-padded to `width` and stacked on the batch dim."""
    first = parts[0]
    if len(parts) == 1 and first.shape[-2] == width:
        return first
    out = first.new_zeros((len(parts), *first.shape[1:-2], width, first.shape[-1]))
    for i, t in enumerate(parts):
        out[i, ..., width - t.shape[-2]:, :] = t[0]
    return out
