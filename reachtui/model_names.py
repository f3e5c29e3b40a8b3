"""What the store calls a PEFT adapter run's model: the base's name, `+`, the adapter's folder name and six hex
digits of the folder's absolute path — `demo+demo-lora#3f2a1c`. Readable in `reachtui runs` and the tables,
one model per adapter folder (two folders of one name, checkpoint-500 of two trainings, are two models; the
same folder is always the same model, so its runs resume and `--run NAME` finds them).

Stores written before this rule called such a model `BASE+/the/adapter/path`; `renamed_adapter` gives such a
name's new form, and a writer's migration to schema 8 renames them (`reachtui.store.schema`). Pure Python: the
model room names models with it, the store migrates with it, and `stored_model` says what to load for a stored run
(`trace`, `export lens`, the app).
"""

from __future__ import annotations

import hashlib
import os
import re

#: The digits of the folder's path a name carries: 16.7 million folders of one name before two may meet.
DIGEST_CHARS = 6

_OLD_FORM = re.compile(r"(?P<base>.+?)\+(?P<path>/.+)", re.DOTALL)


def adapter_name(base_name: str, path: str | os.PathLike) -> str:
    """`BASE+FOLDER#DIGEST` for the adapter at `path` (its resolved absolute path) on the base called
    `base_name`."""
    text = str(path)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
    folder = text.rstrip("/").rsplit("/", 1)[-1] or text
    return f"{base_name}+{folder}#{digest}"


def stored_model(name: str, model_path: str | None) -> str:
    """The model a stored run was made with, as it can be loaded again: its stored path where that still
    exists, else its name (`demo`, a hub id in the cache)."""
    return model_path if model_path and os.path.exists(model_path) else name


def renamed_adapter(name: str, model_path: str | None) -> str | None:
    """The new name of a model stored under the old rule (`BASE+/the/adapter/path`, the path also its stored
    `model_path`, as the audit wrote both), or None for any other name."""
    m = _OLD_FORM.fullmatch(name)
    if m is None or model_path is None or m.group("path") != str(model_path):
        return None
    return adapter_name(m.group("base"), m.group("path"))
