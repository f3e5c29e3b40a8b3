"""Prefilling a decode batch: its prompts left-padded in sub-batches (`Prompts`), each sub-batch's forward written
into the batch's cache (`prefill`), and the positions a route shares with the identity replayed from a recording
instead of computed (`PrefillTap`).

A route's first d positions that equal the identity's (route[p] = p, MLP p not silenced, a plain full-attention
cache layer: `shared_depth`) compute exactly what the identity computes there. A recording of the identity keeps
each such position's output and keys/values; a prefill under the route then writes the recorded keys/values into
its cache slot, hands the recorded output on, and computes only the rest: same inputs, same modules, same batch,
bit-identical to computing them. Two recordings serve: one of a whole batch's sub-batches, shared by the plans
that decode that batch in turn (`record`), and each prompt's own, recorded alone and kept across calls for mixed
batches (`own_recordings`, `reachtui.model.prefix`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from reachtui.model import routing
from reachtui.model.prefix import Recording, padded


class PrefillTap:
    """Wraps every route position's block (`routing.installed(tap=...)`): computes as usual, except while
    `recording` (positions < depth keep their output) or `replaying` (positions < depth write the recorded
    keys/values into the cache and return the recorded output without computing)."""

    def __init__(self) -> None:
        self._outputs: list | None = None          # recording: each position's output, as it is computed
        self._replay: tuple | None = None          # replaying: (depth, outputs, kv, cache)

    def wrap(self, p: int, inner):
        def forward(*args, **kwargs):
            if self._replay is not None and p < self._replay[0]:
                _, outputs, kv, cache = self._replay
                cache.layers[p].update(*kv[p])
                return outputs[p]
            out = inner(*args, **kwargs)
            if self._outputs is not None and p < len(self._outputs):
                self._outputs[p] = out
            return out

        return forward

    @contextlib.contextmanager
    def recording(self, depth: int):
        """For the body of the `with`: positions < `depth` keep their output in the list it yields."""
        self._outputs = [None] * depth
        try:
            yield self._outputs
        finally:
            self._outputs = None

    @contextlib.contextmanager
    def replaying(self, depth: int, record: tuple, cache):
        """For the body of the `with`: positions < `depth` replay `record` ((outputs, kv) of one sub-batch) into
        `cache`."""
        self._replay = (depth, *record, cache)
        try:
            yield
        finally:
            self._replay = None


def shared_depth(route, silenced, plain_positions: int) -> int:
    """How many leading positions of (route, silenced) compute exactly what the identity computes there, within
    the model's first `plain_positions` (plain full-attention layers, whose prefill can be replayed)."""
    d = 0
    for p, layer in enumerate(route):
        if layer != p or layer in silenced or p >= plain_positions:
            break
        d += 1
    return d


@dataclass
class Prompts:
    """A decode batch's distinct prompts (`rows`, sorted by length) as prefill sub-batches: `groups[g]` the rows
    of sub-batch g, `inputs[g]` its left-padded (input ids, attention mask, position ids); `width` the longest."""

    rows: list[list[int]]
    groups: list[range]
    inputs: list[tuple]
    width: int

    @classmethod
    def of(cls, runner, rows: list[list[int]], width: int | None = None) -> Prompts:
        """On a plain model, sub-batches of at most `runner.prefill_tokens` padded tokens, each padded to its own
        longest prompt (a CPU runs small ones much faster: they stay in cache); else one, padded to the longest.
        `width`: the batch's, where other prompts share it (a mixed batch); else the longest of `rows`."""
        width = width or max(len(x) for x in rows)
        groups = sub_batches(rows, runner.prefill_tokens) if runner.plain else [range(len(rows))]
        inputs = [pad(runner, [rows[u] for u in g], None if runner.plain else width) for g in groups]
        return cls(rows, groups, inputs, width)


def sub_batches(rows: list[list[int]], tokens: int) -> list[range]:
    """Consecutive sub-batches of `rows` (sorted by length: a sub-batch's last row is its longest), each at most
    `tokens` padded tokens (or one row)."""
    groups, lo = [], 0
    for u, x in enumerate(rows):
        if u > lo and (u + 1 - lo) * len(x) > tokens:
            groups.append(range(lo, u))
            lo = u
    groups.append(range(lo, len(rows)))
    return groups


