"""The bundled demo task: seeded grade-school arithmetic word problems (pure Python, no torch).

One generator makes both the shipped task (`assets/tasks/demo.jsonl`) and the demo model's training
distribution; training examples never repeat a demo question's text (exclusion by exact text).

Each problem follows a running quantity through two or three arithmetic steps (+, -, *), with small
numbers and non-negative integer results. Its worked solution is in the demo model's target format:

    " 12+7=19. 19-5=14. #### 14"

(leading space; steps `a op b=c` separated by ". "; then ". #### N"). The prompt template is the
Protocol default `"Question: {question}\\nAnswer:"`; a training example is
`"Question: {question}\\nAnswer:{solution}\\n"`.

Regenerate the shipped task (byte for byte) with:

    python -m reachtui.tasks.demo --out assets/tasks/demo.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

TASK_SEED = 20240601      # seed of the shipped demo task
TASK_SIZE = 320           # questions in the shipped demo task
TRAIN_SEED = 7            # default seed of the training stream (see reachtui.model.training.demo)
MAX_VALUE = 150           # no operand or intermediate result exceeds this

PROMPT_TEMPLATE = "Question: {question}\nAnswer:"

# (name, subject pronoun, object pronoun, possessive)
_PEOPLE = [
    ("Mia", "she", "her", "her"), ("Leo", "he", "him", "his"), ("Ava", "she", "her", "her"),
    ("Sam", "he", "him", "his"), ("Nora", "she", "her", "her"), ("Omar", "he", "him", "his"),
    ("Lily", "she", "her", "her"), ("Ben", "he", "him", "his"), ("Zoe", "she", "her", "her"),
    ("Ravi", "he", "him", "his"), ("Emma", "she", "her", "her"), ("Jack", "he", "him", "his"),
    ("Sofia", "she", "her", "her"), ("Noah", "he", "him", "his"), ("Grace", "she", "her", "her"),
    ("Liam", "he", "him", "his"), ("Chloe", "she", "her", "her"), ("Ethan", "he", "him", "his"),
    ("Hana", "she", "her", "her"), ("Lucas", "he", "him", "his"), ("Ivy", "she", "her", "her"),
    ("Max", "he", "him", "his"), ("Ruby", "she", "her", "her"), ("Tom", "he", "him", "his"),
]

# (plural noun, what it is kept in)
_ITEMS = [
    ("apples", "baskets"), ("marbles", "bags"), ("stickers", "sheets"), ("pencils", "boxes"),
    ("cookies", "jars"), ("books", "shelves"), ("stamps", "albums"), ("shells", "buckets"),
    ("cards", "packs"), ("coins", "purses"), ("toy cars", "boxes"), ("balloons", "bunches"),
    ("beads", "strings"), ("eggs", "cartons"), ("crayons", "boxes"), ("candies", "bags"),
    ("flowers", "vases"), ("rocks", "buckets"), ("buttons", "jars"), ("blocks", "bins"),
    ("oranges", "crates"), ("muffins", "trays"), ("ribbons", "rolls"), ("seeds", "packets"),
]

_CONNECTIVES = ["", "", "Then ", "After that, ", "Later, ", "Next, "]

_START = [
    "{Name} has {a} {items}.",
    "{Name} starts with {a} {items}.",
    "{Name} collects {a} {items}.",
    "There are {a} {items} in {name}'s room.",
    "{Name} owns {a} {items}.",
]
_START_PRODUCT = [
    "{Name} has {x} {containers} with {y} {items} in each.",
    "{Name} buys {x} {containers} of {items}. Each one holds {y} {items}.",
    "{Name} has {x} {containers}, and each holds {y} {items}.",
    "{Name} gets {x} {containers} with {y} {items} each.",
]
_ADD = [
    "{sub} buys {b} more {items}.",
    "{sub} finds {b} more {items}.",
    "{friend} gives {obj} {b} {items}.",
    "{sub} gets {b} more {items} from {friend}.",
    "{sub} wins {b} more {items} in a game.",
    "{sub} picks up {b} more.",
]
_SUB = [
    "{sub} gives {b} {items} to {friend}.",
    "{sub} loses {b} of them.",
    "{sub} sells {b} {items}.",
    "{sub} uses {b} of the {items}.",
    "{friend} takes {b} {items} from {obj}.",
    "{sub} gives away {b}.",
]
_MUL = [
    "{sub} ends up with {k} times as many {items} as before.",
    "the number of {items} {sub_lc} has grows to {k} times as many.",
    "{poss} pile of {items} becomes {k} times as big.",
]
_DOUBLE = ["the number of {items} {sub_lc} has doubles.", "{sub} doubles {poss} {items}."]
_TRIPLE = ["the number of {items} {sub_lc} has triples.", "{sub} triples {poss} {items}."]
_ADD_PRODUCT = [
    "{sub} buys {x} {containers} with {y} {items} in each.",
    "{friend} gives {obj} {x} {containers} of {y} {items} each.",
    "{sub} gets {x} more {containers}, and each holds {y} {items}.",
]
_SUB_PRODUCT = [
    "{sub} fills {x} {containers} with {y} {items} each and gives them away.",
    "{sub} sells {x} {containers} with {y} {items} in each.",
]
_ENDINGS = [
    "How many {items} does {name} have now?",
    "How many {items} does {sub_lc} have at the end?",
    "In total, how many {items} does {name} have now?",
    "How many {items} does {name} have in the end?",
]


@dataclass(frozen=True)
class DemoItem:
    """One generated problem: question text, worked solution (target format) and the final answer."""

    question: str
    solution: str
    answer: int
    steps: int


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _sentence(template: str, connective: str, ctx: dict) -> str:
    text = template.format(**ctx)
    if not connective:
        return _cap(text)
    first = text.split(" ", 1)[0]
    if first in ("She", "He", "Her", "His"):
        text = first.lower() + text[len(first):]
    return connective + text


def _one(rng: random.Random) -> DemoItem | None:
    """Draw one problem, or None when the draw broke a constraint (the caller redraws)."""
    name, sub, obj, poss = rng.choice(_PEOPLE)
    friend = rng.choice([p[0] for p in _PEOPLE if p[0] != name])
    items, containers = rng.choice(_ITEMS)
    target_steps = rng.choice((2, 3))
    ctx = dict(Name=name, name=name, sub=_cap(sub), sub_lc=sub, obj=obj, poss=_cap(poss),
               friend=friend, items=items, containers=containers)

    sentences: list[str] = []
    steps: list[str] = []

    if rng.random() < 0.3:
        x, y = rng.randint(2, 6), rng.randint(2, 9)
        value = x * y
        steps.append(f"{x}*{y}={value}")
        sentences.append(rng.choice(_START_PRODUCT).format(**ctx, x=x, y=y))
    else:
        value = rng.randint(3, 30)
        sentences.append(rng.choice(_START).format(**ctx, a=value))

    used_mul = False
    while len(steps) < target_steps:
        left = target_steps - len(steps)
        kinds = ["add", "add", "sub", "sub", "mul"]
        if left >= 2:
            kinds += ["add_product", "sub_product"]
        kind = rng.choice(kinds)
        conn = rng.choice(_CONNECTIVES) if sentences else ""
        if kind == "add":
            b = rng.randint(2, 20)
            new = value + b
            if new > MAX_VALUE:
                return None
            steps.append(f"{value}+{b}={new}")
            sentences.append(_sentence(rng.choice(_ADD), conn, {**ctx, "b": b}))
        elif kind == "sub":
            if value < 2:
                return None
            b = rng.randint(2, min(value, 20))
            new = value - b
            steps.append(f"{value}-{b}={new}")
            sentences.append(_sentence(rng.choice(_SUB), conn, {**ctx, "b": b}))
        elif kind == "mul":
            if used_mul:
                return None
            k = rng.randint(2, 4)
            new = value * k
            if new > MAX_VALUE or value == 0:
                return None
            used_mul = True
            pool = _MUL + (_DOUBLE if k == 2 else _TRIPLE if k == 3 else [])
            steps.append(f"{value}*{k}={new}")
            sentences.append(_sentence(rng.choice(pool), conn, {**ctx, "k": k}))
        elif kind == "add_product":
            x, y = rng.randint(2, 5), rng.randint(2, 9)
            p = x * y
            new = value + p
            if new > MAX_VALUE:
                return None
            steps += [f"{x}*{y}={p}", f"{value}+{p}={new}"]
            sentences.append(_sentence(rng.choice(_ADD_PRODUCT), conn, {**ctx, "x": x, "y": y}))
        else:  # sub_product
            x, y = rng.randint(2, 5), rng.randint(2, 9)
            p = x * y
            if p > value:
                return None
            new = value - p
            steps += [f"{x}*{y}={p}", f"{value}-{p}={new}"]
            sentences.append(_sentence(rng.choice(_SUB_PRODUCT), conn, {**ctx, "x": x, "y": y}))
        value = new

    sentences.append(rng.choice(_ENDINGS).format(**ctx))
    question = " ".join(sentences)
    solution = " " + ". ".join(steps) + f". #### {value}"
    return DemoItem(question=question, solution=solution, answer=value, steps=len(steps))


def iter_items(seed: int) -> Iterator[DemoItem]:
    """An endless, seeded stream of problems (duplicates possible; callers filter)."""
    rng = random.Random(seed)
    while True:
        item = _one(rng)
        if item is not None:
            yield item


def make_questions(n: int = TASK_SIZE, seed: int = TASK_SEED) -> list[DemoItem]:
    """`n` problems with distinct question texts, in generation order."""
    out: list[DemoItem] = []
    seen: set[str] = set()
    for item in iter_items(seed):
        if item.question in seen:
            continue
        seen.add(item.question)
        out.append(item)
        if len(out) == n:
            return out
    raise AssertionError("unreachable")


def format_prompt(question: str) -> str:
    return PROMPT_TEMPLATE.format(question=question)


def format_example(item: DemoItem) -> str:
    """One training example: prompt + worked solution + newline."""
    return format_prompt(item.question) + item.solution + "\n"


def demo_question_texts(seed: int = TASK_SEED, n: int = TASK_SIZE) -> set[str]:
    return {item.question for item in make_questions(n, seed)}


def training_items(n: int, seed: int = TRAIN_SEED, exclude: Iterable[str] | None = None) -> list[DemoItem]:
    """The first `n` problems of the training stream for `seed`, skipping every text in `exclude`
    (by default the shipped demo task's questions). Repeats within training are allowed."""
    excluded = demo_question_texts() if exclude is None else set(exclude)
    out: list[DemoItem] = []
    for item in iter_items(seed):
        if item.question in excluded:
            continue
        out.append(item)
        if len(out) == n:
            return out
    raise AssertionError("unreachable")


def make_training_text(n: int, seed: int = TRAIN_SEED, exclude: Iterable[str] | None = None) -> list[str]:
    """`n` training examples `"Question: {q}\\nAnswer:{solution}\\n"` (demo questions excluded)."""
    return [format_example(item) for item in training_items(n, seed, exclude)]


def task_lines(n: int = TASK_SIZE, seed: int = TASK_SEED) -> list[str]:
    """The JSONL lines of the demo task file."""
    return [
        json.dumps({"id": f"demo-{i:04d}", "question": item.question, "answer": str(item.answer)},
                   ensure_ascii=False)
        for i, item in enumerate(make_questions(n, seed), start=1)
    ]


def write_task(path: Path, n: int = TASK_SIZE, seed: int = TASK_SEED) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(task_lines(n, seed)) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m reachtui.tasks.demo", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    ap.add_argument("--n", type=int, default=TASK_SIZE)
    ap.add_argument("--seed", type=int, default=TASK_SEED)
    ap.add_argument("--show", type=int, default=0, help="also print this many problems with solutions")
    args = ap.parse_args(argv)
    write_task(args.out, args.n, args.seed)
    for item in make_questions(args.n, args.seed)[: args.show]:
        print(format_example(item), end="")
    print(f"wrote {args.n} questions to {args.out}")


if __name__ == "__main__":
    main()
