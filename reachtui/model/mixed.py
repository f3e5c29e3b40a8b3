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
    """The rows of a mixed decode batch that run the same block at one route position, and their cache."""

    rows: torch.Tensor          # ascending row indices in the batch
    block: nn.Module
    layer: GrowingLayer
    cache: object               # a DynamicCache whose slot `position` is `layer`


class MixedCache(DynamicCache):
    """The decode cache of rows that follow different plans (route, silenced MLPs), for one forward per step.

    At route position p the rows are grouped by what they run there (original layer, silenced or not); each
    group has its own cache layer (a GrowingLayer over its rows) and its own clone of the block, and runs on
    its rows only. A row whose route is shorter than p passes position p unchanged, as if its route had
    ended (the final norm and the LM head follow). Plan j's rows are `rows[j]` consecutive rows of the batch
    and of each of its groups, so its prefill writes straight into the groups' buffers (`plan_cache(j)`);
    `close(width)` ends the prefills. The same modules on the same rows as separate decodes, with fewer
    module calls per step."""

    def __init__(self, arch: Architecture, plans: list[tuple], rows: list[int], capacity: int):
        super().__init__()
        self.depth = max(len(route) for route, _ in plans)
        self.batch = sum(rows)
        starts = [sum(rows[:j]) for j in range(len(plans))]
        self.groups: list[list[_Group]] = []
        self._windows: list[list[WindowLayer]] = [[] for _ in plans]   # plan j's view of each position
        for p in range(self.depth):
            members: dict[tuple, list[int]] = {}
            for j, (route, silenced) in enumerate(plans):
                if p < len(route):
                    members.setdefault((route[p], route[p] in silenced), []).append(j)
            here = []
            for (layer, silenced), js in members.items():
                kv = GrowingLayer(capacity, batch=sum(rows[j] for j in js))
                at = 0
                for j in js:
                    self._windows[j].append(WindowLayer(kv, slice(at, at + rows[j]), 0))
                    at += rows[j]
                index = torch.cat([torch.arange(starts[j], starts[j] + rows[j]) for j in js])
                cache = DynamicCache()
                cache.layers = [kv] * (p + 1)
                here.append(_Group(index, position_block(arch, layer, p, silenced), kv, cache))
            self.groups.append(here)
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
        return self.groups[0][0].layer.n

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


class _MixedPosition(nn.Module):
    """Route position p of a MixedCache's batch: each group runs its block on its rows."""

    def __init__(self, mixed: MixedCache, position: int):
        super().__init__()
        self.mixed, self.position = mixed, position

    def forward(self, hidden_states, *args, **kwargs):
        mixed = self.mixed
        out = hidden_states
        for g in mixed.groups[self.position]:
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
                out = hidden_states.clone()      # rows of no group pass this position unchanged
            out.index_copy_(0, g.rows, res[0] if isinstance(res, tuple) else res)
        return out


@contextlib.contextmanager
def installed_mixed(arch: Architecture, mixed: MixedCache):
    """Install a mixed decode batch's positions in the model for the body of the `with` (plain models: every
    layer a full-attention layer of one type); restore everything after."""
    positions = nn.ModuleList([_MixedPosition(mixed, p) for p in range(mixed.depth)])
    with _swapped(arch, positions, lambda types: [types[0]] * mixed.depth):
        yield
