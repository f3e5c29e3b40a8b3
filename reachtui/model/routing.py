"""The ONE module that touches transformers internals (covered by tests/test_engine.py).

How a route runs, exactly, with the model's own forward:

* For the length of a call, the model's decoder ModuleList is replaced by a ModuleList with one entry per
  route *position*. Entry p is a shallow clone of the original layer route[p] that shares its parameters
  and buffers, in which every submodule holding a `layer_idx` (the attention, sometimes the block) is
  cloned too, with `layer_idx = p`. So a layer repeated at positions p and q writes its keys/values to
  cache slots p and q: each application is a clean one. Everything else about the layer (its attention
  type, sliding window, scaling) is the original's.
* The decoder config gets `num_hidden_layers = len(route)` and, where it has them, `layer_types` permuted
  by the route: the model's loop (`layers[:num_hidden_layers]`), its per-layer mask / rotary selection
  (`config.layer_types[i]`) and `DynamicCache(config=...)` (which builds one cache layer per entry, sliding
  where the type is sliding) then follow the route. Rotary embeddings, the embedding, the final norm and
  the LM head are the model's own, computed once per forward.
* A silenced layer's clone gets its MLP wrapped so that its output is zeros (every occurrence).
* Everything is put back in `finally`: the original ModuleList object, the config attributes. The
  original modules are never mutated, and no hooks are installed. A model dispatched by accelerate
  (a device map) keeps its hooks: a clone's hook wrapper is rebound to call the clone
  (`_rebind_hooked_forward`).

Shared prefill (`PrefillTap`): a route's first d positions that equal the identity's (route[p] = p, MLP p not
silenced, a plain full-attention cache layer) compute exactly what the identity computes there. One
recording pass over the identity keeps each position's output and keys/values; a route then *replays*
positions < d (writes the recorded keys/values into its cache slot, returns the recorded output) and
computes only the rest. Same inputs, same modules, same batch: bit-identical to computing them.

Caches (`new_cache`): plain full-attention layers become `GrowingLayer`s, preallocated for the whole
generation and written in place (no torch.cat per step); `window` gives a sub-batch's prefill a view
onto the rows and columns of the decode batch's buffers, so prefills of different widths (each padded
only to its own longest prompt) land left-padded in one batch without a copy.

Mixed batches (`MixedCache`, `installed_mixed`): rows that follow different plans decode with one forward
per step. Position p of the installed list runs, for each group of rows that run the same block there, that
block's clone on those rows only (with their slice of the mask and rotary embeddings, and the group's own
cache layer); rows whose route has ended pass unchanged. Plain full-attention models only.

Version notes: transformers 5.24 calls the cache argument `cache` (`past_key_values` is deprecated);
earlier 5.x call it `past_key_values`. `cache_argument()` picks whichever the forward accepts.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import types
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn as nn
from transformers.cache_utils import DynamicCache, DynamicLayer

from reachtui.errors import ReachError
from reachtui.model.layers import Architecture

_MISSING = object()


class ZeroedOutput(nn.Module):
    """Runs the wrapped block and returns zeros of its output's shape (the first element of a tuple)."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        out = self.inner(*args, **kwargs)
        if isinstance(out, tuple):
            return (torch.zeros_like(out[0]), *out[1:])
        return torch.zeros_like(out)


def _has_layer_idx(module: nn.Module) -> bool:
    return isinstance(module.__dict__.get("layer_idx"), int)


def _needs_clone(module: nn.Module) -> bool:
    return any(_has_layer_idx(m) for m in module.modules())


