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


def route_layers(arch: Architecture, route, silenced=frozenset()) -> nn.ModuleList:
    """One clone per route position (cache slot p for position p), silenced MLPs zeroed."""
    clones = []
    for p, i in enumerate(route):
        block = _clone(arch.layers[i], p)
        if _needs_clone(arch.layers[i]) is False:
            # nothing in this block records a layer index: it cannot address a cache slot per position
            raise ReachError(f"unsupported model {arch.model_class}: its decoder layers carry no layer_idx")
        if i in silenced:
            attr = arch.mlp_attrs[i] if arch.mlp_attrs else arch.mlp_attr
            new_modules = dict(block._modules)
            new_modules[attr] = ZeroedOutput(arch.layers[i]._modules[attr])
            object.__setattr__(block, "_modules", new_modules)
        clones.append(block)
    return nn.ModuleList(clones)


@contextlib.contextmanager
def installed(arch: Architecture, route=None, silenced=frozenset(), *, force: bool = False):
    """Install (route, silenced) in the model for the body of the `with`; restore everything after.

    The identity route with nothing silenced leaves the model untouched (unless `force`, for tests).
    """
    n = arch.num_layers
    layers = tuple(range(n)) if route is None else tuple(route)
    silenced = frozenset(silenced)
    if layers == tuple(range(n)) and not silenced and not force:
        yield
        return
    owner, attr, config = arch.layers_owner, arch.layers_attr, arch.config
    if owner._modules.get(attr) is not arch.layers:
        raise ReachError("the model is already being routed by another call (one owner at a time)")
    saved_n = config.num_hidden_layers
    saved_types = config.__dict__.get("layer_types", _MISSING)
    new_layers = route_layers(arch, layers, silenced)
    try:
        setattr(owner, attr, new_layers)
        config.num_hidden_layers = len(layers)
        if isinstance(saved_types, (list, tuple)) and len(saved_types) == n:
            config.layer_types = [saved_types[i] for i in layers]
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


def new_cache(arch: Architecture):
    """A DynamicCache sized for what is installed now (call inside `installed`)."""
    from transformers import DynamicCache

    return DynamicCache(config=arch.config)


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
