"""Mixed decode batches: rows that follow different plans (route, silenced MLPs) decode with one forward per
step (`MixedCache`, `installed_mixed`). Plain full-attention models only."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn as nn
from transformers.cache_utils import DynamicCache, DynamicLayer

from reachtui.model.layers import Architecture
from reachtui.model.routing import GrowingLayer, WindowLayer, _swapped, position_block


class _Columns(DynamicLayer):
    """The layer a MixedCache shows the model: how many columns are written (for the mask and the positions);
    the rows' keys and values live in the groups' own layers."""

    def __init__(self, mixed: "MixedCache"):
        super().__init__()
        self.mixed = mixed
        self.is_initialized = True

    def get_seq_length(self) -> int:
        return self.mixed.columns()

    def update(self, *args, **kwargs):
        raise RuntimeError("a mixed decode batch is written through its groups")

    def batch_select_indices(self, indices) -> None:
        pass


@dataclass
class _Group:
    """The rows of a mixed decode batch that run the same block at one step, and their cache."""

    rows: torch.Tensor          # ascending row indices in the batch
    block: nn.Module
    layer: GrowingLayer
    cache: object               # a DynamicCache whose slot `step` is `layer`


def _merge(a: list, b: list) -> list:
    """A shortest common supersequence of `a` and `b` (both are subsequences of it)."""
    n, m = len(a), len(b)
    lcs = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for k in range(m - 1, -1, -1):
            lcs[i][k] = lcs[i + 1][k + 1] + 1 if a[i] == b[k] else max(lcs[i + 1][k], lcs[i][k + 1])
    out, i, k = [], 0, 0
    while i < n and k < m:
        if a[i] == b[k]:
            out.append(a[i])
            i, k = i + 1, k + 1
        elif lcs[i + 1][k] >= lcs[i][k + 1]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[k])
            k += 1
    return out + a[i:] + b[k:]


def schedule(plans: list) -> tuple[list[tuple], list[list[int]]]:
    """Steps (layer, silenced) that every plan's route follows in order — a common supersequence of the
    routes, merged longest route first (fewer steps than in plan order) — and the step of each plan's every
    route position (its first fit). Routes that differ by a skipped or repeated block share most steps: one
    block call per step serves all the rows that run that layer there."""
    seqs = [[(layer, layer in iv.silenced) for layer in iv.route] for iv in plans]
    steps: list = []
    for seq in sorted(seqs, key=len, reverse=True):
        steps = _merge(steps, seq)
    slots = []
    for seq in seqs:
        at, mine = 0, []
        for item in seq:
            while steps[at] != item:
                at += 1
            mine.append(at)
            at += 1
        slots.append(mine)
    return steps, slots


class MixedCache(DynamicCache):
    """The decode cache of rows that follow different plans (route, silenced MLPs), for one forward per step.

    The plans' routes are laid on one sequence of steps (`schedule`): at step t the rows whose route runs
    its layer there form a group, with its own cache layer (a GrowingLayer over its rows) and its own clone
    of the block, and run on their rows only; the other rows pass step t unchanged. Every row runs its own
    route, in order. Plan j's rows are `rows[j]` consecutive rows of the batch and of each of its groups, so
    its prefill (by route position) writes straight into the groups' buffers (`plan_cache(j)`);
    `close(width)` ends the prefills. The same modules on the same rows as separate decodes, with fewer
    module calls per step."""

    def __init__(self, arch: Architecture, plans: list, rows: list[int], capacity: int, full: bool = False):
        super().__init__()
        steps, slots = schedule(plans)
        self.depth = len(steps)
        self.batch = sum(rows)
        starts = [sum(rows[:j]) for j in range(len(plans))]
        self.groups: list[list[_Group]] = []
        # plan j's view of each of its route positions
        self._windows: list[list[WindowLayer | None]] = [[None] * len(iv.route) for iv in plans]
        for t, (layer, silenced) in enumerate(steps):
            js = [(j, mine.index(t)) for j, mine in enumerate(slots) if t in mine]
            if not js:                    # a step no route's first fit uses
                self.groups.append([])
                continue
            kv = GrowingLayer(capacity, batch=sum(rows[j] for j, _ in js), full=full)
            at = 0
            for j, p in js:
                self._windows[j][p] = WindowLayer(kv, slice(at, at + rows[j]), 0)
                at += rows[j]
            index = torch.cat([torch.arange(starts[j], starts[j] + rows[j]) for j, _ in js])
            cache = DynamicCache()
            cache.layers = [kv] * (t + 1)
            self.groups.append([_Group(index, position_block(arch, layer, t, silenced), kv, cache)])
        self.layers = [_Columns(self)] * self.depth

    def plan_cache(self, j: int):
        """A cache for plan j's prefill (inside its own installation) that writes into the groups' buffers."""
        cache = DynamicCache()
        cache.layers = list(self._windows[j])
        return cache

    def close(self, width: int) -> None:
        """After every plan's prefill: each group holds `width` positions; row indices go to the device."""
        for groups in self.groups:
            for g in groups:
                g.layer.n = width
                g.layer._views()
                g.rows = g.rows.to(g.layer.kbuf.device)
        self._windows = []

    def columns(self) -> int:
        return next(g.layer.get_seq_length() for groups in self.groups for g in groups)

    def batch_select_indices(self, indices) -> None:
        """Keep only the rows `indices` (ascending), in every group."""
        new = torch.full((self.batch,), -1, dtype=torch.long, device=indices.device)
        new[indices] = torch.arange(len(indices), device=indices.device)
        self.batch = len(indices)
        for p, groups in enumerate(self.groups):
            kept = []
            for g in groups:
                pos = new[g.rows]
                keep = pos >= 0
                if not bool(keep.any()):
                    continue
                if not bool(keep.all()):
                    g.layer.batch_select_indices(keep.nonzero()[:, 0])
                    pos = pos[keep]
                g.rows = pos
                kept.append(g)
            self.groups[p] = kept