def _rebind_hooked_forward(new: nn.Module, module: nn.Module) -> None:
    """Make a clone's instance-level `forward` call the clone, not the original.

    accelerate's hooks (`device_map=...`, `dispatch_model`, `cpu_offload`) set `module._hf_hook`, keep the
    class forward bound to the module as `module._old_forward`, and put an instance attribute
    `module.forward = partial(new_forward, module)` in front of it. `copy.copy` copies both, so calling the
    clone would run the ORIGINAL module's forward (its `layer_idx`, its cache slot). Here both are rebound
    to the clone; the hook object itself (devices, offloaded weights) is shared, as the parameters are.
    An instance `forward` of any other shape cannot be rebound safely and is refused.
    """
    d = module.__dict__
    if "forward" not in d and "_old_forward" not in d:
        return

    def rebound(f):
        if isinstance(f, types.MethodType) and f.__self__ is module:
            return types.MethodType(f.__func__, new)
        if isinstance(f, functools.partial) and f.args and f.args[0] is module:
            return functools.partial(f.func, new, *f.args[1:], **f.keywords)
        return None

    old = d.get("_old_forward")
    if old is not None:
        old = rebound(old)
        if old is None:
            raise ReachError(f"cannot route this model: {type(module).__name__} has an instance forward "
                             "(_old_forward) that is not a method of the module")
        object.__setattr__(new, "_old_forward", old)
    fwd = d.get("forward")
    if fwd is not None:
        fwd = rebound(fwd)
        if fwd is None:
            raise ReachError(f"cannot route this model: {type(module).__name__} has an instance forward "
                             "that reachtui cannot rebind to a clone (not an accelerate hook)")
        if isinstance(fwd, functools.partial):
            functools.update_wrapper(fwd, old if old is not None else type(module).forward.__get__(new))
        object.__setattr__(new, "forward", fwd)


def _clone(module: nn.Module, position: int) -> nn.Module:
    """Shallow clone sharing parameters/buffers; submodules that (transitively) hold `layer_idx` are
    cloned too, and every `layer_idx` is set to `position`. The original is not touched."""
    new = copy.copy(module)
    object.__setattr__(new, "_modules", dict(module._modules))
    _rebind_hooked_forward(new, module)
    if _has_layer_idx(module):
        object.__setattr__(new, "layer_idx", position)
    for name, child in module._modules.items():
        if child is not None and _needs_clone(child):
            new._modules[name] = _clone(child, position)
    return new


def position_block(arch: Architecture, layer: int, position: int, silenced: bool = False) -> nn.Module:
    """Original layer `layer` as it runs at route position `position` (cache slot `position`), its MLP
    zeroed if `silenced`."""
    if _needs_clone(arch.layers[layer]) is False:
        # nothing in this block records a layer index: it cannot address a cache slot per position
        raise ReachError(f"unsupported model {arch.model_class}: its decoder layers carry no layer_idx")
    block = _clone(arch.layers[layer], position)
    if silenced:
        attr = arch.mlp_attrs[layer] if arch.mlp_attrs else arch.mlp_attr
        new_modules = dict(block._modules)
        new_modules[attr] = ZeroedOutput(arch.layers[layer]._modules[attr])
        object.__setattr__(block, "_modules", new_modules)
    return block


def route_layers(arch: Architecture, route, silenced=frozenset()) -> nn.ModuleList:
    """One clone per route position (cache slot p for position p), silenced MLPs zeroed."""
    return nn.ModuleList([position_block(arch, i, p, i in silenced) for p, i in enumerate(route)])


