"""A `Table` as a parquet file (`reachtui export TABLE --format parquet`, `-o FILE.parquet`), for pandas,
polars, DuckDB and Arrow readers: the cells json writes (`formats.to_records`: fractions in 0..1, missing as
null, bool columns as booleans), typed by the column kinds, and the table's name, title, notes and warnings in
the file's schema metadata (keys `reachtui.*`). Needs pyarrow (the optional extra `reachtui[parquet]`),
imported only when a parquet file is written.
"""

from __future__ import annotations

import io
import json

from reachtui import __version__
from reachtui.errors import ReachError
from reachtui.tables.formats import to_records
from reachtui.tables.table import PANDAS_DTYPES, Table

PARQUET = "parquet"

#: The Arrow type of each column kind (text and folded intervals are strings).
_ARROW_TYPES = {"text": "string", "interval": "string", "int": "int64", "frac": "float64", "float": "float64",
                "pvalue": "float64", "bool": "bool_"}


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ReachError("parquet needs pyarrow: pip install 'reachtui[parquet]'") from None
    return pyarrow, pyarrow.parquet


def _columns(table: Table) -> dict[str, list]:
    """The table's cells column by column, as json writes them. A plain table (the raw attempts: values as
    SQLite returned them, millions of rows) goes column by column without a dict per row."""
    names = table.column_names
    if not table.plain:
        records = to_records(table)
        return {n: [r[n] for r in records] for n in names}
    out = {}
    for i, col in enumerate(table.columns):
        values = [row[i] for row in table.rows]
        if col.kind == "bool":
            values = [None if v is None else bool(v) for v in values]
        out[col.name] = values
    return out


#: pandas' own name of each dtype of PANDAS_DTYPES, as pandas writes it into a parquet file's metadata.
_PANDAS_TYPES = {"string": "unicode", "Int64": "int64", "boolean": "bool", "float64": "float64"}


def pandas_metadata(table: Table) -> str:
    """The `pandas` schema metadata pandas itself writes (`DataFrame.to_parquet`), naming each column's
    dtype (`PANDAS_DTYPES`): `pandas.read_parquet` then gives the frame `reachtui.api`'s `to_pandas` gives, an
    integer column with a missing value still Int64 (not float64 with NaN), text `string` with <NA>."""
    columns = [{"name": c.name, "field_name": c.name, "pandas_type": _PANDAS_TYPES[PANDAS_DTYPES[c.kind]],
                "numpy_type": PANDAS_DTYPES[c.kind], "metadata": None} for c in table.columns]
    return json.dumps({"index_columns": [], "column_indexes": [], "columns": columns,
                       "creator": {"library": "reachtui", "version": __version__}, "pandas_version": "2.0.0"})


def schema_metadata(table: Table) -> dict[str, str]:
    """What travels with the cells: the table's name and title, its notes and warnings (json lists), and how
    pandas types its columns (`pandas_metadata`)."""
    return {"reachtui.table": table.name, "reachtui.title": table.title,
            "reachtui.notes": json.dumps(list(table.notes), ensure_ascii=False),
            "reachtui.warnings": json.dumps(list(table.warnings), ensure_ascii=False),
            "reachtui.version": __version__, "pandas": pandas_metadata(table)}


def to_parquet(table: Table) -> bytes:
    """The table as the bytes of one parquet file (one row group per 1M rows, snappy-compressed)."""
    pa, pq = _pyarrow()
    fields = [pa.field(c.name, getattr(pa, _ARROW_TYPES[c.kind])()) for c in table.columns]
    schema = pa.schema(fields, metadata=schema_metadata(table))
    cells = _columns(table)
    arrow = pa.table({name: pa.array(cells[name], type=f.type) for name, f in zip(table.column_names, fields)},
                     schema=schema)
    buf = io.BytesIO()
    pq.write_table(arrow, buf, row_group_size=1 << 20)
    return buf.getvalue()
