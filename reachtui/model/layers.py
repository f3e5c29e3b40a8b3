"""Architecture discovery: find the decoder layer stack, each layer's MLP, the final norm and the layer
types of a Hugging Face causal LM, without hard-coding model names.

The decoder stack is the ModuleList of blocks whose length equals the (text) config's number of hidden
layers (`num_hidden_layers`, `n_layer`, ...); each block's MLP (or sparse-MoE block) is found by attribute
(`mlp`, `feed_forward`, `block_sparse_moe`, ...) or, failing that, by class name. Layer types (full vs
sliding attention) come from `config.layer_types`, else from the attention modules / `sliding_window`.

Only this module and `routing.py` look inside a model; nothing here imports transformers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from reachtui.errors import ReachError

MLP_ATTRS = ("mlp", "feed_forward", "block_sparse_moe", "ffn", "moe", "mlp_block", "feedforward", "ff")
NORM_ATTRS = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "norm_f", "final_norm", "ln_out")
ATTN_ATTRS = ("self_attn", "attn", "attention", "self_attention", "mixer")
_MLP_CLASS = re.compile(r"(mlp|moe|feedforward|ffn|experts)", re.IGNORECASE)
_ATTN_CLASS = re.compile(r"attention", re.IGNORECASE)
_NORM_CLASS = re.compile(r"norm", re.IGNORECASE)
_SKIP_TOWERS = re.compile(r"(vision|visual|audio|image|speech|encoder\.)", re.IGNORECASE)


@dataclass(frozen=True)
class Architecture:
    model_class: str
    layers: Any                  # torch.nn.ModuleList: the decoder blocks, in order
    layers_owner: Any            # the module that holds `layers` as attribute `layers_attr`
    layers_attr: str
    mlp_attr: str                # the MLP attribute most layers use
    final_norm: Any | None       # the final norm module (None if the model has none)
    layer_types: list[str]       # per layer: "full_attention" | "sliding_attention" | ...
    num_layers: int
    config: Any                  # the (text) config that describes the decoder stack
    mlp_attrs: tuple[str, ...] = ()   # per layer, the MLP's attribute name
    attn_attrs: tuple[str, ...] = ()  # per layer, the attention's attribute name

    def mlp(self, i: int):
        """The MLP (or sparse-MoE) block of layer i."""
        return getattr(self.layers[i], self.mlp_attrs[i] if self.mlp_attrs else self.mlp_attr)

    def attention(self, i: int):
        attr = self.attn_attrs[i] if self.attn_attrs else ""
        return getattr(self.layers[i], attr) if attr else None


def text_config(model):
    config = model.config
    getter = getattr(config, "get_text_config", None)
    if callable(getter):
        try:
            return getter(decoder=True)
        except TypeError:
            return getter()
    return config


def num_hidden_layers(config) -> int | None:
    for name in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _find_child(module, attrs, pattern):
    import torch.nn as nn

    for name in attrs:
        child = module._modules.get(name)
        if isinstance(child, nn.Module):
            return name
    for name, child in module._modules.items():
        if child is not None and pattern.search(type(child).__name__) and not isinstance(child, nn.ModuleList):
            return name
    return None


def _is_block(module) -> bool:
    import torch.nn as nn

    if isinstance(module, (nn.ModuleList, nn.ModuleDict)) or not any(True for _ in module.parameters()):
        return False
    return _find_child(module, ATTN_ATTRS, _ATTN_CLASS) is not None


def _candidates(model, n):
    import torch.nn as nn

    found = []
    for path, module in model.named_modules():
        for attr, child in module._modules.items():
            if not isinstance(child, nn.ModuleList) or len(child) == 0:
                continue
            if n is not None and len(child) != n:
                continue
            if all(_is_block(block) for block in child):
                full = f"{path}.{attr}" if path else attr
                found.append((full, module, attr, child))
    return found


def discover(model) -> Architecture:
    """Find the decoder stack of `model`. Raises ReachError (one line) when it cannot."""
    cls = type(model).__name__
    config = text_config(model)
    n = num_hidden_layers(config)
    found = _candidates(model, n)
    if not found and n is None:
        raise ReachError(f"unsupported model {cls}: its config gives no number of hidden layers")
    if not found:
        what = f"of length {n} (config num_hidden_layers)" if n is not None else ""
        raise ReachError(f"unsupported model {cls}: no ModuleList of decoder blocks {what} was found".rstrip())
    decoder = None
    get_decoder = getattr(model, "get_decoder", None)
    if callable(get_decoder):
        try:
            decoder = get_decoder()
        except Exception:  # noqa: BLE001 - some models raise for missing decoders
            decoder = None
    preferred = [c for c in found if c[1] is decoder] or [c for c in found if not _SKIP_TOWERS.search(c[0])]
    path, owner, attr, layers = (preferred or found)[0]

    mlp_attrs, attn_attrs = [], []
    for i, block in enumerate(layers):
        mlp = _find_child(block, MLP_ATTRS, _MLP_CLASS)
        if mlp is None:
            raise ReachError(
                f"unsupported model {cls}: no MLP block found in layer {i} ({type(block).__name__}; "
                f"looked for attributes {', '.join(MLP_ATTRS)} or an MLP/MoE class)"
            )
        mlp_attrs.append(mlp)
        attn_attrs.append(_find_child(block, ATTN_ATTRS, _ATTN_CLASS))
    mlp_attr = max(set(mlp_attrs), key=mlp_attrs.count)

    norm_name = _find_child(owner, NORM_ATTRS, _NORM_CLASS)
    final_norm = owner._modules[norm_name] if norm_name else None

    num = len(layers)
    types = getattr(config, "layer_types", None)
    if isinstance(types, (list, tuple)) and len(types) == num:
        layer_types = [str(t) for t in types]
    else:
        window = getattr(config, "sliding_window", None)
        use = getattr(config, "use_sliding_window", True)
        layer_types = []
        for i, block in enumerate(layers):
            attn = getattr(block, attn_attrs[i]) if attn_attrs[i] else None
            own = getattr(attn, "sliding_window", None) if attn is not None else None
            if isinstance(own, int) and own > 0:
                layer_types.append("sliding_attention")
            elif isinstance(window, int) and window > 0 and use:
                layer_types.append("sliding_attention")
            else:
                layer_types.append("full_attention")
    return Architecture(
        model_class=cls,
        layers=layers,
        layers_owner=owner,
        layers_attr=attr,
        mlp_attr=mlp_attr,
        final_norm=final_norm,
        layer_types=layer_types,
        num_layers=num,
        config=config,
        mlp_attrs=tuple(mlp_attrs),
        attn_attrs=tuple(a or "" for a in attn_attrs),
    )
