"""Task sources (`reachtui.tasks.sources`, `reachtui.tasks`): the same questions read from real JSONL, CSV and
parquet files (pyarrow), a `datasets` folder written with `save_to_disk` and a dataset in a local Hugging Face
cache (a temporary HF_HOME, nothing downloaded); the field flags and presets (GSM8K, MATH's \\boxed{} gold,
ARC's labelled choices, MMLU's index gold); every other column kept as the question's metadata, stored,
exported (`export --where "meta_subject = ..."`) and filtered in the app; bad inputs as one `error:` line."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import fresh_python, run_main

from reachtui.errors import ReachError
from reachtui.store.schema import SCHEMA_VERSION
from reachtui.tasks import Fields, load_task

ROWS = [
    {"id": "q1", "problem": "What is 2 + 3?", "solution": "Add them: $2 + 3 = \\boxed{5}$.", "subject": "algebra",
     "level": 1},
    {"id": "q2", "problem": "What is 7 - 4?", "solution": "Take away: \\boxed{3}", "subject": "counting",
     "level": 2},
    {"id": "q3", "problem": "Half of 10?", "solution": "It is \\boxed{\\frac{10}{2}} = \\boxed{5}", "subject": "algebra",
     "level": 3},
]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_csv(path: Path, rows) -> Path:
    with open(path, "w", newline="") as fh:
        out = csv.DictWriter(fh, fieldnames=list(rows[0]))
        out.writeheader()
        out.writerows(rows)
    return path


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def write_parquet(path: Path, rows) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def save_dataset(path: Path, rows, split: str | None = None) -> Path:
    import datasets

    ds = datasets.Dataset.from_list(rows)
    (datasets.DatasetDict({split: ds, "train": ds.select([0])}) if split else ds).save_to_disk(str(path))
    return path


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """A temporary HF_HOME whose datasets cache holds `toy_math` (config default, split test), built by the real
    `datasets` library from a local folder: nothing is downloaded."""
    import datasets

    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(home / "datasets"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", home / "datasets")
    src = tmp_path / "src" / "toy_math"
    src.mkdir(parents=True)
    write_jsonl(src / "test.jsonl", ROWS)
    datasets.load_dataset(str(src))                   # a local folder: the builder writes it into the cache
    monkeypatch.chdir(tmp_path)                       # no folder named toy_math here: the name is the cache's
    return home


def test_every_format_gives_the_same_questions_with_their_metadata(tmp_path, hf_cache):
    made = {
        "jsonl": write_jsonl(tmp_path / "t.jsonl", ROWS),
        "csv": write_csv(tmp_path / "t.csv", ROWS),
        "parquet": write_parquet(tmp_path / "t.parquet", ROWS),
        "datasets": save_dataset(tmp_path / "t_ds", ROWS),
        "datasets split": save_dataset(tmp_path / "t_dd", ROWS, split="test"),
        "hf": "hf:toy_math",
        "hf split": "hf:toy_math:default:test",
    }
    tasks = {kind: load_task(str(spec)) for kind, spec in made.items()}
    first = tasks["jsonl"]
    assert [(q.id, q.question, q.answer, q.solution) for q in first.questions] == [
        ("q1", "What is 2 + 3?", "5", ROWS[0]["solution"]), ("q2", "What is 7 - 4?", "3", ROWS[1]["solution"]),
        ("q3", "Half of 10?", "5", ROWS[2]["solution"])]            # MATH (problem, solution): the last \boxed{}
    assert first.questions[0].metadata == {"subject": "algebra", "level": 1}
    for kind, task in tasks.items():
        assert [(q.id, q.question, q.answer) for q in task.questions] == \
            [(q.id, q.question, q.answer) for q in first.questions], kind
        # CSV cells are text; the typed formats keep the level a number
        want = [{"subject": r["subject"], "level": str(r["level"]) if kind == "csv" else r["level"]} for r in ROWS]
        assert [q.metadata for q in task.questions] == want, kind
    assert tasks["hf"].name == "toy_math" and tasks["hf"].path == "hf:toy_math:default:test"
    assert tasks["datasets"].name == "t_ds"
    # another mapping of the same file is another task (the store knows tasks by their sha256)
    again = load_task(str(made["parquet"]), fields=Fields(question="problem", answer="solution", id="id",
                                                         field_map="math"))
    assert again.sha256 == tasks["parquet"].sha256
    other = load_task(str(made["parquet"]), fields=Fields(field_map="math", id="level"))
    assert [q.id for q in other.questions] == ["1", "2", "3"] and other.sha256 != tasks["parquet"].sha256


def test_a_dataset_not_in_the_cache_is_one_line_and_nothing_is_fetched(hf_cache):
    with pytest.raises(ReachError, match=r"--task hf:someone/absent: not readable from the local Hugging Face "
                                         r"datasets cache .*hf/datasets \(.*\); --allow-download fetches it"):
        load_task("hf:someone/absent")
    with pytest.raises(ReachError, match="Unknown split \"validation\""):
        load_task("hf:toy_math:default:validation")
    with pytest.raises(ReachError, match=r"write a Hugging Face dataset as hf:NAME\[:CONFIG\]\[:SPLIT\]"):
        load_task("hf:a:b:c:d")


def test_the_hub_is_asked_only_with_allow_download(hf_cache, monkeypatch):
    """datasets' offline switch is on for the read unless --allow-download (and put back after)."""
    import datasets

    seen = []

    def load_dataset(name, config=None, split=None):
        seen.append((name, datasets.config.HF_HUB_OFFLINE))
        raise ConnectionError("no network in this test")

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    with pytest.raises(ReachError, match="--allow-download fetches it"):
        load_task("hf:org/name:main")
    with pytest.raises(ReachError, match=r"--task hf:org/name:main: cannot be read \(no network in this test\)"):
        load_task("hf:org/name:main", allow_download=True)
    assert seen == [("org/name", True), ("org/name", False)] and datasets.config.HF_HUB_OFFLINE is False


