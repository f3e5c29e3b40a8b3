"""How a route runs, exactly, with the model's own forward: installing a route (`installed`) and its caches
(`new_cache`); the replayed identity prefill is in `prefill.py`, mixed decode batches in `mixed.py`. With
`mixed.py`, the only code that touches transformers internals (covered by tests/test_engine.py).

Version notes: transformers 5.24 calls the cache argument `cache` (`past_key_values` is deprecated);
earlier 5.x call it `past_key_values`. `cache_argument()` picks whichever the forward accepts.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import types
from functools import lru_cache

import torch
import torch.nn as nn
from transformers.cache_utils import DynamicLayer

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

    done = {}
    for attr, why in (("_old_forward", "(_old_forward) that is not a method of the module"),
                      ("forward", "that reachtui cannot rebind to a clone (not an accelerate hook)")):
        if d.get(attr) is None:
            continue
        f = done[attr] = rebound(d[attr])
        if f is None:
            raise ReachError(f"cannot route this model: {type(module).__name__} has an instance forward {why}")
        if attr == "forward" and isinstance(f, functools.partial):
            old = done.get("_old_forward")
            functools.update_wrapper(f, old if old is not None else type(module).forward.__get__(new))
        object.__setattr__(new, attr, f)


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


@contextlib.contextmanager
def installed(arch: Architecture, route=None, silenced=frozenset(), *, force: bool = False, tap=None, watch=None):
    """Install (route, silenced) in the model for the body of the `with`; restore everything after.

    For the length of a call, the model's decoder ModuleList is replaced by a ModuleList with one entry per
    route *position*. Entry p is a shallow clone of the original layer route[p] that shares its parameters
    and buffers, in which every submodule holding a `layer_idx` (the attention, sometimes the block) is
    cloned too, with `layer_idx = p`. So a layer repeated at positions p and q writes its keys/values to
    cache slots p and q: each application is a clean one. Everything else about the layer (its attention
    type, sliding window, scaling) is the original's. The decoder config gets `num_hidden_layers =
    len(route)` and, where it has them, `layer_types` permuted by the route: the model's loop, its
    per-layer mask / rotary selection and `DynamicCache(config=...)` then follow the route. A silenced
    layer's clone gets its MLP wrapped so that its output is zeros (every occurrence). Everything is put
    back in `finally`; the original modules are never mutated and no hooks are installed (a model
    dispatched by accelerate keeps its hooks: a clone's hook wrapper is rebound to call the clone).

    The identity route with nothing silenced leaves the model untouched (unless `force`, for tests, or a
    `tap` or a `watch`, whose wrappers go on every position). `tap` (`reachtui.model.prefill.PrefillTap`)
    replays recorded positions; `watch` (`reachtui.model.lens.ResidualTap`) sees what each position hands on,
    replayed or computed.
    """
    n = arch.num_layers
    layers = tuple(range(n)) if route is None else tuple(route)
    silenced = frozenset(silenced)
    if layers == tuple(range(n)) and not silenced and not force and tap is None and watch is None:
        yield
        return
    new_layers = route_layers(arch, layers, silenced)
    for wrapper in (tap, watch):
        if wrapper is not None:
            for p, block in enumerate(new_layers):
                object.__setattr__(block, "forward", wrapper.wrap(p, block.forward))
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


class Clock:
    """Where a full-capacity decode writes: `column`, a [1] device tensor the captured step advances in
    place, and `n`, the columns written (kept on the host for `get_seq_length`)."""

    def __init__(self, column, n: int) -> None:
        self.column, self.n = column, n


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer with room for `capacity` positions, allocated once (for `batch` rows,
    else the first write's) and written in place: a decoding step copies one position, not the whole
    cache. The first write returns the states as computed, like DynamicLayer's.

    `full`: the buffers start as zeros, and once a `Clock` is set a decoding step writes its position at
    the clock's device-side column (`index_copy_`) and attends to every column (the mask hides those not
    yet written): no shape or host value changes from step to step, so the step can be captured as a
    CUDA graph (`reachtui.model.steppers`)."""

    def __init__(self, capacity: int, batch: int | None = None, full: bool = False):
        super().__init__()
        self.capacity = int(capacity)
        self.batch = batch
        self.full = full
        self.clock: Clock | None = None
        self.n = 0

    def lazy_initialization(self, key_states, value_states) -> None:
        b = self.batch or key_states.shape[0]
        k, v = key_states, value_states
        # growing: uninitialised, every position is written before it is read (windows zero their left
        # padding); full: every column is read (masked), so it must be finite from the start
        alloc = torch.zeros if self.full else torch.empty
        self.kbuf = alloc((b, k.shape[1], self.capacity, k.shape[-1]), dtype=k.dtype, device=k.device)
        self.vbuf = alloc((b, v.shape[1], self.capacity, v.shape[-1]), dtype=v.dtype, device=v.device)
        self.device = k.device
        self.is_initialized = True

    def _views(self) -> None:
        self.keys, self.values = self.kbuf[:, :, : self.n], self.vbuf[:, :, : self.n]

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if self.clock is not None:      # full-capacity decoding: one column, at the clock's
            self.kbuf.index_copy_(2, self.clock.column, key_states)
            self.vbuf.index_copy_(2, self.clock.column, value_states)
            return self.kbuf, self.vbuf
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
        return self.clock.n if self.clock is not None else self.n

    def batch_select_indices(self, indices) -> None:
        if not self.is_initialized:
            return
        if self.full:                   # every column is read: all of them move
            self.kbuf, self.vbuf = self.kbuf.index_select(0, indices), self.vbuf.index_select(0, indices)
        else:                           # only the written positions are copied
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


def new_cache(arch: Architecture, capacity: int | None = None, batch: int | None = None, full: bool = False):
    """A DynamicCache sized for what is installed now (call inside `installed`); with `capacity`, its
    plain full-attention layers are GrowingLayers of that many positions (for `batch` rows), preallocated
    for the whole generation and written in place (no torch.cat per step; `full`: see GrowingLayer).
    `window` gives a sub-batch's prefill a view onto the decode batch's buffers, so prefills of different
    widths (each padded only to its own longest prompt) land left-padded in one batch without a copy."""
    from transformers import DynamicCache

    cache = DynamicCache(config=arch.config)
    if capacity is not None:
        cache.layers = [GrowingLayer(capacity, batch, full) if type(layer) is DynamicLayer else layer
                        for layer in cache.layers]
    return cache


def set_clock(cache, clock: Clock) -> None:
    """Full-capacity decoding from here on (`clock`) for every GrowingLayer of `cache` (a DynamicCache, or a
    mixed batch's cache with groups)."""
    groups = getattr(cache, "groups", None)
    layers = [g.layer for step in groups for g in step] if groups is not None else \
        [layer for layer in cache.layers if isinstance(layer, GrowingLayer)]
    for layer in layers:
        layer.clock = clock


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
    return _logits(model, input_ids, attention_mask, position_ids, use_cache=True, **kwargs)[:, -1, :]


def forward_full_logits(model, input_ids, attention_mask=None, position_ids=None) -> torch.Tensor:
    """A forward over the whole sequence without a cache; returns all logits [batch, seq, vocab]."""
    return _logits(model, input_ids, attention_mask, position_ids, use_cache=False)


def _logits(model, input_ids, attention_mask, position_ids, **kwargs) -> torch.Tensor:
    """The model's own forward (`return_dict`), its logits."""
    return model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, return_dict=True,
                 **kwargs).logits


_DECODE_SDPA = "reachtui_decode_sdpa"
#: per decoder config (by id): how one-token steps attend ("cudnn", "efficient", "math", "bmm"; None: as
#: torch chooses), measured by `choose_decode_attention`
_DECODE_BACKENDS: dict[int, str | None] = {}


def _attend(q, k, v, mask, scale, backend: str | None):
    """Attention of packed one-token queries [b, kv heads, group, d] over keys/values [b, kv heads, L, d]
    under a boolean mask [b, 1, 1, L], by `backend`."""
    if backend == "bmm":            # two batched matrix products, as transformers' eager attention
        scores = torch.matmul(q, k.transpose(-1, -2)) * (scale if scale is not None else q.shape[-1] ** -0.5)
        scores = scores.masked_fill(~mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype), v)
    if backend is None:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kind = {"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "math": SDPBackend.MATH}[backend]
    with sdpa_kernel([kind]):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


def _decode_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """SDPA for one query token without expanding grouped keys/values per head: the query heads of each
    key/value head become that head's queries ([b, kv heads, group, d]), the mask (shared by every head)
    broadcasts over them; computed by the backend measured fastest for this model (`choose_decode_attention`).
    Anything else goes to transformers' own sdpa."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = int(getattr(module, "num_key_value_groups", 1) or 1)
    mask = attention_mask
    if (query.shape[2] == 1 and isinstance(mask, torch.Tensor) and mask.dim() == 4 and mask.shape[1] == 1
            and mask.dtype == torch.bool and not dropout and kwargs.get("softcap") is None
            and kwargs.get("position_bias") is None and key.shape[-1] == query.shape[-1]
            and query.shape[1] == groups * key.shape[1]):
        b, h, _, d = query.shape
        backend = _DECODE_BACKENDS.get(id(getattr(module, "config", None)))
        out = _attend(query.reshape(b, h // groups, groups, d), key, value, mask[:, :, :, : key.shape[-2]], scaling,
                      backend)
        return out.reshape(b, h, 1, d).transpose(1, 2).contiguous(), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                  is_causal=is_causal, **kwargs)


@contextlib.contextmanager
def decode_attention(arch: Architecture):
    """For the body of the `with` (a full-capacity decoding step), a model that attends with sdpa attends
    by `_decode_sdpa`; any other model is left as it is. Restored after, also when the body fails."""
    config = arch.config
    if getattr(config, "_attn_implementation", None) != "sdpa":
        yield
        return
    from transformers import AttentionInterface

    if _DECODE_SDPA not in AttentionInterface._global_mapping:
        AttentionInterface.register(_DECODE_SDPA, _decode_sdpa)
    saved = config.__dict__.get("_attn_implementation_internal", _MISSING)
    config.__dict__["_attn_implementation_internal"] = _DECODE_SDPA
    try:
        yield
    finally:
        if saved is _MISSING:
            config.__dict__.pop("_attn_implementation_internal", None)
        else:
            config.__dict__["_attn_implementation_internal"] = saved


def choose_decode_attention(arch: Architecture, rows: int, columns: int, device, dtype) -> dict:
    """Time each way of computing a one-token step's attention at this model's head shape for `rows` rows
    over `columns` keys (on a GPU; a few milliseconds) and keep the fastest for the model's decoding steps.
    Returns the milliseconds of each (a way that fails is left out)."""
    config = arch.config
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    kv = int(getattr(config, "num_key_value_heads", 0) or heads)
    d = int(getattr(config, "head_dim", 0) or (config.hidden_size // max(heads, 1)))
    if heads <= 0 or kv <= 0 or heads % kv:
        return {}
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn((rows, kv, heads // kv, d), device=device, dtype=dtype, generator=g)
    k = torch.randn((rows, kv, columns, d), device=device, dtype=dtype, generator=g)
    v = torch.randn((rows, kv, columns, d), device=device, dtype=dtype, generator=g)
    mask = torch.ones((rows, 1, 1, columns), dtype=torch.bool, device=device)
    mask[:, :, :, : columns // 4] = False
    times = {}
    for backend in (None, "cudnn", "efficient", "math", "bmm"):
        try:
            for _ in range(2):
                _attend(q, k, v, mask, None, backend)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(5):
                _attend(q, k, v, mask, None, backend)
            end.record()
            end.synchronize()
            times[backend or "default"] = start.elapsed_time(end) / 5
        except Exception:  # noqa: BLE001 - a backend that cannot run this shape is left out
            continue
    if times:
        best = min(times, key=times.get)
        _DECODE_BACKENDS[id(config)] = None if best == "default" else best
    return times
