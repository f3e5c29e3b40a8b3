"""The one grader: extraction rules in order, exact number normalisation, math-verify for the rest."""

import threading
from pathlib import Path

import pytest
from conftest import fresh_python

from reachtui.grading import Grade, equivalent, extract_answer, grade, normalize_number
from reachtui.tasks import load_task

GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k" / "test.jsonl"

# (text, gold, fmt, extracted answer, rule, correct)
CASES = [
    ("#### 1,234", "1234", "number", "1234", "hash", True),
    ("$18.00", "18", "number", "18", "last_number", True),
    ("She makes $18.00 a day.", "18", "number", "18", "last_number", True),
    ("The answer is 5.", "5", "number", "5", "the_answer_is", True),
    ("the FINAL answer is: 42", "42", "number", "42", "the_answer_is", True),
    ("\\boxed{\\frac{1}{2}}", "0.5", "math", "0.5", "boxed", True),
    ("So \\boxed{\\dfrac{3}{4}} cups.", "3/4", "number", "0.75", "boxed", True),
    ("Answer: -3", "-3", "number", "-3", "answer_colon", True),
    ("A: 12", "12", "number", "12", "answer_colon", True),
    ("3 apples and 4 pears so 7", "7", "number", "7", "last_number", True),
    ("no number here", "5", "number", None, None, False),
    ("", "5", "number", None, None, False),
    ("#### 007", "7", "number", "7", "hash", True),
    ("12.50", "12.5", "number", "12.5", "last_number", True),
    ("It costs 12.0 dollars", "12", "number", "12", "last_number", True),
    ("The temperature fell to -4 degrees", "-4", "number", "-4", "last_number", True),
    ("19-5=14", "14", "number", "14", "last_number", True),
    ("I owe 20 - 5", "5", "number", "5", "last_number", True),  # binary minus, not -5
    ("12+7=19. 19-5=14. #### 14", "14", "number", "14", "hash", True),
    ("#### 14\nQuestion: what is 20 + 3?", "14", "number", "14", "hash", True),
    ("#### 15 and then 99 more", "99", "number", "15", "hash", False),
    ("#### +5", "5", "number", "5", "hash", True),
    ("#### -0", "0", "number", "0", "hash", True),
    ("The answer is 25%.", "25", "number", "25", "the_answer_is", True),
    ("so 3/4 of the cake", "0.75", "number", "0.75", "last_number", True),
    ("The answer is 1/3", "0.333", "number", "1/3", "the_answer_is", False),  # exact, no float fuzz
    ("That is 1,000,000 people", "1000000", "number", "1000000", "last_number", True),
    ("The numbers 3,4 and 5", "5", "number", "5", "last_number", True),  # "3,4" is no thousands group
    ("Total: 2.5 hours.", "2.50", "number", "2.5", "last_number", True),
    ("The answer is 8 dollars.", "$8", "number", "8", "the_answer_is", True),
    ("Answer: 7\nLater I saw 9", "7", "number", "7", "answer_colon", True),
    ("The final answer is $\\boxed{18}$.", "18", "number", "18", "the_answer_is", True),
    ("Steps... \\boxed{1} then \\boxed{2}", "2", "number", "2", "boxed", True),
    ("\\boxed{\\text{12 cm}}", "12", "number", "12", "boxed", True),
    ("\\boxed{1{,}234}", "1234", "number", "1234", "boxed", True),
    ("It is \u22123 outside", "-3", "number", "-3", "last_number", True),  # unicode minus
    # math
    ("The answer is $\\sqrt{8}$.", "2\\sqrt{2}", "math", "\\sqrt{8}", "the_answer_is", True),
    ("\\boxed{(1, 2]}", "(1,2]", "math", "(1, 2]", "boxed", True),
    ("\\boxed{\\frac{\\pi}{2}}", "\\pi/2", "math", "\\frac{\\pi}{2}", "boxed", True),
    ("\\boxed{x^2+1}", "x^2+2", "math", "x^2+1", "boxed", False),
    ("The answer is 0.5", "\\frac{1}{2}", "math", "0.5", "the_answer_is", True),
    # choice
    ("The answer is (B)", "B", "choice", "B", "the_answer_is", True),
    ("B)", "B", "choice", "B", "choice", True),
    ("Answer: C", "B", "choice", "C", "answer_colon", False),
    ("I think (D) is right.", "D", "choice", "D", "choice", True),
    ("The answer is Because of gravity", "A", "choice", None, None, False),
    ("#### A", "(A)", "choice", "A", "hash", True),
    # exact
    ("  Paris \n", "Paris", "exact", "Paris", "exact", True),
    ("The answer is Paris.", "Paris", "exact", "Paris", "the_answer_is", True),
    ("paris", "Paris", "exact", "paris", "exact", False),
]