def test_presets_and_field_flags(tmp_path):
    arc = write_jsonl(tmp_path / "arc.jsonl", [
        {"id": "Mercury_1", "question": "Which is a metal?", "answerKey": "B",
         "choices": {"text": ["wood", "iron", "glass"], "label": ["A", "B", "C"]}},
        {"id": "Mercury_2", "question": "Which is a gas?", "answerKey": "3",
         "choices": {"text": ["rock", "water", "air", "ice"], "label": ["1", "2", "3", "4"]}}])
    task = load_task(str(arc))                     # answerKey: read as ARC without being told
    assert [(q.id, q.answer, q.choices) for q in task.questions] == [
        ("Mercury_1", "B", ("wood", "iron", "glass")), ("Mercury_2", "C", ("rock", "water", "air", "ice"))]
    assert task.questions[0].question == "Which is a metal?\n(A) wood\n(B) iron\n(C) glass"
    assert load_task(str(arc), fields=Fields(field_map="arc")).questions == task.questions

    mmlu = write_parquet(tmp_path / "mmlu.parquet", [
        {"question": "2 + 2?", "subject": "math", "choices": ["3", "4", "5"], "answer": 1},
        {"question": "Capital of France?", "subject": "geo", "choices": ["Rome", "Paris"], "answer": 0}])
    task = load_task(str(mmlu), fields=Fields(field_map="mmlu"))
    assert [(q.id, q.answer, q.metadata) for q in task.questions] == [
        ("0", "B", {"subject": "math"}), ("1", "A", {"subject": "geo"})]       # index gold -> letter

    gsm = write_csv(tmp_path / "gsm.csv", [{"question": "Tom has 1,200 apples and eats none. How many?",
                                            "answer": "He has them all.\n#### 1,200"}])
    (q,) = load_task(str(gsm), fields=Fields(field_map="gsm8k")).questions
    assert (q.answer, q.solution) == ("1200", "He has them all.\n#### 1,200")

    custom = write_csv(tmp_path / "custom.csv", [{"key": "a1", "prompt": "1 + 1?", "gold": "2", "opts": "",
                                                  "source": "mine"}])
    (q,) = load_task(str(custom), fields=Fields(question="prompt", answer="gold", id="key")).questions
    assert (q.id, q.question, q.answer, q.metadata) == ("a1", "1 + 1?", "2", {"source": "mine"})


