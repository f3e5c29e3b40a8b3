"""Resolve MODEL (`demo`, a directory, or a Hugging Face id in the local cache) and load it.

`resolve_model`, `check_weights` and `position_limit` import neither torch nor transformers. MODEL is also
a Hugging Face id at a revision (`ID@REVISION`, what `--revision` makes: a branch, tag or commit of the
cached repository) or a PEFT adapter directory (`reachtui.model.adapter`: its base, the adapter merged in).
Nothing is downloaded unless `allow_download`; `trust_remote_code` is off unless asked for; pickled weights
(`pytorch_model.bin`, which can run code when loaded) are refused unless `allow_pickle`: safetensors is the
safe default. A checkpoint that does not hold every weight the config asks for (a `num_hidden_layers` above
the layers in the weights, a missing tensor: transformers fills them with random values) or holds weights
the model has no place for is refused unless `allow_missing_weights`; what was loaded is said in
`LoadedModel.load_report`, which a run keeps (a weight whose shape differs from the config's is named with
both shapes). A tokenizer giving ids the model has no embedding row for (its vocabulary, added and special
tokens, the padding id) is refused when the model loads, before any run exists.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reachtui.assets import BUNDLED_MODELS
from reachtui.errors import ReachError, first_line
from reachtui.inputs import DEVICE_MAP, MODEL_WEIGHTS, NAME_MAX, refusal, short_name, too_long
from reachtui.model.files import importable, safetensors_header
from reachtui.model_names import adapter_name
from reachtui.parsing import json_file

_HF_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
DEVICES = "auto|cpu|cuda[:N]"
DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
_MAP_DEVICE = re.compile(r"^(cpu|disk|mps|(cuda|xpu|npu)(:\d+)?)$")


@dataclass
class LoadedModel:
    name: str
    path: Path
    model: Any
    tokenizer: Any
    device: str
    dtype: str
    arch: Any
    device_map: dict | None = None   # module -> device, as accelerate placed it (None: one device)
    load_report: str = ""            # what from_pretrained loaded (`describe_loading`): kept with a run


def hf_cache_dir() -> Path:
    """The hub cache directory, honouring HF_HUB_CACHE, then HF_HOME, then XDG_CACHE_HOME."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):
        return Path(os.environ["HUGGINGFACE_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def hf_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def find_in_cache(repo_id: str, cache: Path | None = None, revision: str | None = None) -> Path | None:
    """The snapshot directory of `repo_id` in the hub cache holding a config.json, or None.

    Without `revision`: the snapshot `refs/main` points at, else the most recently modified snapshot with a
    config. With one: the snapshot its ref names (`refs/<revision>`: a branch or tag), or the snapshot of
    that commit hash, as huggingface_hub resolves a revision offline.
    """
    cache = cache or hf_cache_dir()
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo_dir / "snapshots"
    if not snapshots.is_dir():
        return None
    if revision is not None:
        if ".." in Path(revision).parts or revision.startswith("/"):
            return None                   # a revision names a ref or a commit, never a path out of the cache
        ref = repo_dir / "refs" / revision
        commit = ref.read_text().strip() if ref.is_file() else revision
        candidate = snapshots / commit
        return candidate if "/" not in commit and (candidate / "config.json").is_file() else None
    ref = repo_dir / "refs" / "main"
    if ref.is_file():
        commit = ref.read_text().strip()
        candidate = snapshots / commit
        if (candidate / "config.json").is_file():
            return candidate
    found = [d for d in snapshots.iterdir() if (d / "config.json").is_file()]
    if not found:
        return None
    return max(found, key=lambda d: (d / "config.json").stat().st_mtime)


def cached_revisions(repo_id: str, cache: Path) -> list[str]:
    """The refs (branches, tags) and snapshot commits the cache holds of `repo_id`, for an error line."""
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    refs = sorted(str(p.relative_to(repo_dir / "refs")) for p in (repo_dir / "refs").rglob("*") if p.is_file()) \
        if (repo_dir / "refs").is_dir() else []
    commits = sorted(d.name[:12] for d in (repo_dir / "snapshots").iterdir()) if (repo_dir / "snapshots").is_dir() \
        else []
    return refs + commits


def split_revision(spec: str) -> tuple[str, str | None]:
    """`ID@REVISION` -> (ID, REVISION); anything else -> (spec, None). A Hugging Face id has no `@`."""
    if "@" in spec and not Path(spec).expanduser().exists():
        repo, _, revision = spec.rpartition("@")
        return repo, revision
    return spec, None


def with_revision(spec: str, revision: str | None) -> str:
    """MODEL with `--revision` joined as `ID@REVISION` (the one spec every loader, worker and run name
    takes); refused for what has no revisions: a bundled model, a directory, an adapter."""
    if (long := too_long(spec)) is not None:
        raise ReachError(f"model {short_name(spec)!r}: not a directory nor a Hugging Face id ({long})")
    if revision is None:
        return spec
    revision = revision.strip()
    if not revision or any(c.isspace() for c in revision) or "@" in revision or revision.startswith("/"):
        raise ReachError(f"--revision {short_name(revision)!r}: give a branch, tag or commit hash")
    if too_long(f"{spec}@{revision}") is not None:    # ID@REV is looked for as a path first
        raise ReachError(f"--revision {short_name(revision)}: a name of {len(revision.encode())} bytes is no "
                         f"branch, tag or commit hash (with the model's name, at most {NAME_MAX} bytes)")
    if spec in BUNDLED_MODELS or Path(spec).expanduser().exists():
        raise ReachError(f"--revision {revision}: {spec!r} is not a Hugging Face id (a bundled model or a "
                         f"directory has no revisions)")
    if split_revision(spec)[1] is not None:
        raise ReachError(f"--revision {revision}: {spec!r} already names a revision")
    return f"{spec}@{revision}"


def adapter_of(spec: str):
    """The PEFT adapter MODEL names (`reachtui.model.adapter.Adapter`), or None when it is not one."""
    from reachtui.model.adapter import is_adapter_dir, read_adapter

    path = Path(str(spec).strip()).expanduser()
    if spec in BUNDLED_MODELS or not path.is_dir() or not is_adapter_dir(path):
        return None
    return read_adapter(path)


def resolve_model(spec: str, allow_download: bool = False) -> Path:
    """`demo` or `demo-tuned` -> a bundled model; an existing directory with config.json; a PEFT adapter
    directory -> its base model's directory; a Hugging Face id (`ID` or `ID@REVISION`) in the local cache
    (downloaded only when `allow_download`). Else ReachError naming what was looked for."""
    return _resolve(spec, allow_download)[0]


def _resolve(spec: str, allow_download: bool = False):
    """(`resolve_model`'s directory, the adapter MODEL names or None): an adapter's config read once."""
    spec = str(spec).strip()
    if not spec:
        raise ReachError("no model given: pass demo, a model directory, or a Hugging Face id")
    if spec in BUNDLED_MODELS:
        where = BUNDLED_MODELS[spec]
        if not (where / "config.json").is_file():
            raise ReachError(f"the bundled {spec} model is missing: no config.json in {where}")
        return where, None
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ReachError(f"model {spec!r} is a file, not a model directory (expected a folder with config.json)")
        adapter = adapter_of(spec)
        if adapter is not None:
            return _adapter_base(adapter, allow_download), adapter
        if not (path / "config.json").is_file():
            raise ReachError(f"model directory {spec!r} has no config.json (not a Hugging Face model folder)")
        return path.resolve(), None
    repo, revision = split_revision(spec)
    if spec.startswith((".", "/", "~")) or not _HF_ID.match(repo) or revision == "":
        raise ReachError(f"model {spec!r} not found: no such directory")
    cache = hf_cache_dir()
    found = find_in_cache(repo, cache, revision)
    if found is not None:
        return found, None
    at = f" at revision {revision!r}" if revision is not None else ""
    if not allow_download:
        held = cached_revisions(repo, cache) if revision is not None else []
        what = f"not in the Hugging Face cache at {cache}" if revision is None or not held else \
            f"the Hugging Face cache at {cache} holds only {', '.join(held)}"
        raise ReachError(f"model {repo!r}{at} not found: not a directory, and {what} (pass --allow-download to "
                         f"fetch it)")
    if hf_offline():
        raise ReachError(f"model {repo!r}{at} is not in the Hugging Face cache at {cache}, and HF_HUB_OFFLINE is set")
    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(
            repo_id=repo,
            revision=revision,
            cache_dir=str(cache),
            allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken", "*.py"],
        )
    except Exception as exc:  # noqa: BLE001 - any hub failure becomes one line
        raise ReachError(f"could not download model {repo!r}{at}: {first_line(exc)}") from exc
    return Path(local), None


def check_loadable(spec: str, *, allow_download: bool = False, allow_pickle: bool = False,
                   allow_missing_weights: bool | None = None):
    """The checks before MODEL loads, in this order: it resolves (`resolve_model`), its weights are not only
    pickles (`check_weights`), with `allow_missing_weights` given its config's layers are in its weights
    (`check_layers`), and for an adapter its weights (`check_adapter_weights`) and peft (`check_peft`).
    (its directory, the adapter or None)."""
    path, adapter = _resolve(spec, allow_download)
    for folder in (path, adapter.path if adapter is not None else None):
        check_files(folder, spec)
    check_weights(path, spec, allow_pickle)
    if allow_missing_weights is not None:
        check_layers(path, spec, allow_missing_weights)
    if adapter is not None:
        from reachtui.model.adapter import check_adapter_weights, check_peft

        check_adapter_weights(adapter, allow_pickle)
        check_peft()
    return path, adapter


def _adapter_base(adapter, allow_download: bool) -> Path:
    """The directory of an adapter's base model (one line when it cannot be found, or is an adapter too)."""
    if adapter_of(adapter.base) is not None:
        raise ReachError(f"adapter {adapter.path}: its base {adapter.base} is an adapter too (give a base model)")
    try:
        return resolve_model(adapter.base, allow_download=allow_download)
    except ReachError as exc:
        raise ReachError(f"adapter {adapter.path}: its base model (base_model_name_or_path in adapter_config.json) "
                         f"cannot be loaded: {exc}") from None


#: The weight files from_pretrained loads that are pickles (loading one can run code), and the safe format.
PICKLE_WEIGHTS = ("pytorch_model*.bin",)
SAFE_WEIGHTS = "*.safetensors"


def check_files(path: Path | None, spec: str) -> None:
    """Every file of a model's (or an adapter's) folder is a regular file, or a link to one (the Hugging Face
    cache links to its blobs): transformers would block for ever on a FIFO in it (`reachtui.inputs`)."""
    if path is None or not path.is_dir():
        return
    for file in sorted(path.iterdir()):
        why = None if file.is_dir() else refusal(file, MODEL_WEIGHTS)
        if why is not None and why != "no such file":       # a dangling link is left to the loader
            raise ReachError(f"model {short_name(spec)}: {file.name}: {why}")


def check_weights(path: Path, spec: str, allow_pickle: bool = False) -> None:
    """Refuse a model directory whose weights are only pickles (pytorch_model.bin and its shards) unless
    `allow_pickle`: unpickling a file can run any code it holds. safetensors files are always preferred."""
    path = Path(path)
    if allow_pickle or not path.is_dir() or any(path.glob(SAFE_WEIGHTS)):
        return
    pickled = sorted(p.name for pattern in PICKLE_WEIGHTS for p in path.glob(pattern))
    if pickled:
        more = f" (+{len(pickled) - 1} more)" if len(pickled) > 1 else ""
        raise ReachError(f"model {spec!r} has only pickled weights ({pickled[0]}{more}), which can run code when "
                         "loaded: pass --allow-pickle if you trust them, or convert them to safetensors")


_LAYER_KEY = re.compile(r"\.layers\.(\d+)\.")


def safetensors_names(path: Path) -> list[str]:
    """The tensor names in a model directory's safetensors files (`safetensors_header`). Empty when there are
    none or one cannot be read."""
    names: list[str] = []
    for file in sorted(Path(path).glob(SAFE_WEIGHTS)):
        try:
            names += list(safetensors_header(file))
        except (OSError, ValueError):
            return []
    return names


def check_layers(path: Path, spec: str, allow_missing_weights: bool = False) -> None:
    """Before loading: a config whose num_hidden_layers exceeds the layers its safetensors hold is refused
    (transformers would fill the rest with random weights) unless `allow_missing_weights`. The full check,
    every tensor, is made when the model loads (`load_model`)."""
    if allow_missing_weights:
        return
    layers = read_config(Path(path)).get("num_hidden_layers")
    found = {int(m.group(1)) for name in safetensors_names(path) if (m := _LAYER_KEY.search(name))}
    if isinstance(layers, int) and not isinstance(layers, bool) and found and layers > max(found) + 1:
        raise ReachError(f"model {spec!r}: its config asks for {layers} layers (num_hidden_layers) but its weights "
                         f"hold {max(found) + 1}: the other layers would be random; pass --allow-missing-weights to "
                         f"audit it anyway")


#: Config fields that give the longest sequence (prompt + generated tokens) a model has positions for.
POSITION_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")


def position_limit(config) -> int | None:
    """The model's position limit (tokens of prompt + generation) from its config (a dict or a config
    object, its text config looked at too), or None when the config gives none."""
    def get(obj, key):
        return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)

    for holder in (config, get(config, "text_config")):
        if holder is None:
            continue
        for key in POSITION_FIELDS:
            value = get(holder, key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def config_position_limit(spec: str, allow_download: bool = False) -> int | None:
    """`position_limit` of MODEL's config.json, read before the model loads (None when it gives none);
    ReachError for a config.json that is not a JSON object."""
    return position_limit(read_config(resolve_model(spec, allow_download=allow_download)))


def read_config(path: Path) -> dict:
    """The model directory's config.json as a dict; ReachError (one line) when unreadable or not an object."""
    config = json_file(path / "config.json", f"{path}/config.json cannot be read: {{why}}")
    if not isinstance(config, dict):
        raise ReachError(f"{path}/config.json is not a JSON object")
    return config


def check_positions(limit: int | None, max_new_tokens: int) -> None:
    """--max-new-tokens against the model's position limit (the root of a huge KV-cache allocation)."""
    if limit is not None and max_new_tokens >= limit:
        raise ReachError(f"--max-new-tokens {max_new_tokens} does not fit the model's position limit of {limit} "
                         f"tokens (prompt + generated tokens); give at most {limit - 1}, less the prompt's length")


def model_name(spec: str, adapter=None) -> str:
    """The name `load_model` gives a model (what the store calls it), found without importing torch:
    `demo`, a directory's resolved path, an adapter as `BASE+FOLDER#DIGEST` (its base's name, its folder's
    name and six hex digits of its path: `reachtui.model_names.adapter_name`), else the Hugging Face id as
    given (`ID@REVISION` with one). `adapter`: the adapter MODEL names where the caller has read it already
    (else it is read here)."""
    if spec in BUNDLED_MODELS:
        return spec
    if adapter is None:
        adapter = adapter_of(spec)
    if adapter is not None:
        return adapter_name(model_name(adapter.base), adapter.path)
    if Path(spec).expanduser().exists():
        return str(resolve_model(spec))
    return spec


def _pick_device(device: str) -> str:
    import torch

    d = (device or "auto").strip().lower()
    if d == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if d == "cpu":
        return "cpu"
    m = re.fullmatch(r"cuda(?::(\d+))?", d)
    if not m:
        raise ReachError(f"unknown device {device!r} (use {DEVICES})")
    if not torch.cuda.is_available():
        raise ReachError(f"device {device!r} asked for, but CUDA is not available here")
    if m.group(1) is not None and int(m.group(1)) >= torch.cuda.device_count():
        raise ReachError(f"device {device!r} asked for, but only {torch.cuda.device_count()} CUDA device(s) exist")
    return d


def _pick_dtype(dtype: str, device: str):
    import torch

    d = (dtype or "auto").strip().lower()
    if d == "auto":
        if device.startswith("cuda"):
            return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
        return "float32"
    if d not in DTYPES:
        raise ReachError(f"unknown dtype {dtype!r} (use {'|'.join(DTYPES)})")
    return d


def quiet_transformers() -> None:
    """No progress bars or warnings from transformers / huggingface_hub (the app owns the terminal), nor the
    FutureWarnings transformers raises when a library calls it the old way (peft merging an adapter)."""
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\.")
    import transformers
    from transformers.utils import logging as tlogging

    tlogging.set_verbosity_error()
    tlogging.disable_progress_bar()
    # peft asks every model it wraps for this deprecated property: a warning the user can do nothing about
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    logging.getLogger("accelerate").setLevel(logging.ERROR)   # "Some parameters are on the meta device ..."
    try:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    except Exception:  # noqa: BLE001
        pass
    del transformers


def check_device_map(device_map, device: str, offload_folder) -> str | dict | None:
    """`device_map` as from_pretrained takes it (a strategy name or a module -> device dict), or None.

    A string is a strategy (auto, balanced, balanced_low_0, sequential) or the path of a JSON file holding
    {module name: device}. accelerate must be importable. No torch here."""
    if isinstance(device_map, str) and not device_map.strip():
        raise ReachError(f"--device-map '': the name is empty (use {'|'.join(DEVICE_MAPS)}, none, or a JSON file of "
                         "module name -> device)")
    if device_map is None or (isinstance(device_map, str) and device_map.strip().lower() == "none"):
        if offload_folder:
            raise ReachError("--offload-folder only applies with --device-map")
        return None
    shown = device_map if isinstance(device_map, str) else "(a dict)"
    if (device or "auto").strip().lower() != "auto":
        raise ReachError(f"--device {device} and --device-map {shown}: give one (a device map places the "
                         "model itself)")
    if isinstance(device_map, str):
        text = device_map.strip()
        if text.lower() in DEVICE_MAPS:
            device_map = text.lower()
        elif text.lower().endswith(".json") or os.path.lexists(os.path.expanduser(text)):
            device_map = json_file(Path(text).expanduser(), f"device map file {short_name(text)}: cannot be read "
                                                            f"({{why}})", DEVICE_MAP)
            if not isinstance(device_map, dict):
                raise ReachError(f"device map file {text} must be a JSON object of module name -> device")
        else:
            raise ReachError(f"unknown device map {text!r} (use {'|'.join(DEVICE_MAPS)} or a JSON file of "
                             "module name -> device)")
    if isinstance(device_map, dict):
        for name, dev in device_map.items():
            ok = (isinstance(dev, int) and not isinstance(dev, bool) and dev >= 0) or (
                isinstance(dev, str) and _MAP_DEVICE.match(dev))
            if not isinstance(name, str) or not ok:
                raise ReachError(f"device map: unknown device {dev!r} for {name!r} (use a GPU index, cuda:N, cpu "
                                 "or disk)")
        if "disk" in device_map.values() and not offload_folder:
            raise ReachError("the device map offloads to disk: pass --offload-folder DIR")
    if not importable("accelerate"):
        raise ReachError("--device-map needs accelerate: pip install 'reachtui[gpu]' (or pip install "
                         "'accelerate>=1.1,<2')")
    return device_map


def _describe_devices(device_map: dict) -> str:
    """'cuda:0+cpu+disk': the devices a dispatched model uses, accelerators first."""
    names = []
    for dev in device_map.values():
        name = f"cuda:{dev}" if isinstance(dev, int) else str(dev)
        if name not in names:
            names.append(name)
    return "+".join(sorted(names, key=lambda n: (n in ("cpu", "disk"), n == "disk", n)))


def input_device(model):
    """The device a model's input ids go to: its input embedding's (where accelerate executes it, if a
    hook moves its weights in per call), else its first parameter's."""
    import torch

    try:
        emb = model.get_input_embeddings()
    except Exception:  # noqa: BLE001 - a model without the accessor: fall back to its first parameter
        emb = None
    if emb is not None:
        hook = emb.__dict__.get("_hf_hook")
        exec_dev = getattr(hook, "execution_device", None)
        if exec_dev is not None and not isinstance(exec_dev, dict):
            return torch.device(exec_dev if not isinstance(exec_dev, int) else f"cuda:{exec_dev}")
        weight = getattr(emb, "weight", None)
        if weight is not None and weight.device.type != "meta":
            return weight.device
    return next(model.parameters()).device


def _tokenizer(spec: str, path: Path, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code, local_files_only=True)
    except Exception as exc:  # noqa: BLE001
        raise ReachError(f"cannot load the tokenizer of {spec!r} from {path}: {first_line(exc)}") from exc


def tokenizer_dir(path: Path, adapter) -> Path:
    """Where MODEL's tokenizer is: its adapter's (`adapter`, None for none) own folder when it saved one
    (added tokens, a chat template), else the model's (`path`, the base's for an adapter)."""
    if adapter is not None and (adapter.path / "tokenizer_config.json").is_file():
        return adapter.path
    return path


def load_tokenizer(spec: str, trust_remote_code: bool = False, allow_download: bool = False):
    """MODEL's tokenizer alone: where the model runs in other processes (`--ray`), the prompts are still
    rendered here, and a chat template needs it."""
    path, adapter = _resolve(spec, allow_download)
    quiet_transformers()
    return _tokenizer(spec, tokenizer_dir(path, adapter), trust_remote_code)


def config_facts(spec: str, allow_download: bool = False) -> dict:
    """What MODEL's config.json says, read without loading the model: its directory (`path`), class
    (`model_class`), decoder layers (`num_layers`, 0 when it names none) and position limit (`max_positions`).
    A run through a server records these; the server holds the weights."""
    from types import SimpleNamespace

    from reachtui.model.layers import num_hidden_layers

    path = resolve_model(spec, allow_download=allow_download)
    config = read_config(path)
    text = config.get("text_config")
    holders = [SimpleNamespace(**text)] if isinstance(text, dict) else []
    layers = next((n for h in holders + [SimpleNamespace(**config)] if (n := num_hidden_layers(h))), 0)
    archs = config.get("architectures")
    return dict(path=str(path), model_class=archs[0] if isinstance(archs, list) and archs else None,
                num_layers=int(layers), max_positions=position_limit(config))


def describe_loading(info: dict) -> tuple[str, int]:
    """(one line, count of weights not as the checkpoint gives them) from from_pretrained's loading info:
    missing (randomly initialised), unexpected (in the checkpoint, no place in the model), mismatched."""
    parts, bad = [], 0
    for key, word in (("missing_keys", "missing (randomly initialised)"), ("unexpected_keys", "unexpected"),
                      ("mismatched_keys", "of another shape (randomly initialised)")):
        names = sorted(_loading_name(k) for k in (info.get(key) or ()))
        if names:
            bad += len(names)
            more = f", +{len(names) - 3} more" if len(names) > 3 else ""
            parts.append(f"{len(names)} weight(s) {word}: {', '.join(names[:3])}{more}")
    return ("; ".join(parts) if parts else "every weight loaded from the checkpoint"), bad


def _loading_name(key) -> str:
    """A weight of from_pretrained's loading info: its name, and for one of another shape ((name, checkpoint
    shape, model shape)) both shapes."""
    if isinstance(key, tuple) and len(key) == 3:
        return f"{key[0]} ([{', '.join(map(str, key[1]))}] in the checkpoint, [{', '.join(map(str, key[2]))}] " \
               f"by the config)"
    return str(key[0] if isinstance(key, tuple) else key)


def check_vocabulary(spec: str, model, tokenizer) -> None:
    """Every token id the model may be given has an embedding row: the tokenizer's ids (its vocabulary with
    the added and special tokens: an id is not a count, a vocabulary may skip ids) and the padding id the
    runner uses (`decode.pad_id`). Refused at load, before any run exists (an IndexError mid-run otherwise)."""
    from reachtui.model.decode import pad_id

    try:
        rows = int(model.get_input_embeddings().weight.shape[0])
    except Exception:  # noqa: BLE001 - a model without the accessor: nothing to compare
        return
    ids = {**tokenizer.get_vocab(), **{t: i for t, i in zip(tokenizer.all_special_tokens,
                                                                tokenizer.all_special_ids) if i is not None}}
    token, top = max(ids.items(), key=lambda kv: kv[1], default=(None, -1))
    if top >= rows:
        beyond = sum(1 for i in ids.values() if i >= rows)
        raise ReachError(f"model {spec!r}: {beyond} token(s) of its tokenizer have an id past the model's embedding "
                         f"rows (ids 0-{rows - 1}; {token!r} is id {top}): the tokenizer and the weights do not "
                         f"belong together")
    pad = pad_id(model, tokenizer)
    if pad >= rows:
        raise ReachError(f"model {spec!r}: its padding id {pad} (the tokenizer has no pad token, so the first end "
                         f"of sequence id is used) has no embedding (the model embeds ids 0-{rows - 1}): set "
                         f"pad_token in tokenizer_config.json or eos_token_id in config.json to a token of the "
                         f"vocabulary")


def _needs_own_code(spec: str) -> ReachError:
    return ReachError(f"model {spec!r} needs its own code: pass --trust-remote-code if you trust it")


def _not_loaded(spec: str, what: str, exc: BaseException) -> ReachError:
    """One line for a config or model transformers could not load: the code of its own it needs, else `what`
    and the error's first line."""
    msg = first_line(exc)
    return _needs_own_code(spec) if "trust_remote_code" in msg else ReachError(f"{what}: {msg}")


def load_model(
    spec: str,
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    allow_download: bool = False,
    device_map: str | dict | None = None,
    offload_folder: str | None = None,
    max_memory: dict | None = None,
    allow_pickle: bool = False,
    allow_missing_weights: bool = False,
) -> LoadedModel:
    """Resolve, load (eval mode, no progress bars) and discover the layers of a causal LM.

    With `device_map` (auto|balanced|balanced_low_0|sequential, a {module: device} dict, or a JSON file of
    one) the model is placed by accelerate (`from_pretrained(device_map=...)`: layers split over GPUs, or
    offloaded to the CPU / `offload_folder` when they do not fit) instead of moved to one `device`. A
    directory with only pickled weights is refused unless `allow_pickle` (`check_weights`); weights missing
    from the checkpoint (or unexpected in it) unless `allow_missing_weights`."""
    path, adapter = check_loadable(spec, allow_download=allow_download, allow_pickle=allow_pickle)
    if adapter is not None:
        if device_map is not None:
            raise ReachError(f"--device-map and an adapter ({spec}): the adapter is merged into the weights on one "
                             f"device; give --device instead")
    dmap = check_device_map(device_map, device, offload_folder)
    if dmap is None:
        dev = _pick_device(device)
    else:
        dev = _pick_device("auto")
    dt = _pick_dtype(dtype, dev)
    raw = read_config(path)
    if raw.get("auto_map") and not trust_remote_code and not raw.get("model_type"):
        raise _needs_own_code(spec)

    import torch

    quiet_transformers()
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    try:
        config = AutoConfig.from_pretrained(str(path), trust_remote_code=trust_remote_code, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - said in one line
        raise _not_loaded(spec, f"cannot read the config of {spec!r}", exc) from exc
    model_type = getattr(config, "model_type", None)
    remote_causal = trust_remote_code and "AutoModelForCausalLM" in (getattr(config, "auto_map", None) or {})
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not remote_causal:
        raise ReachError(
            f"model {spec!r} ({model_type or 'unknown type'}) is not a causal language model "
            "(AutoModelForCausalLM has no class for it)"
        )
    torch_dtype = getattr(torch, dt)
    try:
        placement = {} if allow_pickle else {"use_safetensors": True}
        if dmap is not None:
            placement.update(device_map=dmap, offload_folder=offload_folder, max_memory=max_memory)
        model, info = AutoModelForCausalLM.from_pretrained(
            str(path), dtype=torch_dtype, trust_remote_code=trust_remote_code, local_files_only=True,
            output_loading_info=True, ignore_mismatched_sizes=True, **placement,   # reported below, by name
        )
    except Exception as exc:  # noqa: BLE001 - said in one line
        raise _not_loaded(spec, f"cannot load model {spec!r} from {path}", exc) from exc
    report, bad = describe_loading(info)
    if bad and not allow_missing_weights:
        hint = "its config.json does not describe these weights (vocab_size, hidden_size, ...)" \
            if info.get("mismatched_keys") else "a config whose num_hidden_layers exceeds the layers in the weights " \
                                                "does this"
        raise ReachError(f"model {spec!r} does not match its checkpoint: {report} ({hint}); pass "
                         f"--allow-missing-weights to audit it anyway")
    adapter_note = ""
    if adapter is not None:
        from reachtui.model.adapter import merge_adapter

        model, adapter_note = merge_adapter(model, adapter, allow_missing_weights)
    tokenizer = _tokenizer(spec, tokenizer_dir(path, adapter), trust_remote_code)
    check_vocabulary(spec, model, tokenizer)
    placed = None
    if dmap is None:
        try:
            model = model.to(dev)
        except Exception as exc:  # noqa: BLE001
            raise ReachError(f"cannot move model {spec!r} to {dev}: {first_line(exc)}") from exc
    else:
        placed = dict(getattr(model, "hf_device_map", None) or {"": str(input_device(model))})
        dev = _describe_devices(placed)
    model.eval()
    from reachtui.model.layers import discover

    arch = discover(model)
    name = model_name(spec, adapter)   # the one naming rule: what the store calls the model
    if bad:
        report = f"loaded with --allow-missing-weights: {report}"
    if adapter is not None:     # the run records the adapter, its base and where the base came from
        let = f" with --allow-missing-weights ({adapter_note})" if adapter_note else ""
        report = f"{adapter.kind} adapter {adapter.path} merged into its base {adapter.base} ({path}){let}; {report}"
        path = adapter.path
    return LoadedModel(name=name, path=path, model=model, tokenizer=tokenizer, device=dev, dtype=dt, arch=arch,
                       device_map=placed, load_report=report)
