"""Protocol presets: TOML protocol files for common evaluation settings, shipped with reachtui and chosen by
name (`--protocol gsm8k-cot`), as a file is chosen by path. Each file's first comment line says what it is
for (`reachtui protocol --presets` lists them); every field a preset leaves out keeps the protocol's default.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from reachtui.errors import ReachError

PRESETS_DIR = Path(str(files("reachtui.presets")))


def preset_names() -> list[str]:
    """The presets' names (their files' stems), sorted."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))


def preset_path(name: str) -> Path:
    return PRESETS_DIR / f"{name}.toml"


def preset_description(name: str) -> str:
    """The first comment line of the preset's file."""
    for line in preset_path(name).read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""


def load_protocol(spec: str):
    """`--protocol SPEC`: a TOML file (a path that exists, or ends in .toml, or has a folder in it), else a
    preset's name; one line listing the presets for a name that is neither."""
    import os

    from reachtui.protocol import load_protocol_file

    text = str(spec)
    if not text.strip():
        raise ReachError(f"--protocol '': the name is empty (give a TOML protocol file or a preset: "
                         f"{', '.join(preset_names())})")
    if os.path.lexists(os.path.expanduser(text)) or text.endswith(".toml") or "/" in text or "\\" in text:
        return load_protocol_file(text)
    if text in preset_names():
        return load_protocol_file(preset_path(text))
    from reachtui.inputs import short_name

    raise ReachError(f"--protocol {short_name(text)}: no such file, and no such preset (presets: {', '.join(preset_names())})")