def test_gold_and_ids_are_checked_whatever_the_source(tmp_path):
    from reachtui.tasks import check_gold

    bad_gold = write_parquet(tmp_path / "gold.parquet", [{"question": "x?", "answer": "banana"}])
    task = load_task(str(bad_gold))
    with pytest.raises(ReachError, match=r"gold\.parquet:1: the gold answer 'banana' of question 0 is not a number"):
        check_gold(task, "number")
    bad_id = write_csv(tmp_path / "ids.csv", [{"id": "a\x1bb", "question": "x?", "answer": "1"}])
    with pytest.raises(ReachError, match="holds a control character"):
        load_task(str(bad_id))


@pytest.mark.parametrize("make, args, message", [
    (lambda d: write_csv(d / "t.csv", [{"prompt": "x?", "answer": "1"}]), [],
     r"t\.csv:2: missing 'question' \(fields here: prompt, answer; --question-field names another"),
    (lambda d: write_jsonl(d / "t.jsonl", [{"question": "x?", "answer": "1"}]), ["--answer-field", "gold"],
     r"t\.jsonl:1: missing 'gold'"),
    (lambda d: write_jsonl(d / "t.jsonl", [{"question": "x?", "answer": "1"}]), ["--task-fields", "squad"],
     r"--task-fields 'squad': unknown field map; choose one of gsm8k, math, arc, mmlu"),
    (lambda d: write_text(d / "t.csv", ""), [], r"t\.csv: the file is empty"),
    (lambda d: write_text(d / "t.csv", "question,answer\n"), [], r"t\.csv: the task file has no questions"),
    (lambda d: write_text(d / "t.jsonl", "\n\n"), [], r"t\.jsonl: the task file has no questions"),
    (lambda d: write_parquet(d / "t.parquet", [{"question": [1, 2], "answer": "1"}]), [],
     r"t\.parquet:1: 'question' must be text, not list"),
    (lambda d: write_parquet(d / "t.parquet", [{"question": "x?", "answer": {"a": 1}}]), [],
     r"t\.parquet:1: 'answer' must be text, not dict"),
    (lambda d: write_text(d / "t.parquet", "not parquet"), [],
     r"t\.parquet: not a readable parquet file"),
    (lambda d: write_jsonl(d / "t.jsonl", [{"problem": "x?", "solution": "no box here"}]), [],
     r"t\.jsonl:1: no \\boxed\{\.\.\.\} answer in 'solution'"),
])
def test_bad_task_inputs_are_one_error_line_exit_2(tmp_path, monkeypatch, make, args, message):
    import re

    monkeypatch.chdir(tmp_path)
    _examples(tmp_path)
    path = make(tmp_path)
    code, out, err = run_main(["import", "base.jsonl", "--task", str(path), "--store", str(tmp_path / "s.sqlite"),
                               *args])
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and re.search(message, err), err
    assert not (tmp_path / "s.sqlite").exists()


def _examples(folder: Path) -> None:
    code, _out, err = run_main(["examples", str(folder)])
    assert code == 0, err