class PrefillTap:
    """Switchable behaviour of a route's positions during one prefill forward (see the module docstring).

    mode None: compute as usual. "record": compute, and keep the output of positions < depth in
    `outputs`. "replay": positions < depth write `kv[p]` into `cache` slot p and return `outputs[p]`
    without computing."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self.depth = 0
        self.outputs: list = []
        self.kv: list = []
        self.cache = None

    def wrap(self, p: int, inner):
        def forward(*args, **kwargs):
            if self.mode == "replay" and p < self.depth:
                keys, values = self.kv[p]
                self.cache.layers[p].update(keys, values)
                return self.outputs[p]
            out = inner(*args, **kwargs)
            if self.mode == "record" and p < self.depth:
                self.outputs[p] = out
            return out

        return forward


def identity_prefix(route, silenced=frozenset()) -> int:
    """How many leading positions of (route, silenced) compute exactly what the identity computes there."""
    d = 0
    for p, layer in enumerate(route):
        if layer != p or layer in silenced:
            break
        d += 1
    return d


@contextlib.contextmanager
def installed(arch: Architecture, route=None, silenced=frozenset(), *, force: bool = False,
              tap: PrefillTap | None = None):
    """Install (route, silenced) in the model for the body of the `with`; restore everything after.

    The identity route with nothing silenced leaves the model untouched (unless `force`, for tests, or a
    `tap`, whose wrappers go on every position).
    """
    n = arch.num_layers
    layers = tuple(range(n)) if route is None else tuple(route)
    silenced = frozenset(silenced)
    if layers == tuple(range(n)) and not silenced and not force and tap is None:
        yield
        return
    new_layers = route_layers(arch, layers, silenced)
    if tap is not None:
        for p, block in enumerate(new_layers):
            object.__setattr__(block, "forward", tap.wrap(p, block.forward))
    with _swapped(arch, new_layers, lambda types: [types[i] for i in layers]):
        yield


@contextlib.contextmanager
def _swapped(arch: Architecture, new_layers: nn.ModuleList, types_of):
    """The model runs `new_layers` (one per position) for the body of the `with`: the decoder's ModuleList,
    `config.num_hidden_layers` and `config.layer_types` (as `types_of(original types)`) are swapped in, and
    put back after, also when the body fails."""
    owner, attr, config = arch.layers_owner, arch.layers_attr, arch.config
    if owner._modules.get(attr) is not arch.layers:
        raise ReachError("the model is already being routed by another call (one owner at a time)")
    saved_n = config.num_hidden_layers
    saved_types = config.__dict__.get("layer_types", _MISSING)
    try:
        setattr(owner, attr, new_layers)
        config.num_hidden_layers = len(new_layers)
        if isinstance(saved_types, (list, tuple)) and len(saved_types) == arch.num_layers:
            config.layer_types = types_of(saved_types)
        yield
    finally:
        setattr(owner, attr, arch.layers)
        config.num_hidden_layers = saved_n
        if saved_types is _MISSING:
            config.__dict__.pop("layer_types", None)
        else:
            config.__dict__["layer_types"] = saved_types


@lru_cache(maxsize=64)
def _forward_params(cls) -> frozenset[str]:
    return frozenset(inspect.signature(cls.forward).parameters)


def cache_argument(model) -> str:
    params = _forward_params(type(model))
    if "cache" in params:
        return "cache"
    return "past_key_values"


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer with room for `capacity` positions, allocated once (for `batch` rows,
    else the first write's) and written in place: a decoding step copies one position, not the whole
    cache. The first write returns the states as computed, like DynamicLayer's."""

    def __init__(self, capacity: int, batch: int | None = None):
        super().__init__()
        self.capacity = int(capacity)
        self.batch = batch
        self.n = 0

    def lazy_initialization(self, key_states, value_states) -> None:
        b = self.batch or key_states.shape[0]
        k, v = key_states, value_states
        # uninitialised: every position is written before it is read (windows zero their left padding)
        self.kbuf = k.new_empty((b, k.shape[1], self.capacity, k.shape[-1]))
        self.vbuf = v.new_empty((b, v.shape[1], self.capacity, v.shape[-1]))
        self.device = k.device
        self.is_initialized = True

    def _views(self) -> None:
        self.keys, self.values = self.kbuf[:, :, : self.n], self.vbuf[:, :, : self.n]

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, s = self.n, key_states.shape[-2]
        if start + s > self.capacity:
            raise RuntimeError(f"cache layer full ({self.capacity} positions)")
        self.kbuf[:, :, start:start + s] = key_states
        self.vbuf[:, :, start:start + s] = value_states
        self.n = start + s
        self._views()
        if start == 0:
            return key_states, value_states
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.n

    def batch_select_indices(self, indices) -> None:
        if self.is_initialized:   # only the written positions are copied
            kbuf = self.kbuf.new_empty((len(indices), *self.kbuf.shape[1:]))
            vbuf = self.vbuf.new_empty((len(indices), *self.vbuf.shape[1:]))
            torch.index_select(self.kbuf[:, :, : self.n], 0, indices, out=kbuf[:, :, : self.n])
            torch.index_select(self.vbuf[:, :, : self.n], 0, indices, out=vbuf[:, :, : self.n])
            self.kbuf, self.vbuf = kbuf, vbuf
            self._views()


