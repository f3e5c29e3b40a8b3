"""How two outputs differ, word by word, as a rich Text, marked as `git diff --word-diff` does
([-deleted-] in red, {+inserted+} in green), so it reads in colour and without."""

from __future__ import annotations

import difflib
import re

from rich.text import Text

_TOKEN = re.compile(r"\s+|[^\s]+")


def word_diff(old: str, new: str) -> Text:
    a = _TOKEN.findall(old)
    b = _TOKEN.findall(new)
    out = Text()
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append("".join(a[i1:i2]))
            continue
        if op in ("delete", "replace"):
            out.append("[-", style="red")
            out.append("".join(a[i1:i2]), style="red strike")
            out.append("-]", style="red")
        if op in ("insert", "replace"):
            out.append("{+", style="green")
            out.append("".join(b[j1:j2]), style="bold green")
            out.append("+}", style="green")
    return out


def same_text(old: str, new: str) -> bool:
    return old.strip() == new.strip()