def pad(runner, rows: list[list[int]], width: int | None = None) -> tuple:
    """Left-padded input ids, attention mask and position ids of `rows`, on the runner's input device."""
    b = len(rows)
    width = width or max(len(x) for x in rows)
    input_ids = torch.full((b, width), runner.pad_id, dtype=torch.long)
    attention = torch.zeros((b, width), dtype=torch.long)
    for r, x in enumerate(rows):
        input_ids[r, width - len(x):] = torch.tensor(x, dtype=torch.long)
        attention[r, width - len(x):] = 1
    position_ids = (attention.cumsum(-1) - 1).masked_fill(attention == 0, 0)
    return input_ids.to(runner.device), attention.to(runner.device), position_ids.to(runner.device)


def record(runner, prompts: Prompts, depth: int, tap: PrefillTap) -> list[tuple]:
    """The identity's first `depth` positions over every sub-batch of `prompts`: per sub-batch (outputs, kv)."""
    records = []
    with routing.installed(runner.arch, tuple(range(depth)), frozenset(), tap=tap), torch.inference_mode():
        for input_ids, attention, position_ids in prompts.inputs:
            cache = routing.new_cache(runner.arch, capacity=input_ids.shape[1])
            with tap.recording(depth) as outputs:
                routing.forward_last_logits(runner.model, input_ids, attention, position_ids, cache)
            records.append((outputs, routing.recorded_kv(cache, depth)))
    return records


def own_recordings(runner, prompts: Prompts, depth: int) -> list[tuple] | None:
    """Per sub-batch of `prompts`, the (outputs, kv) to replay for `depth` positions, from each prompt's own
    identity prefill: kept ones from `runner.prefixes`; the others recorded alone, to every position the
    identity can share if the store keeps them, else to `depth`. None where a block's output is not a plain
    tensor."""
    full = min(runner.num_layers, runner.plain_prefix)
    per_token = full * (runner.hidden_bytes() + runner.kv_bytes_per_token())
    recs = []
    for ids in prompts.rows:
        rec = runner.prefixes.get(ids, depth)
        if rec is None:
            keep = runner.prefixes.fits(per_token * len(ids))
            rec = record_alone(runner, ids, full if keep else depth)
            if rec is None:
                return None
            if keep:
                runner.prefixes.put(ids, rec)
        recs.append(rec)
    return [padded(recs[g.start:g.stop], x[0].shape[1], depth) for g, x in zip(prompts.groups, prompts.inputs)]


def record_alone(runner, ids: list[int], depth: int) -> Recording | None:
    """One prompt's identity prefill over `depth` positions, in a batch of its own."""
    [(outputs, kv)] = record(runner, Prompts([ids], [range(1)], [pad(runner, [ids])], len(ids)), depth, PrefillTap())
    if not all(isinstance(o, torch.Tensor) for o in outputs):
        return None
    return Recording(list(outputs), list(kv))


def prefill(runner, prompts: Prompts, cache, tap: PrefillTap | None = None, records: list | None = None,
            depth: int = 0):
    """Every prompt's forward under what is installed now, written into `cache` (a plain cache: each
    sub-batch through a window onto its rows, left-padded to `prompts.width`), the first `depth` positions
    replayed from `records` by `tap`; returns the batch's attention mask and last-position logits."""
    logits = []
    width = prompts.width
    for g, inputs, rec in zip(prompts.groups, prompts.inputs, records or [None] * len(prompts.groups)):
        target = routing.window(cache, slice(g.start, g.stop), width - inputs[0].shape[1]) if runner.plain else cache
        replay = tap.replaying(depth, rec, target) if tap is not None and depth else contextlib.nullcontext()
        with replay:
            logits.append(routing.forward_last_logits(runner.model, *inputs, target))
    if not runner.plain:
        return prompts.inputs[0][1], torch.cat(logits)
    routing.close_windows(cache, width)
    attention = torch.cat([torch.nn.functional.pad(a, (width - a.shape[1], 0)) for _, a, _ in prompts.inputs])
    return attention, torch.cat(logits)
