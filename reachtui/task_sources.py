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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from reachtui import jsonl
from reachtui.errors import ReachError, first_line

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
    path = Path(spec).expanduser()
    if not path.exists():
        raise ReachError(f"{spec}: no such task file or folder (give {KINDS})")
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
    data = jsonl.read_bytes(path, shown)
    records = list(jsonl.parse(data, shown, gz=False))
    return Source(path.stem, str(path.resolve()), data, records, by_bytes=True)


def read_csv(path: Path, shown: str) -> Source:
    """A header row, then one record per row (every cell text); a row with more cells than the header is
    refused, an empty cell is absent."""
    data = jsonl.read_bytes(path, shown)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ReachError(f"{shown}: not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
    records = []
    try:
        for row in reader:
            if None in row:
                raise ReachError(f"{shown}:{reader.line_num}: more cells than the header has columns")
            records.append((reader.line_num, {k: v for k, v in row.items() if v is not None and v != ""}))
    except csv.Error as exc:
        raise ReachError(f"{shown}:{reader.line_num}: not readable as CSV ({exc})") from None
    if reader.fieldnames is None:
        raise ReachError(f"{shown}: the file is empty (a CSV task needs a header row and one row per question)")
    return Source(path.stem, str(path.resolve()), canonical(records), records)


def read_parquet(path: Path, shown: str) -> Source:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ReachError("reading a parquet task needs pyarrow: pip install 'reachtui[parquet]'") from None
    try:
        rows = pq.read_table(path).to_pylist()
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
    """A folder written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`."""
    if not any((path / f).is_file() for f in ("dataset_info.json", "state.json", "dataset_dict.json")):
        raise ReachError(f"{shown}: not a file, nor a folder written by datasets' save_to_disk (no state.json "
                         f"or dataset_dict.json); give {KINDS}")
    datasets = _import_datasets()
    try:
        data = datasets.load_from_disk(str(path))
    except Exception as exc:   # datasets raises many kinds on a folder it cannot read
        raise ReachError(f"{shown}: not a readable datasets folder ({first_line(exc, 160)})") from None
    records = _dataset_records(_one_split(data, shown, None))
    return Source(path.name, str(path.resolve()), canonical(records), records)


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
