"""Task loading: GSM8K's `#### N`, plain answers, doc_id fallback, choices, and one-line errors."""

import hashlib
import json
from pathlib import Path

import pytest

from reachtui.assets import DEMO_TASK_PATH
from reachtui.errors import ReachError
from reachtui.tasks import Question, load_task

GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k" / "test.jsonl"


def jsonl(tmp_path, *records, name="t.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_gsm8k_format_gold_and_solution(tmp_path):
    solution = "He pays 1,000 + 234 = <<1000+234=1234>>1,234 dollars.\n#### 1,234"
    path = jsonl(tmp_path, {"question": "How much?", "answer": solution})
    task = load_task(str(path))
    assert task.name == "t" and task.path == str(path.resolve())
    assert task.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert task.questions == (Question(id="0", question="How much?", answer="1234", solution=solution),)


def test_plain_answers_ids_and_blank_lines(tmp_path):
    path = jsonl(
        tmp_path,
        {"question": "a?", "answer": " 14 "},
        "",
        {"question": "b?", "answer": 3.0},
        {"id": 7, "question": "c?", "answer": "\\frac{1}{2}", "solution": "half"},
        {"id": "x-1", "question": "d?", "answer": -2},
    )
    qs = load_task(str(path)).questions
    assert [q.id for q in qs] == ["0", "1", "7", "x-1"]  # ids without one: record number (lm-eval doc_id)
    assert [q.answer for q in qs] == ["14", "3", "\\frac{1}{2}", "-2"]
    assert qs[2].solution == "half" and qs[0].solution is None


def test_choices(tmp_path):
    path = jsonl(
        tmp_path,
        {"question": "Sky?", "choices": ["red", "blue"], "answer": 1},
        {"question": "Grass?", "choices": ["green", "blue"], "answer": "(A)"},
        {"question": "Sun?", "choices": ["cold", "hot"], "answer": "hot"},
    )
    qs = load_task(str(path)).questions
    assert [q.answer for q in qs] == ["B", "A", "B"]
    assert qs[0].question == "Sky?\n(A) red\n(B) blue" and qs[0].choices == ("red", "blue")


def test_demo_names_the_bundled_task():
    if not DEMO_TASK_PATH.is_file():
        with pytest.raises(ReachError, match="demo task is missing"):
            load_task("demo")
        pytest.skip("assets/tasks/demo.jsonl not generated yet")
    task = load_task("demo")
    assert task.name == "demo" and len(task.questions) >= 300
    assert all(q.id and q.answer for q in task.questions)


@pytest.mark.parametrize(
    "lines,message",
    [
        (['{"question": "a", "answer": "1"}', "{not json"], r"t\.jsonl:2: bad JSON"),
        (['[1, 2]'], r"t\.jsonl:1: expected a JSON object, not list"),
        (['{"question": "a"}'], r"t\.jsonl:1: missing 'answer'"),
        (['{"answer": "1"}'], r"t\.jsonl:1: missing 'question'"),
        (['{"question": "  ", "answer": "1"}'], r"t\.jsonl:1: 'question' is empty"),
        (['{"question": "a", "answer": ""}'], r"t\.jsonl:1: 'answer' is empty"),
        (['{"question": "a", "answer": null}'], r"t\.jsonl:1: missing 'answer'"),
        (['{"question": 5, "answer": "1"}'], r"t\.jsonl:1: 'question' must be text"),
        (['{"question": "a", "answer": true}'], r"t\.jsonl:1: 'answer' must be text"),
        (['{"question": "a", "answer": "work ####  "}'], r"t\.jsonl:1: nothing after '####'"),
        (['{"id": "q", "question": "a", "answer": "1"}', "", '{"id": "q", "question": "b", "answer": "2"}'],
         r"t\.jsonl:3: duplicate id 'q' \(first on line 1\)"),
        (['{"question": "a", "answer": "1"}', '{"id": "0", "question": "b", "answer": "2"}'],
         r"t\.jsonl:2: duplicate id '0'"),
        (['{"question": "a", "answer": 5, "choices": ["x", "y"]}'], r"t\.jsonl:1: answer index 5 is outside"),
        (['{"question": "a", "answer": "1", "id": {}}'], r"t\.jsonl:1: 'id' must be"),
        (["", "   "], r"t\.jsonl: the task file has no questions"),
        ([], r"t\.jsonl: the task file has no questions"),
    ],
)
def test_malformed_files_fail_with_file_line_what(tmp_path, lines, message):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(ReachError, match=message) as exc:
        load_task(str(path))
    assert "\n" not in str(exc.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ReachError, match="nope.jsonl: no such task file"):
        load_task(str(tmp_path / "nope.jsonl"))
    with pytest.raises(ReachError, match="not a file"):
        load_task(str(tmp_path))


def test_not_utf8(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"question": "a", "answer": "1"}\n{"question": "\xff", "answer": "1"}\n')
    with pytest.raises(ReachError, match=r"t\.jsonl:2: not UTF-8"):
        load_task(str(path))


@pytest.mark.skipif(not GSM8K.is_file(), reason="../shared/data/gsm8k/test.jsonl is not here")
def test_gsm8k_test_set_loads():
    task = load_task(str(GSM8K))
    assert len(task.questions) == 1319
    first = task.questions[0]
    assert (first.id, first.answer) == ("0", "18") and first.solution.endswith("#### 18")
    assert task.questions[-1].id == "1318"
    assert all("," not in q.answer and q.answer.lstrip("-").isdigit() for q in task.questions)
