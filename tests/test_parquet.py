"""`reachtui export TABLE --format parquet` (`-o FILE.parquet`): every table, read back with pyarrow and pandas,
holds the very records `--json` writes, typed by column; an unknown -o suffix is refused instead of silently
written as csv; the existing formats are unchanged."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

pq = pytest.importorskip("pyarrow.parquet")

from conftest import run_main  # noqa: E402
from outputs_fixtures import audit, export_json  # noqa: E402, F401 (audit: the store fixture)
from reachtui.cli import cli  # noqa: E402
from reachtui.tables import TABLES  # noqa: E402


def export(store, *args):
    return CliRunner().invoke(cli, ["export", *args, "--store", str(store)])


@pytest.mark.parametrize("table", TABLES)
def test_every_table_as_parquet_holds_the_json_records(audit, table):
    root, store, a, b = audit
    runs = [a, b] if table.startswith("compare") else [a]
    out = root / f"{table}.parquet"
    res = export(store, table, *[str(r) for r in runs], "-o", str(out))
    assert res.exit_code == 0, res.output
    assert res.stdout == ""
    got = pq.read_table(out)
    want = export_json(store, table, *runs)
    assert len(want) > 0
    assert got.to_pylist() == want
    meta = {k.decode(): v.decode() for k, v in got.schema.metadata.items()}
    assert meta["reachtui.table"] == table
    assert isinstance(json.loads(meta["reachtui.notes"]), list)


def test_parquet_columns_are_typed_and_pandas_reads_them(audit):
    pd = pytest.importorskip("pandas")
    root, store, a, _b = audit
    out = root / "summary-typed.parquet"
    assert export(store, "summary", str(a), "--format", "parquet", "-o", str(out)).exit_code == 0
    schema = pq.read_schema(out)
    assert str(schema.field("realized").type) == "double"
    assert str(schema.field("budget").type) == "int64"
    assert str(schema.field("probe").type) == "string"
    q = root / "q.parquet"
    assert export(store, "questions", str(a), "-o", str(q)).exit_code == 0
    assert str(pq.read_schema(q).field("realized").type) == "bool"
    frame = pd.read_parquet(out)
    rows = export_json(store, "summary", a)
    assert list(frame["probe"]) == [r["probe"] for r in rows]
    assert list(frame["reachable"]) == [r["reachable"] for r in rows]


def test_where_and_columns_apply_to_parquet_too(audit):
    root, store, a, _b = audit
    out = root / "few.parquet"
    res = export(store, "passk", str(a), "--where", "probe = 'routes' and k <= 2", "--columns", "probe,k,value",
                 "-o", str(out))
    assert res.exit_code == 0, res.output
    want = export_json(store, "passk", a, extra=("--where", "probe = 'routes' and k <= 2", "--columns", "probe,k,value"))
    assert pq.read_table(out).to_pylist() == want and len(want) == 2


def test_compare_writes_its_table_as_parquet(audit):
    root, store, a, b = audit
    out = root / "cmp.parquet"
    res = CliRunner().invoke(cli, ["compare", str(a), str(b), "--store", str(store), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert pq.read_table(out).to_pylist() == export_json(store, "compare", a, b)


def test_parquet_to_a_pipe_is_the_file_and_to_a_terminal_is_refused(audit):
    _root, store, a, _b = audit
    done = subprocess.run([sys.executable, "-m", "reachtui", "export", "hits", str(a), "--format", "parquet",
                           "--store", str(store)], capture_output=True)
    assert done.returncode == 0, done.stderr
    assert pq.read_table(io.BytesIO(done.stdout)).to_pylist() == export_json(store, "hits", a)
    assert b"note:" not in done.stdout            # notes go to stderr, never into the file
    script = ("import sys; sys.stdout.isatty = lambda: True\nfrom reachtui.cli import main\n"
              f"main(['export', 'hits', '{a}', '--format', 'parquet', '--store', {str(store)!r}])")
    tty = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert tty.returncode == 2 and tty.stdout == ""
    assert tty.stderr == "error: parquet is a binary format: write it with -o FILE.parquet or redirect stdout\n"



@pytest.mark.parametrize("name, says", [
    ("out.png", "unknown suffix '.png' (reachtui plot writes .png files)"),
    ("fig.pdf", "unknown suffix '.pdf' (reachtui plot writes .pdf files)"),
    ("run.eval", "unknown suffix '.eval' (reachtui export inspect writes .eval files)"),
    ("table.xlsx", "unknown suffix '.xlsx'"),
])
def test_an_unknown_suffix_is_refused_not_written_as_csv(audit, name, says):
    root, store, a, _b = audit
    out = root / name
    code, _out, err = run_main(["export", "summary", str(a), "-o", str(out), "--store", str(store)])
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: -o {out}: {says}"), err
    assert "--format" in err
    assert not out.exists()
    code, _out, err = run_main(["compare", "1", "2", "-o", str(out), "--store", str(store)])
    assert code == 2 and says in err and not out.exists()


def test_a_named_format_writes_any_suffix_and_no_suffix_stays_csv(audit):
    root, store, a, _b = audit
    code, _out, _err = run_main(["export", "passk", str(a), "--format", "csv", "-o", str(root / "p.dat"),
                                 "--store", str(store)])
    assert code == 0 and (root / "p.dat").read_text().startswith("run,probe,estimator,k,value")
    code, _out, _err = run_main(["export", "passk", str(a), "-o", str(root / "plain"), "--store", str(store)])
    assert code == 0 and (root / "plain").read_text().startswith("run,probe,estimator,k,value")


def test_without_pyarrow_the_line_names_the_extra(audit, monkeypatch):
    root, store, a, _b = audit
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    code, _out, err = run_main(["export", "summary", str(a), "-o", str(root / "n.parquet"), "--store", str(store)])
    assert code == 2 and err == "error: parquet needs pyarrow: pip install 'reachtui[parquet]'\n"
    assert not (root / "n.parquet").exists()
