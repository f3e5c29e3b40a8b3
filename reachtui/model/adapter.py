"""A PEFT adapter directory as a model: its base model, found from `adapter_config.json`, with the adapter
merged into the weights.

Why merged (`merge_and_unload`): routes and MLP silencing act on the decoder layers as they are; a LoRA
left as a wrapper would add its own modules around them. Merged, the model is a plain causal LM of the
base's class, and every exactness rule (the identity route is the model's own `generate`) holds for it.

`read_adapter` imports neither torch nor peft (the checks before a model loads use it); `merge_adapter`
imports peft (`pip install 'reachtui[peft]'`). Nothing is downloaded: the base is a directory, a bundled
model or a Hugging Face id already in the local cache, like any MODEL.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reachtui.errors import ReachError, first_line
from reachtui.parsing import json_file

CONFIG = "adapter_config.json"
#: The adapter's weights: safetensors, or a pickle (refused unless --allow-pickle, as a model's are).
SAFE_WEIGHTS, PICKLE_WEIGHTS = "adapter_model.safetensors", "adapter_model.bin"


@dataclass(frozen=True)
class Adapter:
    path: Path          # the adapter directory, resolved
    base: str           # the base MODEL as reachtui takes it: a directory, a bundled name, or ID[@REVISION]
    kind: str           # peft_type (LORA, ...)


def is_adapter_dir(path: Path) -> bool:
    """A directory holding an adapter_config.json and no config.json of its own."""
    return (path / CONFIG).is_file() and not (path / "config.json").is_file()


def read_adapter(path: Path) -> Adapter:
    """The adapter at `path` and the spec of its base (`base_model_name_or_path`, with `revision` when the
    adapter names one; a relative path is taken from the working folder, else from the adapter's own)."""
    path = path.resolve()
    config = json_file(path / CONFIG, f"{path}/{CONFIG} cannot be read: {{why}}")
    if not isinstance(config, dict):
        raise ReachError(f"{path}/{CONFIG} is not a JSON object")
    base = config.get("base_model_name_or_path")
    if not isinstance(base, str) or not base.strip():
        raise ReachError(f"adapter {path}: its {CONFIG} names no base model (base_model_name_or_path)")
    base = base.strip()
    beside = path / base
    if not Path(base).expanduser().is_absolute() and not Path(base).exists() and beside.is_dir():
        base = str(beside.resolve())
    revision = config.get("revision")
    if isinstance(revision, str) and revision.strip() and not Path(base).expanduser().exists():
        base = f"{base}@{revision.strip()}"
    return Adapter(path=path, base=base, kind=str(config.get("peft_type") or "unknown"))


def check_adapter_weights(adapter: Adapter, allow_pickle: bool) -> None:
    """The adapter's weights are there, and not only a pickle unless `allow_pickle`."""
    if (adapter.path / SAFE_WEIGHTS).is_file():
        return
    if (adapter.path / PICKLE_WEIGHTS).is_file():
        if allow_pickle:
            return
        raise ReachError(f"adapter {adapter.path} has only pickled weights ({PICKLE_WEIGHTS}), which can run code "
                         f"when loaded: pass --allow-pickle if you trust them")
    raise ReachError(f"adapter {adapter.path} holds no weights ({SAFE_WEIGHTS})")


def check_peft() -> None:
    """peft is importable, else one line saying how to get it."""
    from reachtui.model.load import _importable

    if not _importable("peft"):
        raise ReachError("MODEL is a PEFT adapter, which needs peft: pip install 'reachtui[peft]'")


def merge_adapter(model, adapter: Adapter):
    """`model` (the base, loaded) with the adapter merged into its weights: a plain model of the base's
    class (peft's `merge_and_unload`). Its caller, `load_model`, has checked that peft is there (`check_peft`)."""
    from peft import PeftModel

    try:
        wrapped = PeftModel.from_pretrained(model, str(adapter.path), is_trainable=False)
    except Exception as exc:  # noqa: BLE001 - a wrong base, a damaged file: one line
        raise ReachError(f"cannot apply the adapter {adapter.path} to its base {adapter.base}: "
                         f"{first_line(exc, 300)}") from None
    if not hasattr(wrapped, "merge_and_unload"):
        raise ReachError(f"adapter {adapter.path} ({adapter.kind}) cannot be merged into the weights: routes and "
                         f"MLP silencing need a plain model (LoRA and its kin merge)")
    try:
        return wrapped.merge_and_unload()
    except Exception as exc:  # noqa: BLE001
        raise ReachError(f"adapter {adapter.path} ({adapter.kind}) cannot be merged into the weights: "
                         f"{first_line(exc, 300)}") from None
