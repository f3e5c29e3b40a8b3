"""`reachtui.api`: the store's runs and tables as rows (the records `reachtui export --json` writes) or pandas
DataFrames, through the same table functions as the CLI; importing it loads neither torch nor textual."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from outputs_fixtures import export_json, make_audit_store  # noqa: E402
from reachtui import api  # noqa: E402
from reachtui.cli import cli  # noqa: E402
from reachtui.errors import ReachError  # noqa: E402


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    store, _task, a, b = make_audit_store(root)
    return root, store, a, b


def test_runs_are_what_reachtui_runs_lists(audit):
    _root, store, a, b = audit
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--json", "--store", str(store)]).stdout)
    with api.open_store(store) as audit_store:
        runs = audit_store.runs()
    assert [(r["id"], r["model"], r["status"], r["protocol_hash"], r["n_attempts"]) for r in runs] == [
        (r["id"], r["model"], r["status"], r["protocol_hash"], r["n_attempts"]) for r in listed]
    assert [r["model"] for r in runs] == ["base", "tuned"]


@pytest.mark.parametrize("method, table", [("summary", "summary"), ("questions", "questions"),
                                           ("attempts", "attempts"), ("passk", "passk")])
def test_each_table_is_the_exports_records(audit, method, table):
    _root, store, a, b = audit
    with api.open_store(store) as s:
        rows = getattr(s, method)(a, b)
        by_name = s.table(table, "base", "tuned")       # model names resolve as the CLI resolves them
    assert rows == export_json(store, table, a, b) == by_name
    assert rows.name == table and isinstance(rows.notes, list)


def test_compare_and_filters(audit):
    _root, store, a, b = audit
    with api.open_store(store) as s:
        assert s.compare(a, b) == export_json(store, "compare", a, b)
        few = s.questions(a, where="realized = 0", columns=["question_id", "gold"], order="question_id desc", limit=3)
    assert few == export_json(store, "questions", a, extra=("--where", "realized = 0", "--columns", "question_id,gold",
                                                            "--order", "question_id desc", "--limit", "3"))
    assert list(few.columns) == ["question_id", "gold"]


def test_rows_become_a_typed_dataframe(audit):
    pd = pytest.importorskip("pandas")
    _root, store, a, _b = audit
    with api.open_store(store) as s:
        attempts = s.attempts(a).to_pandas()
        summary = s.summary(a).to_pandas()
    assert len(attempts) == len(export_json(store, "attempts", a))
    assert str(attempts["correct"].dtype) == "boolean" and str(attempts["attempt"].dtype) == "Int64"
    assert str(summary["reachable"].dtype) == "float64"
    assert list(summary["reachable"]) == [r["reachable"] for r in export_json(store, "summary", a)]
    # a missing value stays missing (a realized attempt has no route)
    assert attempts["route"].isna().any()
    assert isinstance(summary, pd.DataFrame) and summary.attrs["table"] == "summary"


def test_bad_requests_raise_reach_errors(audit, tmp_path):
    _root, store, _a, _b = audit
    with api.open_store(store) as s:
        with pytest.raises(ReachError, match="unknown table 'nope'"):
            s.table("nope")
        with pytest.raises(ReachError, match="no run 99"):
            s.summary(99)
        with pytest.raises(ReachError, match="bad --where"):
            s.questions(where="no_such_column = 1")
    with pytest.raises(ReachError):
        api.open_store(tmp_path / "absent.sqlite")


def test_without_pandas_to_pandas_names_the_extra(audit, monkeypatch):
    _root, store, a, _b = audit
    monkeypatch.setitem(sys.modules, "pandas", None)
    with api.open_store(store) as s:
        rows = s.summary(a)
    with pytest.raises(ReachError, match=r"pip install 'reachtui\[pandas\]'"):
        rows.to_pandas()


def test_the_api_loads_neither_torch_nor_textual(audit):
    _root, store, a, _b = audit
    code = ("import sys\nfrom reachtui import api\n"
            f"s = api.open_store({str(store)!r}); s.summary({a}); s.attempts({a}); s.close()\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'textual'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
