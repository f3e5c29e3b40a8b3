"""Where a task's records come from: one reader per format, each ending in the same `Source` (records as
(record number, object) pairs), which `reachtui.tasks` maps to questions.

- JSONL (`.jsonl`, `.json`, anything not named below): one object per line, numbered by line;
- CSV (`.csv`, `.tsv`): a header row and one question per row, every cell text (a `choices` cell as a JSON
  list), numbered by the line the row ends on;
- parquet (`.parquet`, `.pq`; pyarrow, `reachtui[parquet]`): one question per row;
- a `datasets` folder written by `save_to_disk` (`reachtui[datasets]`): a Dataset, or a DatasetDict whose
  `test` split (or only split) is read;
- `hf:NAME[:CONFIG][:SPLIT]`: a dataset already in the local Hugging Face cache (HF_DATASETS_CACHE), read
  with `datasets.load_dataset` offline unless `allow_download`, as models are.

pyarrow and datasets are imported here only, and only when such a task is read (so `reachtui runs` and
`export` never load them). A JSONL task is known by its bytes (its sha256, as before field mappings); the
others by their records, as canonical JSON.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from reachtui import jsonl
from reachtui.errors import ReachError, first_line
from reachtui.inputs import TASK, check_input, open_input, short_name, size_text, too_long

#: The task sources, as `--task` help and errors name them.
KINDS = "a JSONL, CSV or parquet file, a `datasets` folder (save_to_disk), hf:NAME[:CONFIG][:SPLIT] or demo"


@dataclass(frozen=True)
class Source:
    name: str            # what the task is called by default: the file's stem, the dataset's name
    path: str            # where it is: an absolute path, or hf:NAME:CONFIG:SPLIT
    fingerprint: bytes   # what identifies its content (hashed into the task's sha256)
    records: list[tuple[int, dict]]
    by_bytes: bool = False  # the fingerprint is the file's bytes (JSONL): the default mapping adds nothing


def read_source(spec: str, *, allow_download: bool = False) -> Source:
    """The records of the task source `spec` (see the module's docstring)."""
    if spec.startswith("hf:"):
        return read_hf(spec, allow_download=allow_download)
    if spec.strip() and not os.path.lexists(os.path.expanduser(spec)) and not too_long(spec):
        raise ReachError(f"{spec}: no such task file or folder (give {KINDS})")
    path = check_input(spec, TASK, folder=True)      # a regular file or a folder, never a pipe or a device
    if path.is_dir():
        return read_saved_dataset(path, spec)
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return read_csv(path, spec)
    if suffix in (".parquet", ".pq"):
        return read_parquet(path, spec)
    return read_jsonl(path, spec)


def canonical(records: list[tuple[int, dict]]) -> bytes:
    """Records as canonical JSON bytes: what a task of records (not of a file's bytes) is known by."""
    return json.dumps([r for _n, r in records], sort_keys=True, ensure_ascii=False, default=str).encode()


def read_jsonl(path: Path, shown: str) -> Source:
    data = jsonl.read_bytes(path, shown, TASK)
    records = list(jsonl.parse(data, shown, gz=False))
    return Source(path.stem, str(path.resolve()), data, records, by_bytes=True)


class _Numbered:
    """The lines of a text, counted as the CSV reader takes them (so an error names its own line)."""

    def __init__(self, text: str) -> None:
        self._lines = io.StringIO(text, newline="")
        self.n = 0

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.n += 1
        return line


def read_csv(path: Path, shown: str) -> Source:
    """A header row, then one record per row (every cell text), numbered by the line the row ends on. Refused:
    a header naming a column twice, a cell under a column the header leaves unnamed, a row with more cells
    than the header, a quote never closed, a cell past the CSV reader's size limit. An empty cell is absent."""
    data = jsonl.read_bytes(path, shown, TASK)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ReachError(f"{shown}: not UTF-8 text") from None
    lines = _Numbered(text)
    reader = csv.reader(lines, delimiter="\t" if path.suffix.lower() == ".tsv" else ",", strict=True)
    records: list[tuple[int, dict]] = []
    header: list[str] | None = None
    start = 1
    try:
        for row in reader:
            if header is None:
                header = row
                _check_header(header, shown, lines.n)
            elif row:
                records.append((lines.n, _csv_record(header, row, shown, lines.n)))
            start = lines.n + 1
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise ReachError(f"{shown}:{start}: a quoted cell that starts on this line is never closed (a \" "
                             f"missing)") from None
        if "field larger than field limit" in str(exc):
            raise ReachError(f"{shown}:{lines.n}: a cell longer than {csv.field_size_limit():,} characters, the "
                             f"CSV reader's limit (a JSONL task has none)") from None
        raise ReachError(f"{shown}:{lines.n}: not readable as CSV ({exc})") from None
    if header is None:
        raise ReachError(f"{shown}: the file is empty (a CSV task needs a header row and one row per question)")
    return Source(path.stem, str(path.resolve()), canonical(records), records)


def _check_header(header: list[str], shown: str, line: int) -> None:
    """A header names each column once (else which cell is the field would be a guess)."""
    first: dict[str, int] = {}
    for i, name in enumerate(header, start=1):
        if name == "":
            continue
        if name in first:
            raise ReachError(f"{shown}:{line}: the header names the column {short_name(name, 60)!r} twice (columns "
                             f"{first[name]} and {i}): which one holds the field would be a guess; rename one")
        first[name] = i


def _csv_record(header: list[str], row: list[str], shown: str, line: int) -> dict:
    """A row as a record: its non-empty cells under their header names."""
    if len(row) > len(header):
        raise ReachError(f"{shown}:{line}: more cells than the header has columns")
    record = {}
    for i, (name, value) in enumerate(zip(header, row), start=1):
        if value == "":
            continue
        if name == "":
            raise ReachError(f"{shown}:{line}: a cell in column {i}, which the header leaves without a name")
        record[name] = value
    return record


def read_parquet(path: Path, shown: str) -> Source:
    """One record per row; a file naming a column twice, or whose rows take more than a task file may hold
    once read (`inputs.TASK`), is refused."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ReachError("reading a parquet task needs pyarrow: pip install 'reachtui[parquet]'") from None
    with open_input(path, TASK, shown) as fh:
        try:
            source = pq.ParquetFile(fh)
            names = source.schema_arrow.names
            size = sum(source.metadata.row_group(i).total_byte_size for i in range(source.metadata.num_row_groups))
            twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
            if twice is not None:
                raise ReachError(f"{shown}: the file names the column {short_name(twice, 60)!r} twice: which one "
                                 f"holds the field would be a guess; rename one")
            if size > TASK.limit:
                raise ReachError(f"{shown}: its rows take {size:,} bytes once read, more than a task may hold "
                                 f"({size_text(TASK.limit)})")
            rows = source.read().to_pylist()
        except ReachError:
            raise
        except Exception as exc:  # OSError, or pyarrow's own kinds (ArrowInvalid, ...) on a file it cannot read
            raise ReachError(f"{shown}: not a readable parquet file ({first_line(exc, 160)})") from None
    records = list(enumerate(rows, start=1))
    return Source(path.stem, str(path.resolve()), canonical(records), records)


def _import_datasets():
    try:
        import datasets
    except ImportError:
        raise ReachError("reading a Hugging Face dataset needs datasets: pip install 'reachtui[datasets]'") from None
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    return datasets


def _one_split(data, shown: str, split: str | None):
    """A Dataset of `data` (a Dataset or a DatasetDict: its `split`, else `test`, else its only split)."""
    if not hasattr(data, "keys"):      # a Dataset
        return data
    names = list(data.keys())
    if split is not None:
        if split not in names:
            raise ReachError(f"{shown}: no split {split!r} (splits: {', '.join(names)})")
        return data[split]
    if "test" in names:
        return data["test"]
    if len(names) == 1:
        return data[names[0]]
    raise ReachError(f"{shown}: several splits ({', '.join(names)}): name one (hf:NAME:CONFIG:SPLIT, or the "
                     f"split's folder)")


def _dataset_records(ds) -> list[tuple[int, dict]]:
    return list(enumerate(ds.to_list(), start=1))


def read_saved_dataset(path: Path, shown: str) -> Source:
    """A folder written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`: regular files only (a pipe in
    it would block the reader), at most a task's limit in all (`inputs.TASK`)."""
    if not any((path / f).is_file() for f in ("dataset_info.json", "state.json", "dataset_dict.json")):
        raise ReachError(f"{shown}: not a file, nor a folder written by datasets' save_to_disk (no state.json "
                         f"or dataset_dict.json); give {KINDS}")
    total = 0
    for file in sorted(path.rglob("*")):
        if not file.is_dir():
            total += check_input(file, TASK, f"{shown}: {file.relative_to(path)}").stat().st_size
    if total > TASK.limit:
        raise ReachError(f"{shown}: its files hold {total:,} bytes, more than a task may hold "
                         f"({size_text(TASK.limit)})")
    datasets = _import_datasets()
    try:
        data = datasets.load_from_disk(str(path))
    except Exception as exc:   # datasets raises many kinds on a folder it cannot read
        empty = _empty_part(path)
        if empty is not None:
            what = "the dataset" if empty == "" else f"its split {empty!r}"
            raise ReachError(f"{shown}: {what} has no rows (saved with 0 rows, which datasets cannot read back), "
                             f"so there are no questions") from None
        raise ReachError(f"{shown}: not a readable datasets folder ({first_line(exc, 160)})") from None
    records = _dataset_records(_one_split(data, shown, None))
    return Source(path.name, str(path.resolve()), canonical(records), records)


def _empty_part(path: Path) -> str | None:
    """The saved Dataset in `path` ("") or the split of a saved DatasetDict (its name) that has no data files,
    as one saved with 0 rows has (`load_from_disk` fails on it with an IndexError); None if none."""
    from reachtui.parsing import json_file

    for state in [path / "state.json", *sorted(path.glob("*/state.json"))]:
        try:
            if state.is_file() and json_file(state, "{why}", TASK).get("_data_files") == []:
                return "" if state.parent == path else state.parent.name
        except (ReachError, AttributeError):
            continue
    return None


@contextlib.contextmanager
def _offline(datasets, offline: bool) -> Iterator[None]:
    """datasets' offline switch (read from HF_HUB_OFFLINE when it was imported), on for the length of a read."""
    saved = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = saved or offline
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE = saved


def parse_hf(spec: str) -> tuple[str, str | None, str | None]:
    """hf:NAME[:CONFIG][:SPLIT] -> (NAME, CONFIG or None, SPLIT or None); an empty part is None."""
    parts = spec[3:].split(":")
    if not parts[0].strip() or len(parts) > 3:
        raise ReachError(f"--task {spec}: write a Hugging Face dataset as hf:NAME[:CONFIG][:SPLIT]")
    name, config, split = (parts + [None, None])[:3]
    return name.strip(), (config or None), (split or None)


def read_hf(spec: str, *, allow_download: bool = False) -> Source:
    """A dataset in the local Hugging Face cache (downloaded only with `allow_download`)."""
    name, config, split = parse_hf(spec)
    datasets = _import_datasets()
    try:
        with _offline(datasets, not allow_download):
            data = datasets.load_dataset(name, config, split=split)
    except Exception as exc:    # datasets raises many kinds (ConnectionError, FileNotFoundError, ValueError, ...)
        first = first_line(exc, 200)
        if allow_download:
            raise ReachError(f"--task {spec}: cannot be read ({first})") from None
        raise ReachError(f"--task {spec}: not readable from the local Hugging Face datasets cache "
                         f"{datasets.config.HF_DATASETS_CACHE} ({first}); --allow-download fetches it from the "
                         f"Hugging Face hub") from None
    ds = _one_split(data, spec, split)
    records = _dataset_records(ds)
    config = config or getattr(ds, "config_name", None) or "default"
    split = split or str(getattr(ds, "split", "") or "")
    where = f"hf:{name}:{config}:{split}"
    digest = hashlib.sha256(where.encode() + b"\0" + canonical(records)).digest()
    return Source(name.split("/")[-1], where, digest, records)
