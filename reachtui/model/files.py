"""What a model's files and this environment say before anything loads, without torch: the tensors a
safetensors file holds (its header only), and whether an optional package is installed. `load.py` and
`adapter.py` both read them."""

from __future__ import annotations

import json
from pathlib import Path


def safetensors_header(file: Path) -> dict[str, dict]:
    """The tensors a safetensors file holds, {name: {"dtype", "shape", "data_offsets"}}, read from its header
    only (8 bytes of length, then JSON): no torch, no weights read. ValueError saying what is wrong when it is
    not a safetensors file or is cut short (a tensor's bytes past its end); OSError when it cannot be read."""
    with open(file, "rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        if not 0 < size <= 100 << 20:
            raise ValueError("not a safetensors file (no header)")
        try:
            header = json.loads(fh.read(size))
        except (ValueError, RecursionError):
            raise ValueError("not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise ValueError("not a safetensors file (its header is not a JSON object)")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    ends = [v.get("data_offsets", [0, 0])[-1] for v in tensors.values() if isinstance(v, dict)]
    if len(ends) != len(tensors) or not all(isinstance(e, int) for e in ends):
        raise ValueError("not a safetensors file (a tensor without data offsets)")
    if 8 + size + max(ends, default=0) > Path(file).stat().st_size:
        raise ValueError("cut short: its tensors' bytes end past the end of the file")
    return tensors


def importable(name: str) -> bool:
    """Whether module `name` can be imported (found without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