def test_metadata_is_stored_and_exported_with_where(tmp_path, monkeypatch):
    """An import graded against a parquet task (made from the shipped CSV with pyarrow) keeps the subject
    column, and `export questions --where "meta_subject = ..."` selects by it."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    monkeypatch.chdir(tmp_path)
    _examples(tmp_path)
    pq.write_table(pcsv.read_csv("demo_subjects.csv"), "demo_subjects.parquet")
    store = str(tmp_path / "s.sqlite")
    code, _out, err = run_main(["import", "base.jsonl", "--task", "demo_subjects.parquet", "--model", "m",
                                "--store", store])
    assert code == 0, err
    code, out, err = run_main(["export", "questions", "--run", "m", "--store", store, "--where",
                               "meta_subject = 'multiplication' and realized = 0", "--columns",
                               "question_id,gold,realized,meta_subject", "--csv"])
    assert code == 0, err
    assert out.splitlines() == ["question_id,gold,realized,meta_subject", "demo-0002,60,0,multiplication",
                                "demo-0003,52,0,multiplication"]
    with sqlite3.connect(store) as con:
        assert con.execute("SELECT qid, meta FROM questions ORDER BY idx").fetchall() == [
            (f"demo-000{i}", json.dumps({"subject": s})) for i, s in
            ((1, "multiplication"), (2, "multiplication"), (3, "multiplication"), (4, "addition"))]
    code, _out, err = run_main(["export", "questions", "--run", "m", "--store", store, "--where", "meta_nope = 1"])
    assert code == 2 and err.startswith("error: ") and "meta_nope" in err
    from reachtui import api

    with api.open_store(store) as audit:            # the Python API reads the same column
        rows = audit.questions("m", where="meta_subject = 'addition'", columns=["question_id", "meta_subject"])
    assert rows == [{"question_id": "demo-0004", "meta_subject": "addition"}]


def test_a_store_from_before_metadata_is_read_as_it_is_and_migrated_by_a_writer(tmp_path, monkeypatch):
    from reachtui.store import Store
    from reachtui.tables.registry import build_table

    monkeypatch.chdir(tmp_path)
    _examples(tmp_path)
    store = tmp_path / "old.sqlite"
    assert run_main(["import", "base.jsonl", "--task", "demo", "--model", "m", "--store", str(store)])[0] == 0
    with sqlite3.connect(store) as con:         # as schema 5 wrote it: no questions.meta
        con.execute("ALTER TABLE questions DROP COLUMN meta")
        con.execute("DROP TABLE skipped_questions")      # (version 7's)
        con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    with Store(store, readonly=True) as s:
        table = build_table(s, "questions", [1])
        assert not any(c.name.startswith("meta_") for c in table.columns) and len(table.rows) == 4
        assert s.question(1)["meta"] == {} and s.question_meta(1) == {}
    code, _out, err = run_main(["import", "base.jsonl", "--task", "demo_subjects.csv", "--model", "m2",
                                "--store", str(store)])
    assert code == 0, err
    with Store(store, readonly=True) as s:
        assert s.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        run = s.resolve_run("m2")
        assert list(s.question_meta(run).values())[-1] == {"subject": "addition"}


def test_import_without_task_builds_it_from_lm_eval_docs_and_inspect_samples(tmp_path, monkeypatch):
    from reachtui.store import Store

    monkeypatch.chdir(tmp_path)
    _examples(tmp_path)
    store = str(tmp_path / "s.sqlite")
    code, _out, err = run_main(["import", "samples_demo.jsonl", "--filter", "strict-match", "--model", "lm",
                                "--store", store])
    assert code == 0, err
    code, out, _err = run_main(["export", "questions", "--run", "lm", "--store", store, "--csv", "--columns",
                                "question_id,gold,realized,reachable_sample,meta_subject"])
    assert out.splitlines() == ["question_id,gold,realized,reachable_sample,meta_subject",
                                "0,6,1,1,multiplication", "1,60,1,1,multiplication",
                                "2,52,1,1,multiplication", "3,18,1,1,addition"]
    code, _out, err = run_main(["import", "demo_inspect.eval", "--model", "insp", "--store", store])
    assert code == 0, err
    code, out, _err = run_main(["export", "questions", "--run", "insp", "--store", store, "--csv", "--columns",
                                "question_id,gold,realized,hits_sample"])
    assert out.splitlines() == ["question_id,gold,realized,hits_sample", "demo-0001,6,1,2", "demo-0002,60,1,2",
                                "demo-0003,52,1,2", "demo-0004,18,1,2"]
    with Store(store, readonly=True) as s:
        tasks = {r["model"]: (r["task"], r["task_path"]) for r in (s.get_run(i) for i in s.run_ids())}
    assert tasks["lm"] == ("samples_demo", str((tmp_path / "samples_demo.jsonl").resolve()))
    assert tasks["insp"][0] == "demo_inspect"
    # a row without its doc: the question is unknown
    (tmp_path / "bare.jsonl").write_text(json.dumps({"doc_id": 0, "target": "6", "resps": [["6"]],
                                                     "filtered_resps": ["6"]}) + "\n")
    code, out, err = run_main(["import", "bare.jsonl", "--store", store])
    assert code == 2 and err == ("error: bare.jsonl:1: the row has no doc (lm-eval writes it with --log_samples), so "
                                 "the question is unknown: give --task\n")
    code, out, err = run_main(["import", "base.jsonl", "--store", store])
    assert code == 2 and err == "error: base.jsonl: a jsonl file carries no questions: give --task\n"


def test_inspect_logs_are_read_sample_by_sample(tmp_path, monkeypatch):
    """The reader never loads a whole `.eval` log: inspect_ai's `read_eval_log` is only asked for the header."""
    import inspect_ai.log as ilog

    monkeypatch.chdir(tmp_path)
    _examples(tmp_path)
    whole = ilog.read_eval_log
    asked = []

    def header_only(path, *args, **kwargs):
        asked.append(kwargs.get("header_only", False))
        assert kwargs.get("header_only"), "the whole log was read"
        return whole(path, *args, **kwargs)

    monkeypatch.setattr(ilog, "read_eval_log", header_only)
    store = str(tmp_path / "s.sqlite")
    code, _out, err = run_main(["import", "demo_inspect.eval", "--model", "insp", "--store", store])
    assert code == 0, err
    code, _out, err = run_main(["import", "demo_inspect.eval", "--task", "demo", "--model", "insp2", "--store", store])
    assert code == 0, err
    assert asked and all(asked)


