"""A task's questions: records (from `reachtui.tasks.sources`: JSONL, CSV, parquet, a `datasets` folder, a
dataset in the Hugging Face cache, or `demo`, the arithmetic set in assets/) mapped to `Question`s.

Each record is an object with `question` and `answer`, and optionally `id`, `solution` and `choices`; the
field names are the `Fields` mapping's (flags `--question-field` ... or a field map, `--task-fields`: gsm8k,
math, arc, mmlu; without either, a record with `answerKey` reads as arc, one with `problem` and no `question`
as math):

- GSM8K: `answer` is a worked solution ending in `#### N`. The gold is N with its thousands commas
  removed; the whole text is kept as `solution`.
- Anything else: `answer` is the gold as given (stripped); a JSON number is written canonically
  (14.0 -> "14"). Grading normalises numbers when it compares, so "$1,200" as gold is fine.
- `id` is optional: without one a question is known by its 0-based position among the file's records
  (lm-eval's `doc_id`; the same as the line number when the file has no blank lines).
- `choices` (a list of option texts) makes a multiple-choice question: the options are appended to the
  question text as "(A) …" lines, because that text is what the prompt shows the model, and the gold may
  be given as a letter, a 0-based index, or the text of the right option; it is stored as the letter.
  ARC's `{"text": [...], "label": [...]}` choices take the gold as one of their labels (`answerKey`).
- MATH (field map math): `problem` is the question and the gold is the last `\boxed{…}` of `solution`.
- Every other field is the question's metadata (subject, level, ...): stored with it, shown and filtered
  by in the app, and `meta_<key>` columns of the questions table (`export --where "meta_subject = 'x'"`);
  checked and typed as `reachtui.tasks.metadata` says (distinct column names, bounded, one kind per key).

Anything malformed fails the whole load with `file:line: what is wrong` (ReachError; the record number
for formats without lines): the audit must never run on half a task. An `id` may not hold control characters (a newline or a NUL would make one id read as
several in every table and list). Once the protocol is known, `check_gold` refuses a gold that its answer
format can never grade correct (NaN, Infinity or "banana" under the number format), naming its line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import string
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path

from reachtui.tasks import metadata
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
    meta: tuple[tuple[str, object], ...] = ()  # the record's other fields, (key, value) in record order

    @property
    def metadata(self) -> dict[str, object]:
        return dict(self.meta)


@dataclass(frozen=True)
class Fields:
    """Which record field holds what (`--question-field`, `--answer-field`, `--id-field`, `--choices-field`),
    and `field_map` (`--task-fields`): the name of a built-in mapping (FIELD_MAPS) the given fields override."""

    question: str | None = None
    answer: str | None = None
    id: str | None = None
    choices: str | None = None
    field_map: str | None = None

    def given(self) -> bool:
        return any(v is not None for v in (self.question, self.answer, self.id, self.choices, self.field_map))


@dataclass(frozen=True)
class FieldMap:
    """A resolved `Fields`: the field names a record is read with. `boxed`: the gold is the last `\\boxed{…}`
    of the answer field (MATH), which is kept as the solution; `solution`: the field of a reference solution."""

    question: str = "question"
    answer: str = "answer"
    id: str = "id"
    choices: str = "choices"
    solution: str | None = "solution"
    boxed: bool = False
    required: tuple[str, ...] = ()     # optional fields (id, choices) that were named, so must be there

    def describe(self) -> str:
        """The mapping as text (into a non-JSONL task's fingerprint: another mapping is another task)."""
        return json.dumps({k: v for k, v in dataclasses.asdict(self).items() if k != "required"}, sort_keys=True)


#: The built-in field maps (`--task-fields NAME`): GSM8K (`#### N` answers), MATH (`problem`, gold the last \boxed{} of `solution`),
#: ARC (`{text, label}` choices, gold `answerKey`), MMLU (`choices` list, gold an index or a letter).
FIELD_MAPS = {
    "gsm8k": FieldMap(),
    "math": FieldMap(question="problem", answer="solution", solution=None, boxed=True),
    "arc": FieldMap(answer="answerKey"),
    "mmlu": FieldMap(),
}


def resolve_fields(fields: Fields | None, first: dict | None = None) -> FieldMap:
    """The mapping of `fields`: its field map (unknown: ReachError) with the named fields on top. With none,
    the first record chooses: `answerKey` -> arc, `problem` without `question` -> math, else the default."""
    fields = fields or Fields()
    if fields.field_map is not None:
        if fields.field_map not in FIELD_MAPS:
            raise ReachError(f"--task-fields {fields.field_map!r}: unknown field map; choose one of "
                             f"{', '.join(FIELD_MAPS)}")
        base = FIELD_MAPS[fields.field_map]
    elif first is not None and "answerKey" in first and fields.answer is None:
        base = FIELD_MAPS["arc"]
    elif first is not None and "problem" in first and "question" not in first and fields.question is None:
        base = FIELD_MAPS["math"]
    else:
        base = FieldMap()
    named = dict(question=fields.question, answer=fields.answer, id=fields.id, choices=fields.choices)
    given = {k: v for k, v in named.items() if v is not None}
    for flag, value in given.items():
        if not value.strip():
            raise ReachError(f"--{flag}-field must not be empty")
    return replace(base, **given, required=tuple(v for k, v in given.items() if k in ("id", "choices")))


@dataclass(frozen=True)
class Task:
    name: str  # "demo" or the file stem
    path: str  # absolute path
    sha256: str  # of the file bytes
    questions: tuple[Question, ...]
    named: bool = False  # the name was given (--task-name): the store takes it even for a task it knows
    shown: str | None = dataclasses.field(default=None, compare=False)  # as the user named it (errors say it)

    def __len__(self) -> int:
        return len(self.questions)


def load_task(spec: str, name: str | None = None, fields: Fields | None = None, *,
              allow_download: bool = False) -> Task:
    """`demo` -> the bundled arithmetic task; anything else a task source (`reachtui.tasks.sources`: a JSONL,
    CSV or parquet file, a `datasets` folder, `hf:NAME[:CONFIG][:SPLIT]`), its records mapped by `fields`,
    called by its stem unless `name` is given (`--task-name`: GSM8K's `test.jsonl` as gsm8k)."""
    from reachtui.tasks import sources

    if name is not None and not name.strip():
        raise ReachError("--task-name must not be empty")
    if name is not None:
        check_name(name, "--task-name")
    if str(spec) == "demo":
        from reachtui.assets import DEMO_TASK_PATH

        if name is not None:
            raise ReachError("--task-name names a task file; the demo task is called demo")
        if fields is not None and fields.given():
            raise ReachError("the demo task has its own fields: --question-field and the like are for a task file")
        if not DEMO_TASK_PATH.is_file():
            raise ReachError(f"the demo task is missing: {DEMO_TASK_PATH} does not exist")
        source = sources.read_source(str(DEMO_TASK_PATH))
        return task_from_records(source.records, name="demo", path=source.path, fingerprint=source.fingerprint,
                                 shown=str(DEMO_TASK_PATH))
    source = sources.read_source(str(spec), allow_download=allow_download)
    task = task_from_records(source.records, name=name.strip() if name else source.name, path=source.path,
                             fingerprint=source.fingerprint, shown=str(spec), fields=fields,
                             fixed_fingerprint=source.by_bytes)
    return task if name is None else replace(task, named=True)


def task_from_records(records, *, name: str, path: str, fingerprint: bytes, shown: str,
                      fields: Fields | None = None, fixed_fingerprint: bool = True) -> Task:
    """A Task of `records` ((record number, object) pairs) read with the mapping of `fields`. Its sha256 (the
    store knows a task by it) is of `fingerprint` (a JSONL file's bytes), and of the mapping too unless it is
    the default one of a file hashed by its bytes (`fixed_fingerprint`), so tasks stored before field mappings
    existed keep their identity."""
    questions: list[Question] = []
    seen: dict[str, int] = {}
    mapping = None
    if fields is not None and fields.field_map is not None:
        resolve_fields(fields)            # an unknown field map is said first, also of an empty task
    for lineno, record in records:
        where = f"{shown}:{lineno}"
        if mapping is None:
            mapping = resolve_fields(fields, record)
        q = replace(_parse_record(record, where, default_id=str(len(questions)), mapping=mapping), line=lineno)
        if q.id in seen:
            raise ReachError(f"{where}: duplicate id {q.id!r} (first on line {seen[q.id]})")
        seen[q.id] = lineno
        questions.append(q)
    if not questions:
        raise ReachError(f"{shown}: the task file has no questions")
    questions = _typed_meta(questions, shown)
    digest = hashlib.sha256(fingerprint)
    if not (fixed_fingerprint and mapping.describe() == FieldMap().describe()):
        digest.update(b"\0" + mapping.describe().encode())
    return Task(name=name, path=path, sha256=digest.hexdigest(), questions=tuple(questions), shown=shown)


def _typed_meta(questions: list[Question], shown: str) -> list[Question]:
    """The questions with their metadata checked and typed as `reachtui.tasks.metadata` says (one column per key,
    each of one kind every export holds); a key or value no export could hold is one line."""
    if not any(q.meta for q in questions):
        return questions
    metadata.check_task([(f"{shown}:{q.line}", q.metadata) for q in questions], shown)
    typed = metadata.typed([q.metadata for q in questions])
    return [q if tuple(t.items()) == q.meta else replace(q, meta=tuple(t.items())) for q, t in zip(questions, typed)]


def _text(value, field: str, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ReachError(f"{where}: '{field}' must be text, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ReachError(f"{where}: '{field}' is {value!r}, not a finite number")
    if isinstance(value, (int, float)):
        from reachtui.grading import normalize_number

        value = normalize_number(repr(value)) or _scientific(repr(value)) or repr(value)
    if not value.strip():
        raise ReachError(f"{where}: '{field}' is empty")
    return value


def _missing(record: dict, field: str, where: str, flag: str) -> ReachError:
    have = ", ".join(list(record)[:12]) or "none"
    return ReachError(f"{where}: missing '{field}' (fields here: {have}; --{flag}-field names another, "
                      f"--task-fields picks a field map)")


def _parse_record(record: dict, where: str, default_id: str, mapping: FieldMap = FieldMap()) -> Question:
    m = mapping
    for field, flag in ((m.question, "question"), (m.answer, "answer"), *((f, "id" if f == m.id else "choices")
                                                                        for f in m.required)):
        if record.get(field) is None:
            raise _missing(record, field, where, flag)
    if not isinstance(record[m.question], str):
        raise ReachError(f"{where}: '{m.question}' must be text, not {type(record[m.question]).__name__}")
    question = _text(record[m.question], m.question, where)
    raw_answer = record[m.answer]
    answer = _text(raw_answer, m.answer, where)
    solution = record.get(m.solution) if m.solution else None
    if solution is not None:
        solution = _text(solution, m.solution, where)
    if m.boxed:
        from reachtui.grading import last_boxed

        solution, answer = answer, last_boxed(answer)
        if answer is None or not answer.strip():
            raise ReachError(f"{where}: no \\boxed{{...}} answer in '{m.answer}'")
        answer = answer.strip()
    elif isinstance(raw_answer, str) and "####" in answer:
        solution = answer if solution is None else solution
        answer = answer.rsplit("####", 1)[1].strip().replace(",", "")
        if not answer:
            raise ReachError(f"{where}: nothing after '####' in '{m.answer}'")
    else:
        answer = answer.strip()
    qid = record.get(m.id, default_id)
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
        raise ReachError(f"{where}: 'id' must be a non-empty string or integer")
    bad = next((ch for ch in str(qid) if unicodedata.category(ch) in _CONTROL), None)
    if bad is not None:
        raise ReachError(f"{where}: 'id' {str(qid)!r} holds a control character (U+{ord(bad):04X}): ids are "
                         f"printed one per line and in table cells")
    choices = None
    if record.get(m.choices) is not None:
        choices, answer = _choices(record[m.choices], raw_answer, answer, where)
        question = question.rstrip() + "\n" + "\n".join(f"({LETTERS[i]}) {c}" for i, c in enumerate(choices))
    used = {m.question, m.answer, m.id, m.choices, m.solution}
    meta = tuple((str(k), _meta_value(v)) for k, v in record.items() if k not in used)
    return Question(id=str(qid), question=question, answer=answer, solution=solution, choices=choices, meta=meta)


def _meta_value(value):
    """A metadata value as stored: text, numbers, booleans and null as they are, anything else as JSON text."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


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
        where = f"{task.shown or task.path}:{q.line}" if q.line is not None else f"task {task.name}, question {q.id}"
        gold = q.answer
        if fmt == "number" and normalize_number(gold) is None:
            if (plain := _scientific(gold)) is not None:
                raise ReachError(f"{where}: the gold answer {_short(gold)} of question {q.id} is in scientific "
                                 f"notation, which the number answer format does not read (in an answer, "
                                 f"{_short(gold)} reads as {normalize_number(gold.split('e')[0].split('E')[0])}): "
                                 f"write it as {plain}")
            raise ReachError(f"{where}: the gold answer {_short(gold)} of question {q.id} is not a number, so the "
                             f"number answer format can never grade it correct (use --answer-format exact or "
                             f"math, or fix the answer)")
        if fmt == "choice":
            letter = gold.strip().strip("()").strip().rstrip(".").upper()
            limit = choices or (len(q.choices) if q.choices else len(LETTERS))
            if len(letter) != 1 or letter not in LETTERS[:limit]:
                raise ReachError(f"{where}: the gold answer {_short(gold)} of question {q.id} is not one of the "
                                 f"option letters A-{LETTERS[limit - 1]}")


def _scientific(text: str) -> str | None:
    """The plain decimal of a finite number written in scientific notation ("1e3" -> "1000"), else None.
    (A JSON number 1e3 is read as 1000 already; text, as a CSV cell is, stays as written.)"""
    import re

    from reachtui.grading import normalize_number

    from decimal import Decimal

    t = text.strip()
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d{1,3}", t) or not math.isfinite(float(t)):
        return None
    return normalize_number(format(Decimal(t), "f"))


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _choices(raw, raw_answer, answer: str, where: str) -> tuple[tuple[str, ...], str]:
    """Option texts and the gold as a letter (given as letter, 0-based index or the option's text; with ARC's
    `{"text": [...], "label": [...]}` choices, as one of the labels). A CSV cell holds them as JSON."""
    if isinstance(raw, str) and raw.lstrip()[:1] in ("[", "{"):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):     # bad JSON, too many digits, nested past the parser's limit
            raise ReachError(f"{where}: 'choices' is text that is not a JSON list") from None
    if isinstance(raw, dict) and isinstance(raw.get("text"), list) and isinstance(raw.get("label"), list):
        labels = [str(x).strip() for x in raw["label"]]
        raw = raw["text"]
        if len(labels) == len(raw) and answer.strip() in labels and 2 <= len(raw) <= len(LETTERS):
            options = tuple(_text(c, "choices", where).strip() for c in raw)
            return options, LETTERS[labels.index(answer.strip())]
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
    if answer.strip().isdigit() and int(answer) < len(options):     # an index read as text (CSV)
        return options, LETTERS[int(answer)]
    raise ReachError(f"{where}: answer {answer!r} is neither a choice letter, an index nor one of the choices")
