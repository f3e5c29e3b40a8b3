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
run on half a task. An `id` may not hold control characters (a newline or a NUL would make one id read as
several in every table and list). Once the protocol is known, `check_gold` refuses a gold that its answer
format can never grade correct (NaN, Infinity or "banana" under the number format), naming its line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import string
import unicodedata
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
    line: int | None = dataclasses.field(default=None, compare=False)  # where it is in the task file (errors name it)


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
    if name is not None:
        check_name(name, "--task-name")
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
        q = replace(_parse_record(record, where, default_id=str(len(questions))), line=lineno)
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
    if isinstance(value, float) and not math.isfinite(value):
        raise ReachError(f"{where}: '{field}' is {value!r}, not a finite number")
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
    bad = next((ch for ch in str(qid) if unicodedata.category(ch) in _CONTROL), None)
    if bad is not None:
        raise ReachError(f"{where}: 'id' {str(qid)!r} holds a control character (U+{ord(bad):04X}): ids are "
                         f"printed one per line and in table cells")
    choices = None
    if record.get("choices") is not None:
        choices, answer = _choices(record["choices"], record["answer"], answer, where)
        question = question.rstrip() + "\n" + "\n".join(f"({LETTERS[i]}) {c}" for i, c in enumerate(choices))
    return Question(id=str(qid), question=question, answer=answer, solution=solution, choices=choices)


#: Unicode categories an id may not hold: control and format characters, line and paragraph separators.
_CONTROL = {"Cc", "Cf", "Zl", "Zp"}


def check_name(name: str, what: str) -> None:
    """A name shown in every table and list (a task's, a model's) holds no control character."""
    bad = next((ch for ch in name if unicodedata.category(ch) in _CONTROL), None)
    if bad is not None:
        raise ReachError(f"{what} {name!r} holds a control character (U+{ord(bad):04X})")


def check_gold(task: Task, fmt: str, choices: int | None = None) -> None:
    """Refuse (one line naming the question's line) a gold the answer format `fmt` can never grade correct:
    under `number`, one that is not a single finite number ("NaN", "Infinity", "1e400", "banana"); under
    `choice`, one that is not an option letter (of the protocol's `choices` options, when it says). Called
    once the protocol is known (audit, open, import), before anything is stored."""
    from reachtui.grading import normalize_number

    for q in task.questions:
        where = f"{task.path}:{q.line}" if q.line is not None else f"task {task.name}, question {q.id}"
        gold = q.answer
        if fmt == "number" and normalize_number(gold) is None:
            raise ReachError(f"{where}: the gold answer {_short(gold)} of question {q.id} is not a number, so the "
                             f"number answer format can never grade it correct (use --answer-format exact or "
                             f"math, or fix the answer)")
        if fmt == "choice":
            letter = gold.strip().strip("()").strip().rstrip(".").upper()
            limit = choices or (len(q.choices) if q.choices else len(LETTERS))
            if len(letter) != 1 or letter not in LETTERS[:limit]:
                raise ReachError(f"{where}: the gold answer {_short(gold)} of question {q.id} is not one of the "
                                 f"option letters A-{LETTERS[limit - 1]}")


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


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