class WindowLayer(GrowingLayer):
    """Rows `rows` and columns `start:` of a parent GrowingLayer's buffers, for one sub-batch's prefill."""

    def __init__(self, parent: GrowingLayer, rows: slice, start: int):
        super().__init__(parent.capacity - start)
        self.parent, self.rows, self.start = parent, rows, start

    def lazy_initialization(self, key_states, value_states) -> None:
        if not self.parent.is_initialized:
            self.parent.lazy_initialization(key_states, value_states)
        self.parent.kbuf[self.rows, :, : self.start].zero_()    # left padding: masked, but never NaN
        self.parent.vbuf[self.rows, :, : self.start].zero_()
        self.kbuf = self.parent.kbuf[self.rows, :, self.start:]
        self.vbuf = self.parent.vbuf[self.rows, :, self.start:]
        self.device = key_states.device
        self.is_initialized = True


def new_cache(arch: Architecture, capacity: int | None = None, batch: int | None = None):
    """A DynamicCache sized for what is installed now (call inside `installed`); with `capacity`, its
    plain full-attention layers are GrowingLayers of that many positions (for `batch` rows)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=arch.config)
    if capacity is not None:
        cache.layers = [GrowingLayer(capacity, batch) if type(layer) is DynamicLayer else layer
                        for layer in cache.layers]
    return cache


def plain_positions(cache) -> int:
    """How many leading layers of `cache` are GrowingLayers (positions whose prefill can be replayed)."""
    n = 0
    for layer in cache.layers:
        if not isinstance(layer, GrowingLayer):
            break
        n += 1
    return n


def all_growing(cache) -> bool:
    return plain_positions(cache) == len(cache.layers)


def window(cache, rows: slice, start: int):
    """A cache for the sub-batch `rows` of `cache` (all GrowingLayers) whose positions start at column
    `start`: what a prefill writes there lands in `cache`'s buffers. Close with `close_windows`."""
    from transformers import DynamicCache

    sub = DynamicCache()
    sub.layers = [WindowLayer(layer, rows, start) for layer in cache.layers]
    return sub


def close_windows(cache, width: int) -> None:
    """After the windows' prefills: `cache` holds `width` positions (left-padded rows)."""
    for layer in cache.layers:
        layer.n = width
        layer._views()


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


def recorded_kv(cache, depth: int) -> list:
    """The keys/values of a recording pass's first `depth` positions."""
    return [(layer.keys, layer.values) for layer in cache.layers[:depth]]


def select_rows(cache, index) -> None:
    """Keep only the batch rows `index` (a LongTensor) in every layer of the cache, in place."""
    cache.batch_select_indices(index)


def forward_last_logits(model, input_ids, attention_mask, position_ids, cache) -> torch.Tensor:
    """One cached forward step; returns the logits of the last position, [batch, vocab]."""
    kwargs = {cache_argument(model): cache}
    if "logits_to_keep" in _forward_params(type(model)):
        kwargs["logits_to_keep"] = 1
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=True,
        return_dict=True,
        **kwargs,
    )
    return out.logits[:, -1, :]


def forward_full_logits(model, input_ids, attention_mask=None, position_ids=None) -> torch.Tensor:
    """A forward over the whole sequence without a cache; returns all logits [batch, seq, vocab]."""
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=False,
        return_dict=True,
    )
    return out.logits