def _take_rows(value, rows, batch: int):
    """`value` restricted to the batch rows `rows` where it has a batch dimension (tensors, tuples, dicts)."""
    if isinstance(value, torch.Tensor):
        return value.index_select(0, rows.to(value.device)) if value.dim() and value.shape[0] == batch else value
    if isinstance(value, (tuple, list)):
        return type(value)(_take_rows(v, rows, batch) for v in value)
    if isinstance(value, dict):
        return {k: _take_rows(v, rows, batch) for k, v in value.items()}
    return value


class _MixedStep(nn.Module):
    """Step t of a MixedCache's batch: its group (if any rows are left there) runs its block on its rows."""

    def __init__(self, mixed: MixedCache, step: int):
        super().__init__()
        self.mixed, self.step = mixed, step

    def forward(self, hidden_states, *args, **kwargs):
        mixed = self.mixed
        out = hidden_states
        for g in mixed.groups[self.step]:
            swap = lambda v, g=g: g.cache if v is mixed else v  # noqa: E731
            a = [swap(v) for v in args]
            kw = {k: swap(v) for k, v in kwargs.items()}
            if len(g.rows) == mixed.batch:      # every row runs this block here
                res = g.block(hidden_states, *a, **kw)
                out = res[0] if isinstance(res, tuple) else res
                continue
            res = g.block(hidden_states.index_select(0, g.rows), *_take_rows(a, g.rows, mixed.batch),
                          **_take_rows(kw, g.rows, mixed.batch))
            if out is hidden_states:
                out = hidden_states.clone()      # rows of no group pass this step unchanged
            out.index_copy_(0, g.rows, res[0] if isinstance(res, tuple) else res)
        return out


@contextlib.contextmanager
def installed_mixed(arch: Architecture, mixed: MixedCache, watch=None):
    """Install a mixed decode batch's steps in the model for the body of the `with` (plain models: every
    layer a full-attention layer of one type); restore everything after. `watch` (`lens.ResidualTap`) sees
    what each step hands on."""
    steps = nn.ModuleList([_MixedStep(mixed, t) for t in range(mixed.depth)])
    if watch is not None:
        for t, step in enumerate(steps):
            object.__setattr__(step, "forward", watch.wrap(t, step.forward))
    with _swapped(arch, steps, lambda types: [types[0]] * mixed.depth):
        yield