def test_inspect_samples_with_chat_input_metadata_and_choices(tmp_path):
    """A log made by inspect_ai itself (its mock model): chat input, choices and metadata become the task."""
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ModelOutput, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    from reachtui.importers.inspect_log import task_of

    dataset = [Sample(id="s1", input=[ChatMessageSystem(content="Be brief."), ChatMessageUser(content="Pick a metal.")],
                      choices=["wood", "iron"], target="B", metadata={"subject": "physics", "level": 2}),
               Sample(id="s2", input="Pick a gas.", choices=["air", "rock"], target=["A"],
                      metadata={"subject": "chemistry", "level": 1})]
    outs = [ModelOutput.from_content("mockllm/model", "ANSWER: B"), ModelOutput.from_content("mockllm/model", "ANSWER: A")]
    (log,) = inspect_eval(Task(dataset=dataset, solver=generate(), scorer=match()), display="none",
                          model=get_model("mockllm/model", custom_outputs=outs), log_dir=str(tmp_path / "logs"))
    task = task_of(Path(log.location))
    assert [(q.id, q.question, q.answer, q.choices, q.metadata) for q in task.questions] == [
        ("s1", "Pick a metal.\n(A) wood\n(B) iron", "B", ("wood", "iron"), {"subject": "physics", "level": 2}),
        ("s2", "Pick a gas.\n(A) air\n(B) rock", "A", ("air", "rock"), {"subject": "chemistry", "level": 1})]


def test_datasets_and_pyarrow_load_only_where_a_task_is_read():
    out = fresh_python(
        "import sys\n"
        "from reachtui.cli import main\n"
        "from reachtui.tasks import load_task\n"
        "import reachtui.commands.audit, reachtui.commands.importer, reachtui.commands.export\n"
        "load_task('demo')\n"
        "print(sorted(m for m in ('datasets', 'pyarrow') if m in sys.modules))\n")
    assert out.strip() == "[]"


async def test_the_app_shows_metadata_and_filters_by_it_from_the_palette(tmp_path, monkeypatch):
    """`reachtui open --store` on a run whose task has a subject column: the palette offers `filter: subject =
    addition`, typed and entered it shows that question only, and the detail names its subject."""
    from conftest import settle

    from reachtui.tui.app import ReachApp

    monkeypatch.chdir(tmp_path)
    _examples(tmp_path)
    store = tmp_path / "s.sqlite"
    assert run_main(["import", "base.jsonl", "--task", "demo_subjects.csv", "--store", str(store)])[0] == 0
    app = ReachApp(store)
    async with app.run_test(size=(150, 42)) as pilot:
        await settle(app, pilot)
        assert app.table.row_ids == ["demo-0001", "demo-0002", "demo-0003", "demo-0004"]
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"subject = addition")
        await pilot.pause(0.5)
        await pilot.press("enter")
        for _ in range(100):
            if app.table.row_ids == ["demo-0004"]:
                break
            await pilot.pause(0.05)
        assert app.table.row_ids == ["demo-0004"]
        assert app.filter.label() == "subject = addition"
        await pilot.pause(0.3)
        text = str(app.screen.query_one("#detail-title").render())
        assert text == "demo-0004  gold 18  subject addition"
        await pilot.press("a")                                      # all questions again
        assert app.table.row_ids == ["demo-0001", "demo-0002", "demo-0003", "demo-0004"]


