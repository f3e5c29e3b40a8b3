"""One rule for a missing value in every output: empty in csv/tsv, null in json/ndjson and parquet, "–" in md,
LaTeX and the terminal, None in the API's rows, and in pandas <NA> for integer, boolean and text columns (an
integer column stays Int64) and NaN for float columns — the same frame from `Rows.to_pandas()` and from
`pandas.read_parquet` of the export. An integer is written as an integer everywhere."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from outputs_fixtures import audit  # noqa: F401 (the store fixture)
from reachtui import api
from reachtui.cli import cli

#: (table, its runs by position in the fixture, columns with a missing value and without intervals)
CASES = [
    ("questions", 1, ["run", "question_id", "realized", "first_hit_sample", "first_hit_routes", "first_hit_mcts",
                      "hits_routes", "control_routes"]),
    ("summary", 1, ["run", "probe", "budget", "realized", "reachable", "gap", "robust", "retained",
                    "failure_set_size", "chance"]),
    ("attempts", 1, ["run", "question_id", "probe", "attempt", "route", "silenced", "seed", "correct", "new_tokens"]),
]


def export(store, table, runs, fmt, columns):
    res = CliRunner().invoke(cli, ["export", table, *map(str, runs), "--store", str(store), "--format", fmt,
                                   "--columns", ",".join(columns), "-q"])
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize("table, n_runs, columns", CASES, ids=[c[0] for c in CASES])
def test_every_format_writes_a_missing_value_by_one_rule(audit, table, n_runs, columns):  # noqa: F811
    _root, store, a, b = audit
    runs = [a, b][:n_runs]
    records = json.loads(export(store, table, runs, "json", columns))
    missing = {(i, c) for i, r in enumerate(records) for c in columns if r[c] is None}
    assert missing, "the case must hold a missing value"
    ndjson = [json.loads(line) for line in export(store, table, runs, "ndjson", columns).splitlines()]
    assert ndjson == records
    for fmt, delimiter in (("csv", ","), ("tsv", "\t")):
        rows = list(csv.DictReader(io.StringIO(export(store, table, runs, fmt, columns)), delimiter=delimiter))
        assert {(i, c) for i, r in enumerate(rows) for c in columns if r[c] == ""} == missing, fmt
        ints = [c for c in columns if isinstance(next((r[c] for r in records if r[c] is not None), None), int)
                and not isinstance(next(r[c] for r in records if r[c] is not None), bool)]
        assert all("." not in r[c] for r in rows for c in ints), fmt       # an integer is written as one
    md = [line.strip("|").split("|") for line in export(store, table, runs, "md", columns).splitlines()[2:]
          if line.startswith("|")]
    assert {(i, c) for i, r in enumerate(md) for c, cell in zip(columns, r) if cell.strip() == "–"} == missing
    latex = [line.removesuffix(" \\\\").split(" & ") for line in export(store, table, runs, "latex", columns)
             .split("\\midrule\n", 1)[1].split("\\bottomrule")[0].splitlines()]
    assert {(i, c) for i, r in enumerate(latex) for c, cell in zip(columns, r) if cell.strip() == "--"} == missing
    text = export(store, table, runs, "table", columns)
    assert text.count("–") >= len(missing)
    with api.open_store(store) as s:
        rows = s.table(table, *runs, columns=columns)
    assert list(rows) == records                 # None in the API's rows, where json has null


def test_pandas_gets_the_same_frame_from_the_api_and_from_a_parquet_export(audit, tmp_path):  # noqa: F811
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    _root, store, a, b = audit
    for table, runs in (("questions", [a]), ("summary", [a]), ("compare", [a, b]), ("attempts", [a])):
        out = tmp_path / f"{table}.parquet"
        res = CliRunner().invoke(cli, ["export", table, *map(str, runs), "--store", str(store), "-o", str(out)])
        assert res.exit_code == 0, res.output
        with api.open_store(store) as s:
            mine = s.table(table, *runs).to_pandas()
        read = pd.read_parquet(out)
        pd.testing.assert_frame_equal(read, mine, check_like=False)
    frame = pd.read_parquet(tmp_path / "questions.parquet")
    assert str(frame["first_hit_routes"].dtype) == "Int64" and str(frame["first_hit_sample"].dtype) == "Int64"
    assert frame["first_hit_routes"].isna().any() and frame["first_hit_routes"].dropna().map(type).eq(int).all()
    assert frame["first_hit_routes"][frame["first_hit_routes"].isna()].iloc[0] is pd.NA
    assert str(frame["realized"].dtype) == "boolean" and str(frame["question_id"].dtype) == "string"
    summary = pd.read_parquet(tmp_path / "summary.parquet")
    assert str(summary["reachable"].dtype) == "float64" and summary["chance"].isna().all()
