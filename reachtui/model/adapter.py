"""A PEFT adapter directory as a model: its base model, found from `adapter_config.json`, with the adapter
merged into the weights.

Why merged (`merge_and_unload`): routes and MLP silencing act on the decoder layers as they are; a LoRA
left as a wrapper would add its own modules around them. Merged, the model is a plain causal LM of the
base's class, and every exactness rule (the identity route is the model's own `generate`) holds for it.

`read_adapter` and `check_adapter_weights` import neither torch nor peft (the checks before a model loads
use them); `merge_adapter` imports peft (`pip install 'reachtui[peft]'`). Nothing is downloaded: the base is a
directory, a bundled model or a Hugging Face id already in the local cache, like any MODEL.

An adapter is applied whole or not at all: peft fills a weight its config describes and its file lacks with
the weight's initial value (a LoRA's B is zero: the base model would run under the adapter's name) and drops
a tensor the config has no place for. So a weights file holding no tensors is refused, and so are missing or
unexpected weights unless `allow_missing_weights` (`--allow-missing-weights`, which the run's load report then
records); a shape that does not fit the base, a weight of NaN or infinity, a prompt-learning adapter (nothing
to merge) and an unknown peft_type are each one line naming the cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from reachtui.errors import ReachError, first_line
from reachtui.model.files import importable, safetensors_header
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
    kind = config.get("peft_type")
    if not isinstance(kind, str) or not kind.strip():
        raise ReachError(f"adapter {path}: its {CONFIG} names no peft_type (LORA, ...): peft cannot read it")
    return Adapter(path=path, base=base, kind=kind.strip())


def check_adapter_weights(adapter: Adapter, allow_pickle: bool) -> None:
    """The adapter's weights are there, and not only a pickle unless `allow_pickle`; a safetensors file is
    read (its header only) and holds at least one tensor."""
    safe = adapter.path / SAFE_WEIGHTS
    if safe.is_file():
        try:
            tensors = safetensors_header(safe)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else first_line(exc)
            raise ReachError(f"adapter {adapter.path}: {SAFE_WEIGHTS} cannot be read: {why}") from None
        if not tensors:
            raise ReachError(f"adapter {adapter.path}: {SAFE_WEIGHTS} holds no tensors: applied, it would change "
                             f"nothing and the base model would run under the adapter's name")
        return
    if (adapter.path / PICKLE_WEIGHTS).is_file():
        if allow_pickle:
            return
        raise ReachError(f"adapter {adapter.path} has only pickled weights ({PICKLE_WEIGHTS}), which can run code "
                         f"when loaded: pass --allow-pickle if you trust them")
    raise ReachError(f"adapter {adapter.path} holds no weights ({SAFE_WEIGHTS})")


def check_peft() -> None:
    """peft is importable, else one line saying how to get it."""
    if not importable("peft"):
        raise ReachError("MODEL is a PEFT adapter, which needs peft: pip install 'reachtui[peft]'")


def merge_adapter(model, adapter: Adapter, allow_missing_weights: bool = False):
    """`model` (the base, loaded) with the adapter merged into its weights: a plain model of the base's
    class (peft's `merge_and_unload`), and a line for the load report (empty when every weight loaded). Its
    caller, `load_model`, has checked that peft is there (`check_peft`) and the weights file
    (`check_adapter_weights`). What peft would apply silently wrong is refused (see the module's doc)."""
    import peft
    from peft import PeftConfig, PeftModel, PeftType
    from peft.auto import MODEL_TYPE_TO_PEFT_MODEL_MAPPING

    where = f"adapter {adapter.path}"
    known = [t.value for t in PeftType]
    if adapter.kind not in known:
        raise ReachError(f"{where}: unknown peft_type {adapter.kind!r} (peft {peft.__version__} knows "
                         f"{', '.join(known)})")
    try:
        config = PeftConfig.from_pretrained(str(adapter.path))
        config.inference_mode = True
        if config.is_prompt_learning:
            raise ReachError(f"{where} is {adapter.kind}, a prompt-learning adapter (virtual tokens before every "
                             f"prompt), which cannot be merged into the weights: routes and MLP silencing need a "
                             f"plain model (LoRA and its kin merge)")
        wrapped = MODEL_TYPE_TO_PEFT_MODEL_MAPPING.get(config.task_type, PeftModel)(model, config, "default")
    except ReachError:
        raise
    except Exception as exc:  # noqa: BLE001 - a config peft refuses, target modules the base lacks: one line
        raise ReachError(f"cannot apply the {where} to its base {adapter.base}: {first_line(exc, 300)}") from None
    if not hasattr(wrapped, "merge_and_unload"):
        raise ReachError(f"{where} ({adapter.kind}) cannot be merged into the weights: routes and "
                         f"MLP silencing need a plain model (LoRA and its kin merge)")
    loaded = _load_weights(wrapped, adapter, allow_missing_weights)
    try:
        return wrapped.merge_and_unload(), loaded
    except Exception as exc:  # noqa: BLE001
        raise ReachError(f"{where} ({adapter.kind}) cannot be merged into the weights: "
                         f"{first_line(exc, 300)}") from None


#: torch's line for a tensor of another shape in `load_state_dict`.
_SIZE_MISMATCH = re.compile(r"size mismatch for (\S+): copying a param with shape torch\.Size\(\[([^\]]*)\]\) "
                            r"from checkpoint, the shape in current model is torch\.Size\(\[([^\]]*)\]\)")


def _shown_key(key: str) -> str:
    """A weight's name as the adapter's file writes it (peft's prefix and adapter name left out)."""
    return key.removeprefix("base_model.model.").replace(".default.", ".").removesuffix(".default")


def _names(keys, limit: int = 3) -> str:
    keys = sorted(_shown_key(str(k)) for k in keys)
    more = f", +{len(keys) - limit} more" if len(keys) > limit else ""
    return ", ".join(keys[:limit]) + more


def _load_weights(wrapped, adapter: Adapter, allow_missing_weights: bool) -> str:
    """The adapter's weights loaded into `wrapped` (peft's `load_adapter`), checked: every weight its config
    describes is in the file and nothing else is (unless `allow_missing_weights`), each of the shape the base
    gives it and finite. Returns what was let through, for the load report ('' when nothing)."""
    from peft.utils import get_peft_model_state_dict

    where = f"adapter {adapter.path}"
    weights = SAFE_WEIGHTS if (adapter.path / SAFE_WEIGHTS).is_file() else PICKLE_WEIGHTS
    try:
        result = wrapped.load_adapter(str(adapter.path), "default", is_trainable=False)
    except KeyError as exc:       # a weight the config asks for (modules_to_save, ...) that the file lacks
        raise ReachError(f"{where}: {weights} lacks the weight {_shown_key(str(exc.args[0]))}, which its {CONFIG} "
                         f"asks for (the weights and the config do not belong together)") from None
    except RuntimeError as exc:
        sizes = _SIZE_MISMATCH.findall(str(exc))
        if not sizes:
            raise ReachError(f"cannot apply the {where} to its base {adapter.base}: "
                             f"{' '.join(str(exc).split())[:300]}") from None
        key, theirs, ours = sizes[0]
        more = f" (and {len(sizes) - 1} more)" if len(sizes) > 1 else ""
        raise ReachError(f"{where} does not fit its base {adapter.base}: weight {_shown_key(key)} is [{theirs}] in "
                         f"{weights} but [{ours}] for this base and {CONFIG}{more}: the adapter was made for another "
                         f"model (or another r, target modules, vocabulary)") from None
    except Exception as exc:  # noqa: BLE001 - a damaged file: one line
        raise ReachError(f"cannot apply the {where} to its base {adapter.base}: {first_line(exc, 300)}") from None
    problems = []
    if result.missing_keys:
        problems.append(f"{len(result.missing_keys)} weight(s) its {CONFIG} describes are not in {weights} "
                        f"({_names(result.missing_keys)}): peft would leave them as initialised (a LoRA's are zero: "
                        f"the base model would run under the adapter's name)")
    if result.unexpected_keys:
        problems.append(f"{len(result.unexpected_keys)} tensor(s) in {weights} have no place in the adapter its "
                        f"{CONFIG} describes ({_names(result.unexpected_keys)}): peft would drop them")
    if problems and not allow_missing_weights:
        raise ReachError(f"{where}: {'; '.join(problems)}; pass --allow-missing-weights to apply it anyway")
    import torch

    for key, tensor in get_peft_model_state_dict(wrapped, save_embedding_layers=False).items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ReachError(f"{where}: its weight {_shown_key(key)} holds NaN or infinite values")
    return "; ".join(problems)