@pytest.mark.parametrize("text,gold,fmt,answer,rule,correct", CASES)
def test_tricky_cases(text, gold, fmt, answer, rule, correct):
    assert extract_answer(text, fmt) == (answer, rule)
    assert grade(text, gold, fmt) == Grade(answer=answer, rule=rule, correct=correct)


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("1,234", "1234"), ("$1,234.50", "1234.5"), ("12.0", "12"), ("-0", "0"), ("-0.0", "0"), ("+7", "7"),
        ("007", "7"), ("3/4", "0.75"), ("1/3", "1/3"), ("-6/4", "-1.5"), ("12%", "12"), ("18 dollars", "18"),
        ("5.", "5"), (".5", "0.5"), ("\\frac{3}{4}", "0.75"), ("$-5$", "-5"), ("1/0", None), ("5x", None),
        ("x", None), ("", None), ("2 + 3", None), ("\\sqrt{2}", None), ("1e5", None),
        ("10000000000000000000001", "10000000000000000000001"),
    ],
)
def test_normalize_number(raw, expected):
    assert normalize_number(raw) == expected


def test_equivalence_is_exact_not_float_fuzzy():
    assert equivalent("0.1", "1/10")
    assert not equivalent("0.30000000000000004", "0.3")
    assert not equivalent("1000000000000000001", "1000000000000000000")
    assert equivalent(None, "5") is False


def test_number_format_never_touches_sympy():
    code = (
        "import sys; from reachtui.grading import grade\n"
        "assert grade('\\\\boxed{\\\\sqrt{2}} and 1/2 #### 3', '3').correct\n"
        "assert not grade('x', '\\\\sqrt{2}').correct\n"
        "print(sorted(m for m in ('sympy', 'math_verify', 'torch') if m in sys.modules))\n"
    )
    assert fresh_python(code) == "[]"


def test_math_verify_works_in_worker_threads():
    results = []

    def work():
        results.append(grade("\\boxed{\\sqrt{8}}", "2\\sqrt{2}", "math").correct)
        results.append(grade("\\boxed{\\sqrt{9}}", "2\\sqrt{2}", "math").correct)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 3 and results.count(False) == 3


def test_unknown_format_is_refused():
    with pytest.raises(ValueError):
        extract_answer("5", "roman")


@pytest.mark.skipif(not GSM8K.is_file(), reason="../shared/data/gsm8k/test.jsonl is not here")
def test_every_gsm8k_gold_parses_and_its_solution_grades_correct():
    task = load_task(str(GSM8K))
    assert len(task.questions) == 1319
    for q in task.questions:
        assert normalize_number(q.answer) == q.answer.lstrip("+"), q.id  # plain integers, commas gone
        g = grade(q.solution, q.answer)
        assert g == Grade(answer=normalize_number(q.answer), rule="hash", correct=True), q.id


def test_degenerate_outputs_grade_quickly():
    import time

    texts = [" -1" * 20000, "(" * 20000 + "\\boxed{" * 3000, "{" * 30000 + "}" * 30000, "9" * 6000]
    texts += [phrase * 5000 for phrase in ("#### ", "The answer is ", "Answer: ")]
    start = time.perf_counter()
    for text in texts:
        for fmt in ("number", "choice", "exact"):
            grade(text, "1", fmt)
    assert time.perf_counter() - start < 3.0


def test_a_math_grade_that_runs_past_its_time_limit_is_no_answer_and_stalls_nothing(monkeypatch):
    """`\\boxed{9^{9^{9^{9}}}}` never returns from sympy: math-verify runs in a worker process that is killed
    after MATH_TIMEOUT_S, the attempt counts as no answer (rule "timeout"), and math grades in other threads,
    during and after it, still get their verdicts."""
    import time

    from reachtui import grading

    monkeypatch.setattr(grading, "MATH_TIMEOUT_S", 1.0)
    grading._math_verify.cache_clear()
    assert grade("\\boxed{x^2 + 2x}", "2x + x^2", "math").correct          # the worker is up
    results = {}

    def normal(i):
        results[i] = grade(f"\\boxed{{\\sqrt{{{4 * i * i}}}}}", f"{2 * i}", "math").correct

    start = time.monotonic()
    slow = threading.Thread(target=lambda: results.setdefault("slow", grade("so \\boxed{9^{9^{9^{9}}}}", "5", "math")))
    slow.start()
    others = [threading.Thread(target=normal, args=(i,)) for i in range(2, 5)]
    for t in others:
        t.start()
    for t in [slow, *others]:
        t.join(30)
    assert results["slow"] == Grade(answer=None, rule="timeout", correct=False)
    assert [results[i] for i in range(2, 5)] == [True, True, True]
    assert time.monotonic() - start < 15
    t0 = time.monotonic()                          # the same output again: its verdict is remembered
    assert grade("so \\boxed{9^{9^{9^{9}}}}", "5", "math").rule == "timeout" and time.monotonic() - t0 < 0.5
    assert grade("\\boxed{\\frac{1}{2}}", "0.5", "math").correct


def test_number_grades_start_no_worker_process():
    code = (
        "from reachtui import grading\n"
        "for i in range(1000): grading.grade(f' {i} + 1 = {i + 1}. #### {i + 1}', str(i + 1))\n"
        "grading.grade('\\\\boxed{0.5}', '1/2', 'math')\n"
        "print(grading._WORKER)\n"
    )
    assert fresh_python(code) == "None"
