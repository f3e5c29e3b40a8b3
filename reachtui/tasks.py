"""Question sources: a JSONL file (one question per line) or `demo`, the arithmetic set in assets/.

Each line is an object with `question` and `answer`, and optionally `id`, `solution` and `choices`:

- GSM8K: `answer` is a worked solution ending in `#### N`. The gold is N with its thousands commas
  removed; the whole text is kept as `solution`.
- Anything else: `answer` is the gold as given (stripped); a JSON number is written canonically
  (14.0 -> "14"). Grading normalises numbers when it compares, so "$1,200" as gold is fine.
- `id` is optional: without one a question is known by its 0-based position among the file's records
  (lm-eval's `doc_id`; the same as the line number when the file has no blank lines).
- `choices` (a list of option texts) makes a multiple-choice question: the options are appended to the
  question text as "(A) …" lines, because that text is what the prompt shows the model, and the gold may
  be given as a letter, a 0-based index, or the text of the right option; it is stored as the letter.

Anything malformed fails the whole load with `file:line: what is wrong` (ReachError): the audit must never
run on half a task.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass, replace
from pathlib import Path

from reachtui import jsonl
from reachtui.errors import ReachError

LETTERS = string.ascii_uppercase


@dataclass(frozen=True)
class Question:
    id: str  # the task's "id", else the 0-based record number as a string (lm-eval doc_id)
    question: str  # the text the prompt shows (with "(A) …" option lines for multiple choice)
    answer: str  # gold final answer as text: for GSM8K the part after '#### ' with ',' removed
    solution: str | None = None  # full reference solution if the source has one (GSM8K 'answer')
    choices: tuple[str, ...] | None = None  # option texts of a multiple-choice question


@dataclass(frozen=True)
class Task:
    name: str  # "demo" or the file stem
    path: str  # absolute path
    sha256: str  # of the file bytes
    questions: tuple[Question, ...]
    named: bool = False  # the name was given (--task-name): the store takes it even for a task it knows

    def __len__(self) -> int:
        return len(self.questions)


def load_task(spec: str, name: str | None = None) -> Task:
    """`demo` -> the bundled arithmetic task; anything else is a path to a JSONL file, called by its stem
    unless `name` is given (`--task-name`: GSM8K's `test.jsonl` as gsm8k)."""
    if name is not None and not name.strip():
        raise ReachError("--task-name must not be empty")
    if str(spec) == "demo":
        from reachtui.assets import DEMO_TASK_PATH

        if name is not None:
            raise ReachError("--task-name names a JSONL task file; the demo task is called demo")
        if not DEMO_TASK_PATH.is_file():
            raise ReachError(f"the demo task is missing: {DEMO_TASK_PATH} does not exist")
        return _load_jsonl(DEMO_TASK_PATH, name="demo", shown=str(DEMO_TASK_PATH))
    path = Path(spec).expanduser()
    if not path.exists():
        raise ReachError(f"{spec}: no such task file (give a JSONL path or 'demo')")
    if not path.is_file():
        raise ReachError(f"{spec}: not a file (give a JSONL path or 'demo')")
    task = _load_jsonl(path, name=name.strip() if name else path.stem, shown=str(spec))
    return task if name is None else replace(task, named=True)


def _load_jsonl(path: Path, *, name: str, shown: str) -> Task:
    data = jsonl.read_bytes(path, shown)
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for lineno, record in jsonl.parse(data, shown, gz=False):
        where = f"{shown}:{lineno}"
        q = _parse_record(record, where, default_id=str(len(questions)))
        if q.id in seen:
            raise ReachError(f"{where}: duplicate id {q.id!r} (first on line {seen[q.id]})")
        seen[q.id] = lineno
        questions.append(q)
    if not questions:
        raise ReachError(f"{shown}: the task file has no questions")
    return Task(
        name=name,
        path=str(path.resolve()),
        sha256=hashlib.sha256(data).hexdigest(),
        questions=tuple(questions),
    )


def _text(value, field: str, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ReachError(f"{where}: '{field}' must be text, not {type(value).__name__}")
    if isinstance(value, (int, float)):
        from reachtui.grading import normalize_number

        value = normalize_number(repr(value)) or repr(value)
    if not value.strip():
        raise ReachError(f"{where}: '{field}' is empty")
    return value


def _parse_record(record: dict, where: str, default_id: str) -> Question:
    for field in ("question", "answer"):
        if record.get(field) is None:
            raise ReachError(f"{where}: missing '{field}'")
    if not isinstance(record["question"], str):
        raise ReachError(f"{where}: 'question' must be text, not {type(record['question']).__name__}")
    question = _text(record["question"], "question", where)
    answer = _text(record["answer"], "answer", where)
    solution = record.get("solution")
    if solution is not None:
        solution = _text(solution, "solution", where)
    if isinstance(record["answer"], str) and "####" in answer:
        solution = answer if solution is None else solution
        answer = answer.rsplit("####", 1)[1].strip().replace(",", "")
        if not answer:
            raise ReachError(f"{where}: nothing after '####' in 'answer'")
    else:
        answer = answer.strip()
    qid = record.get("id", default_id)
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
        raise ReachError(f"{where}: 'id' must be a non-empty string or integer")
    choices = None
    if record.get("choices") is not None:
        choices, answer = _choices(record["choices"], record["answer"], answer, where)
        question = question.rstrip() + "\n" + "\n".join(f"({LETTERS[i]}) {c}" for i, c in enumerate(choices))
    return Question(id=str(qid), question=question, answer=answer, solution=solution, choices=choices)


def _choices(raw, raw_answer, answer: str, where: str) -> tuple[tuple[str, ...], str]:
    """Option texts and the gold as a letter (given as letter, 0-based index or the option's text)."""
    if not isinstance(raw, list) or not 2 <= len(raw) <= len(LETTERS):
        raise ReachError(f"{where}: 'choices' must be a list of 2 to 26 options")
    options = tuple(_text(c, "choices", where).strip() for c in raw)
    if isinstance(raw_answer, int) and not isinstance(raw_answer, bool):
        if not 0 <= raw_answer < len(options):
            raise ReachError(f"{where}: answer index {raw_answer} is outside the {len(options)} choices")
        return options, LETTERS[raw_answer]
    letter = answer.strip().strip("()").strip().rstrip(".").upper()
    if len(letter) == 1 and letter in LETTERS[: len(options)]:
        return options, letter
    if answer.strip() in options:
        return options, LETTERS[options.index(answer.strip())]
    raise ReachError(f"{where}: answer {answer!r} is neither a choice letter, an index nor one of the choices")
