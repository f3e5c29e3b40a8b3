"""A question's metadata (the task record's other fields: subject, level, ...): what is stored, and how the
tables and the app read it. One column per key in `export questions` (`meta_<key>`), so every key must make
a column every export can hold: SQLite (`--where`), csv, json, parquet and pandas.

Checked when a task is read (`check_task`; refused with one line naming the first problem and how many more):

- each key makes its own column name: `meta_` and the key with non-word characters as `_` (`column_name`),
  compared as SQLite compares them, without ASCII case; `a-b`, `a_b` and `a b` cannot be keys of one task,
  nor can `Level` and `level`; a key is never empty;
- at most MAX_KEYS keys per task (SQLite holds 2,000 columns in a table);
- a value holds at most MAX_VALUE bytes as stored (text, or JSON for a list or an object): `--where` reads
  values of up to 16 MB.

Typed (`typed`) so that every export holds every value: a key whose values (nulls aside) are all booleans,
all integers within 64 bits, or all numbers (integers within 64 bits and floats) keeps them as they are;
any other key (kinds mixed, or an integer beyond 64 bits) has all of its values stored as text: a string as it
is, anything else as JSON (`true`, `1`, `3.5`, `1000000000000000000000000000000`).

On read (`table_columns`) the same rules are applied to what a store holds (a task an older reachtui stored,
or the keys of several runs together): names made distinct with `_2`, `_3`, values typed as above, a value
past MAX_VALUE cut with a mark, keys past MAX_COLUMNS left out with a note. The app shows a value as
`shown_value` writes it, and filters by its value and its kind (`same_value`: `1` is not `true`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reachtui.errors import ReachError

MAX_KEYS = 256
MAX_VALUE = 1 << 20
#: The most metadata columns one table shows (the keys of several tasks together, read from a store).
MAX_COLUMNS = 1024
_INT64 = (-(2**63), 2**63 - 1)


def column_name(key: str) -> str:
    """A metadata key as its column name: `meta_` and the key, non-word characters as `_` (subject ->
    meta_subject, "sub-field" -> meta_sub_field), so `export --where "meta_subject = 'algebra'"` reads it."""
    return "meta_" + re.sub(r"\W", "_", key)


def _folded(name: str) -> bytes:
    """A column name as SQLite compares it: ASCII letters without case."""
    return name.encode("utf-8", "surrogatepass").lower()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def kind_of(values: Iterable[Any]) -> str:
    """The column kind of a key's values (nulls aside): bool, int, float or text (see the module's docstring)."""
    kinds = set()
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool):
            kinds.add("bool")
        elif _is_int(v):
            kinds.add("int" if _INT64[0] <= v <= _INT64[1] else "text")
        elif isinstance(v, float):
            kinds.add("float")
        else:
            kinds.add("text")
    if kinds in ({"bool"}, {"int"}, {"float"}):
        return kinds.pop()
    if kinds == {"int", "float"}:
        return "float"
    return "text"


def as_kind(value: Any, kind: str) -> Any:
    """`value` as a cell of a `kind` column: text columns hold strings (anything else as its JSON)."""
    if value is None or kind != "text" or isinstance(value, str):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _size(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return len(text.encode("utf-8", "surrogatepass"))


def typed(metas: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The questions' metadata with each key's values typed as one column kind (see the module's docstring)."""
    keys: dict[str, None] = {}
    for m in metas:
        keys.update(dict.fromkeys(m))
    kinds = {k: kind_of(m.get(k) for m in metas) for k in keys}
    return [{k: as_kind(v, kinds[k]) for k, v in m.items()} for m in metas]


def problems(metas: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """What is wrong with the metadata of a task's questions ((where, metadata) pairs, `where` naming the
    question's file and line): names that make the same column, an empty key, too many keys, a value too
    large. Empty when all is well."""
    out: list[str] = []
    columns: dict[bytes, str] = {}     # folded column name -> the first key that makes it
    said: set = set()                   # each problem once (a pair of keys, a key's large value)
    for where, meta in metas:
        for key, value in meta.items():
            if key == "":
                if "" not in said:
                    said.add("")
                    out.append(f"{where}: a metadata field with an empty name (a column the header leaves unnamed)")
                continue
            first = columns.setdefault(_folded(column_name(key)), key)
            if first != key and (first, key) not in said:
                said.add((first, key))
                out.append(f"{where}: the metadata keys {first!r} and {key!r} would both be the column "
                           f"{column_name(key)} of `export questions`: rename one")
            if value is not None and ("size", key) not in said and (size := _size(value)) > MAX_VALUE:
                said.add(("size", key))
                out.append(f"{where}: the metadata value {key!r} holds {size:,} bytes, more than a metadata value "
                           f"may hold ({MAX_VALUE:,})")
    keys = {k for _w, m in metas for k in m}
    if len(keys) > MAX_KEYS:
        out.append(f"the questions have {len(keys):,} metadata keys (fields beside the question and the answer), "
                   f"more than a task may have ({MAX_KEYS})")
    return out


def check_task(metas: Sequence[tuple[str, Mapping[str, Any]]], shown: str) -> None:
    """One ReachError line for the first of `problems` (and how many more), if any."""
    found = problems(metas)
    if found:
        more = f" ({len(found) - 1} more problem{'s' if len(found) > 2 else ''} in the metadata)" if len(found) > 1 \
            else ""
        first = found[0] if found[0].startswith(shown) else f"{shown}: {found[0]}"
        raise ReachError(first + more)


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value.encode("utf-8", "surrogatepass")) > MAX_VALUE:
        head = value.encode("utf-8", "surrogatepass")[:MAX_VALUE].decode("utf-8", "ignore")
        return f"{head}… (cut: {len(value):,} characters in the store)"
    return value


def table_columns(keys: Sequence[str], metas: Sequence[Mapping[str, Any]]
                  ) -> tuple[list[tuple[str, str]], list[tuple], list[str]]:
    """The metadata columns of a table: ((column name, kind) per key, one tuple of cells per row of `metas`,
    notes), by the rules above, whatever the store holds (names made distinct, values typed and cut, at most
    MAX_COLUMNS keys)."""
    notes = []
    if len(keys) > MAX_COLUMNS:
        notes.append(f"{len(keys) - MAX_COLUMNS:,} of the questions' {len(keys):,} metadata keys are left out (a "
                     f"table holds at most {MAX_COLUMNS:,}): export fewer runs together")
        keys = keys[:MAX_COLUMNS]
    names, taken = [], set()
    for key in keys:
        name, n = column_name(key), 1
        while _folded(name) in taken:
            n += 1
            name = f"{column_name(key)}_{n}"
        taken.add(_folded(name))
        names.append(name)
    kinds = [kind_of(m.get(k) for m in metas) for k in keys]
    rows = [tuple(_cut(as_kind(m.get(k), kind)) for k, kind in zip(keys, kinds)) for m in metas]
    return list(zip(names, kinds)), rows, notes


def shown_value(value: Any) -> str:
    """A metadata value as the app writes it: a string as it is (quoted when it would read as a number, a
    boolean or null), anything else as JSON: `algebra`, `3`, `"3"`, `true`, `null`."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except (ValueError, RecursionError):
            return value
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str)


def value_kind(value: Any) -> str:
    """What a metadata value is, for comparing: bool, number, text, null or other (`True == 1` in Python)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "text" if isinstance(value, str) else "other"


def same_value(a: Any, b: Any) -> bool:
    """Equal as metadata: of the same kind and equal (`1` is `1.0`, but not `true`, nor `"1"`)."""
    return value_kind(a) == value_kind(b) and a == b
