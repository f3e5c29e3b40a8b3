"""Notes are said where they explain a table, and `--quiet` drops them: an import prints its summary without the
intervals' legend (it shows no interval), an export keeps a note only while a column it explains is shown, and
`-q` on export, compare and import prints no note (warnings stay)."""

from __future__ import annotations

import pytest

from conftest import run_main
from reachtui.outcomes import NO_GAIN, UNBOUNDED
from reachtui.tables.summary import SUMMARY_NOTE


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("notes")
    store = str(root / "s.sqlite")
    import os

    here = os.getcwd()
    os.chdir(root)
    try:
        assert run_main(["examples"])[0] == 0
        base = run_main(["import", "base.jsonl", "--task", "demo", "--model", "base", "--store", store])
        tuned = run_main(["import", "tuned.jsonl", "--task", "demo", "--model", "tuned", "--store", store, "-q"])
    finally:
        os.chdir(here)
    return store, base, tuned


def test_an_import_prints_its_table_and_run_without_the_legend_of_columns_it_does_not_show(imported):
    _store, (code, out, err), (code_q, out_q, err_q) = imported
    assert code == 0 and err == "" and SUMMARY_NOTE[:40] not in out
    lines = out.splitlines()
    assert lines[0].strip() == "run 1 (imported, protocol 392e62e05b89): 4 realized + 16 sample attempts"
    assert lines[-1] == "run 1" and "note" not in out
    assert code_q == 0 and err_q == "" and out_q.splitlines()[-1] == "run 2"


def test_an_export_keeps_a_note_only_with_the_columns_it_explains(imported):
    store = imported[0]
    code, out, _ = run_main(["export", "summary", "--run", "base", "--run", "tuned", "--store", store, "--format", "md",
                             "--columns", "model,probe,realized,reachable,gap"])
    assert code == 0 and out.splitlines() == [
        "| model | probe | realized (%) | reachable (%) | gap (%) |",
        "|:---|:---|---:|---:|---:|",
        "| base | sample | 50.0 | 100.0 | +50.0 |",
        "| tuned | sample | 75.0 | 75.0 | 0.0 |"]
    code, out, _ = run_main(["export", "summary", "--run", "base", "--run", "tuned", "--store", store, "--format", "md",
                             "--columns", "model,probe,retained"])
    notes = [line for line in out.splitlines() if line.startswith("_")]
    assert notes[:2] == [f"_sample, run 2: {NO_GAIN}_  ", f"_sample, run 1: {UNBOUNDED}_  "]
    assert notes[2].startswith("_95% intervals: Wilson") and len(notes) == 3
    code, out, err = run_main(["export", "summary", "--run", "base", "--store", store, "--csv", "--columns",
                               "probe,control"])
    assert err.startswith("note: 95% intervals: Wilson") and len(err.splitlines()) == 1


def test_quiet_drops_every_note_from_export_and_compare(imported):
    store = imported[0]
    code, out, err = run_main(["export", "summary", "--run", "base", "--store", store, "--format", "md", "-q",
                               "--columns", "probe,retained"])
    assert code == 0 and err == "" and out.splitlines() == [
        "| probe | retained (vote) (%) |", "|:---|---:|", "| sample | 0.0 |"]
    code, out, err = run_main(["export", "passk", "--run", "base", "--store", store, "--csv", "--quiet"])
    assert code == 0 and err == "" and out.startswith("run,probe,estimator,k,value")
    code, out, err = run_main(["compare", "base", "tuned", "--store", store, "--format", "md", "-q"])
    assert code == 0 and err == "" and not any(line.startswith("_") for line in out.splitlines())
    code, out, err = run_main(["compare", "base", "tuned", "--store", store, "--format", "md"])
    assert "_compared on the 4 question(s) both runs have (run 1: 4, run 2: 4)_  " in out.splitlines()