@pytest.mark.parametrize("command", ["audit", "open", "serve", "import"])
def test_every_command_that_takes_a_task_takes_its_field_flags(tmp_path, monkeypatch, command):
    """One declaration (`options.task_option`) gives audit, open, serve and import the field flags: each reads
    the task through them, so a bad mapping is the same one line everywhere, before anything runs."""
    monkeypatch.chdir(tmp_path)
    _examples(tmp_path)
    write_csv(tmp_path / "t.csv", [{"prompt": "1 + 1?", "gold": "2"}])
    first = ["base.jsonl"] if command == "import" else ["demo"]
    args = [command, *first, "--task", "t.csv", "--store", str(tmp_path / "s.sqlite")]
    code, _out, err = run_main(args + ["--question-field", "prompt"])
    assert code == 2 and err == "error: t.csv:2: missing 'answer' (fields here: prompt, gold; --answer-field names " \
                                "another, --task-fields picks a field map)\n"
    code, _out, err = run_main(args + ["--task-fields", "trivia"])
    assert code == 2 and err == "error: --task-fields 'trivia': unknown field map; choose one of gsm8k, math, arc, " \
                                "mmlu\n"


def test_task_preset_is_the_old_name_of_task_fields(tmp_path, monkeypatch):
    """`--task-preset` (its name before "preset" meant a protocol's only) still picks a field map as
    --task-fields does, with one note, and is no longer in the help; beside --task-fields it is refused."""
    monkeypatch.chdir(tmp_path)
    _examples(tmp_path)
    args = ["import", "base.jsonl", "--task", "demo_subjects.csv", "--store", str(tmp_path / "s.sqlite")]
    note = "note: --task-preset is now called --task-fields\n"
    code, out, err = run_main(args + ["--task-preset", "gsm8k", "--model", "old-flag"])
    assert code == 0 and err.startswith(note) and out.splitlines()[-1] == "run 1", err
    code, _out, err = run_main(args + ["--task-preset", "math"])
    assert code == 2 and err == note + "error: demo_subjects.csv:2: missing 'problem' (fields here: id, question, " \
                                       "answer, subject; --question-field names another, --task-fields picks a " \
                                       "field map)\n"
    code, _out, err = run_main(args + ["--task-preset", "math", "--task-fields", "math"])
    assert code == 2 and err == "error: --task-preset is the old name of --task-fields: give one of them\n"
    code, out, _err = run_main(["import", "--help"])
    assert code == 0 and "--task-fields" in out and "--task-preset" not in out


def test_an_audit_reads_its_task_through_the_field_flags(tmp_path):
    """The demo model audited on a CSV task whose columns are named otherwise: its questions, golds and
    metadata are in the store."""
    from reachtui.store import Store

    rows = [{"key": f"k{i}", "prompt": q.question, "gold": q.answer, "topic": "t" + str(i % 2)}
            for i, q in enumerate(load_task("demo").questions[:3])]
    write_csv(tmp_path / "renamed.csv", rows)
    store = tmp_path / "s.sqlite"
    code, _out, err = run_main(["audit", "demo", "--task", str(tmp_path / "renamed.csv"), "--question-field", "prompt",
                                "--answer-field", "gold", "--id-field", "key", "--probes", "realized",
                                "--store", str(store), "--threads", "1"])
    assert code == 0, err
    with Store(store, readonly=True) as s:
        run = s.resolve_run("demo")
        assert [(q["qid"], q["gold"]) for q in s.run_questions(run)] == [("k0", "6"), ("k1", "60"), ("k2", "52")]
        assert list(s.question_meta(run).values()) == [{"topic": "t0"}, {"topic": "t1"}, {"topic": "t0"}]
        assert s.conn.execute("SELECT count(*) FROM attempts WHERE run_id = ?", (run,)).fetchone()[0] == 3


def test_a_choices_cell_nested_past_the_parser_is_one_line(tmp_path):
    """A CSV cell of 5,000 '[' is no list of options: one line, not a RecursionError."""
    path = tmp_path / "deep.csv"
    path.write_text("question,answer,choices\nq,A," + "[" * 5000 + "\n")
    with pytest.raises(ReachError, match=r"deep.csv:2: 'choices' is text that is not a JSON list"):
        load_task(str(path))
