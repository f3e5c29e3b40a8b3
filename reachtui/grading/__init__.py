"""The one grader: pull the final answer out of a model's text and decide whether it equals the gold.

Everything that says "correct" (probes, scans, exports, the TUI) goes through `grade`, so a number means the
same thing everywhere. Formats (`fmt`):

- ``number`` (GSM8K and the demo task): the fast path. Regexes and exact rational arithmetic
  (`fractions.Fraction`), never floats and never sympy: "12.0" = "12", "$1,234" = "1234", "3/4" = "0.75".
- ``math``: expressions, ``\\frac``, ``\\sqrt``, intervals. Plain numbers still take the fast path, and equal
  strings need no sympy; anything else goes to math-verify in a worker process with a time limit
  (`reachtui.grading.math_worker`: math-verify's own ``signal.alarm`` works only in the main thread, and
  sympy cannot be stopped in a thread), `MATH_TIMEOUT_S` per comparison. A comparison that runs past it counts
  as no answer, with rule ``timeout`` (so one pathological output, ``\\boxed{9^{9^{9^{9}}}}``, costs the
  audit seconds, not every later math grade). Each (answer, gold) pair is compared once per process.
  Answers longer than `MAX_MATH_CHARS` are compared as strings, never handed to sympy.
- ``choice``: a letter A–Z ("(B)", "B)", "Answer: B", "The answer is (B)").
- ``exact``: stripped strings.

Extraction tries, in order, and records which rule fired (``timeout``: a math answer math-verify could not
compare in time, stored as no answer): ``hash`` (``#### N``, first one, as lm-eval's
strict-match), ``the_answer_is`` ("The (final) answer is N", first one, any case), ``boxed`` (last
``\\boxed{…}``, balanced braces), ``answer_colon`` ("Answer: N" / "A: N", first one), then ``last_number``
(lm-eval's flexible-extract). The phrase rules read the rest of their line: a ``\\boxed{}`` there wins,
else its first number. Choice adds ``choice`` (a lone or bracketed letter); exact falls back to ``exact``
(the whole stripped text).

Number normalisation (decided here, once): thousands commas, ``$``, a leading ``+``, leading zeros and
a trailing ``.`` are dropped; ``%`` is dropped too, *not* divided by 100 (GSM8K asks "what percent" and
expects "25" where models write "25%"); words after the number are units and ignored ("18 dollars");
"-0" is "0"; a fraction is written as a decimal when its decimal is finite ("3/4" -> "0.75"), else as
"p/q" ("1/3"), so "0.333" is *not* "1/3". A "-" right after a digit or bracket is subtraction, not a sign
("19-5" has the numbers 19 and 5).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

#: Bump when a change to extraction or equivalence can change a grade: it is part of every protocol's hash
#: from version 2 on, so runs graded differently are never compared as matched.
GRADER_VERSION = 1

FORMATS = ("number", "math", "choice", "exact")
RULES = ("hash", "the_answer_is", "boxed", "answer_colon", "last_number", "choice", "exact", "timeout")
MAX_MATH_CHARS = 300  # longer answers never reach sympy
#: Seconds one math-verify comparison may take (math-verify's own default is 5 s per call).
MATH_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Grade:
    answer: str | None  # extracted, normalised answer (None = nothing extracted)
    rule: str | None  # which extraction rule fired (see RULES)
    correct: bool


# A number as written in text: optional sign and "$", thousands groups or plain digits, decimals, "/q".
_NUM_RE = re.compile(
    r"(?<![\w.])"
    r"(?P<sign>[-\u2212+]\s?)?\$?\s?"
    r"(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+(?![\d.]))?|\.\d+)"
    r"(?![\d/])"
)
# The same, anchored for normalize_number: the whole string is one number plus optional "%"/units.
_FULL_NUM_RE = re.compile(
    r"\s*(?P<sign>[-\u2212+])?\s*\$?\s*(?P<sign2>[-\u2212+])?\s*"
    r"(?P<num>\d[\d,]*(?:\.\d*)?|\.\d+)(?:\s*/\s*(?P<den>\d+))?"
    r"\s*%?(?:\s+(?P<units>[^\d]*))?"
)
_HASH_RE = re.compile(r"####")
_ANSWER_IS_RE = re.compile(r"the\s+(?:final\s+)?answer\s+is\b\s*:?", re.IGNORECASE)
_ANSWER_COLON_RE = re.compile(r"(?<!\w)(?:(?i:answer)|A)\s*:")
_BRACE_RE = re.compile(r"\\(?:boxed|fbox)\s*\{|[{}]")
_LATEX_FRAC_RE = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]+?)\s*\}\s*\{\s*([^{}]+?)\s*\}")
_LATEX_TEXT_RE = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}")
_LETTER_RE = re.compile(r"^\W*\(?\s*([A-Z])\s*\)?(?![A-Za-z])")
_CHOICE_FALLBACK_RE = re.compile(r"\(([A-Z])\)|(?<![\w(])([A-Z])\)|^\s*([A-Z])\s*[.:]?\s*$", re.MULTILINE)


# ---------------------------------------------------------------------------------------- numbers


def _canonical(value: Fraction) -> str:
    """Write a rational exactly: an integer, a finite decimal, or 'p/q'."""
    if value.denominator == 1:
        return str(value.numerator)
    den, twos, fives = value.denominator, 0, 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    scaled = abs(value.numerator) * (10**places) // value.denominator
    sign = "-" if value < 0 else ""
    digits = str(scaled).rjust(places + 1, "0")
    return f"{sign}{digits[:-places]}.{digits[-places:]}".rstrip("0").rstrip(".")


def _delatex(s: str) -> str:
    """Just enough LaTeX for numbers: \\frac{a}{b} -> a/b, \\text{x} -> x, \\$ \\% \\, \\! {,} dropped."""
    if "\\" not in s and "{" not in s:
        return s
    s = _LATEX_TEXT_RE.sub(r" \1", s)
    s = _LATEX_FRAC_RE.sub(r"(\1)/(\2)", s)
    s = re.sub(r"\((\d+(?:\.\d+)?)\)/\((\d+)\)", r"\1/\2", s)
    s = s.replace("{,}", ",").replace("\\,", "").replace("\\!", "").replace("\\ ", " ")
    s = s.replace("\\$", "$").replace("\\%", "%").replace("\\left", "").replace("\\right", "")
    return s.strip().strip("$").strip()


@lru_cache(maxsize=65536)
def normalize_number(s: str) -> str | None:
    """Canonical text of the number `s` spells ("$1,234.50" -> "1234.5", "3/4" -> "0.75", "-0" -> "0"),
    or None when `s` is not a single number (units after it are allowed: "18 dollars" -> "18")."""
    if not isinstance(s, str):
        return None
    if s.isascii() and s.isdigit() and (s[0] != "0" or len(s) == 1) and len(s) < 1000:
        return s  # a plain integer is its own canonical text (the common gold: no regex, no Fraction)
    s = _delatex(s).strip().rstrip(".").strip("$").strip().rstrip(".")
    m = _FULL_NUM_RE.fullmatch(s)
    if m is None or re.search(r"[=+*/^<>\\{]", m["units"] or ""):
        return None
    if m["sign"] and m["sign2"]:
        return None
    num = m["num"].replace(",", "").rstrip(".")
    try:  # ValueError also covers Python's limit on very long integer strings
        value = Fraction(num) / int(m["den"] or 1)
        if (m["sign"] or m["sign2"] or "") in ("-", "\u2212"):
            value = -value
        return _canonical(value)
    except (ValueError, ZeroDivisionError):
        return None


def _numbers(text: str):
    """The numbers written in `text`, in order, each as a canonical string."""
    for m in _NUM_RE.finditer(text):
        sign = (m["sign"] or "").strip()
        if sign:
            i = m.start() - 1
            while i >= 0 and text[i].isspace():
                i -= 1
            if i >= 0 and (text[i].isdigit() or text[i] in ")]}%"):
                sign = ""  # binary minus/plus: "19 - 5"
        value = normalize_number(("-" if sign in ("-", "\u2212") else "") + m["num"])
        if value is not None:
            yield value


def _first_number(text: str) -> str | None:
    return next(_numbers(_delatex(text)), None)


# ---------------------------------------------------------------------------------------- spans


def _boxed_contents(text: str) -> list[str]:
    """Every \\boxed{...} content in order, braces balanced (an unclosed one is ignored); one pass."""
    found, stack = [], []  # stack: (content start, opened by a box?)
    for m in _BRACE_RE.finditer(text):
        if m.group() == "}":
            if stack:
                start, is_box = stack.pop()
                if is_box:
                    found.append((start, text[start : m.start()].strip()))
        else:
            stack.append((m.end(), m.group() != "{"))
    return [content for _, content in sorted(found)]


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} of `text` (a MATH solution's gold), or None."""
    found = _boxed_contents(text)
    return found[-1] if found else None


def _line_after(text: str, pos: int, limit: int = MAX_MATH_CHARS) -> str:
    """The rest of the line after a phrase, at most `limit` chars (keeps "#### " * 10**4 linear)."""
    end = text.find("\n", pos, pos + limit)
    return text[pos : end if end >= 0 else pos + limit]


def _clean_expr(s: str) -> str:
    """A math/exact answer span without its dressing: $…$, \\(…\\), **bold**, a closing '.'."""
    s = s.strip().rstrip(".").strip()
    for a, b in (("**", "**"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(a) and s.endswith(b) and len(s) >= len(a) + len(b):
            s = s[len(a) : len(s) - len(b)].strip()
    s = s.rstrip(".").strip()
    if s.endswith("$") and s.count("$") == 1:
        s = s[:-1].strip()
    if s.startswith("$") and s.count("$") == 1:
        s = s[1:].strip()
    return s


def _normalize_expr(s: str) -> str:
    number = normalize_number(s)
    return number if number is not None else s


def _letter(s: str) -> str | None:
    m = _LETTER_RE.match(_delatex(s) if "\\" in s else s)
    return m.group(1) if m else None


def _from_span(span: str, fmt: str) -> str | None:
    """The answer a phrase rule ("#### ", "The answer is", "Answer:") points at: a box in it, else it."""
    boxed = _boxed_contents(span) if "\\" in span else []
    return _from_content(boxed[-1] if boxed else span, fmt)


def _from_content(span: str, fmt: str) -> str | None:
    if fmt == "number":
        return _first_number(span)
    if fmt == "choice":
        return _letter(span)
    expr = _clean_expr(span)
    if not expr:
        return None
    return _normalize_expr(expr) if fmt == "math" else expr


# ---------------------------------------------------------------------------------------- API


def extract_answer(text: str, fmt: str = "number") -> tuple[str | None, str | None]:
    """(normalised answer, rule) from a model's text; (None, None) when nothing can be extracted."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown answer format {fmt!r} (known: {', '.join(FORMATS)})")
    text = text or ""
    for rule, regex in (("hash", _HASH_RE), ("the_answer_is", _ANSWER_IS_RE), ("boxed", None),
                        ("answer_colon", _ANSWER_COLON_RE)):
        if regex is None:
            boxed = _boxed_contents(text) if "box" in text else []
            answer = _from_content(boxed[-1], fmt) if boxed else None
        else:
            answer = None
            for m in regex.finditer(text):  # the first occurrence that carries an answer
                answer = _from_span(_line_after(text, m.end()), fmt)
                if answer is not None:
                    break
        if answer is not None:
            return answer, rule
    if fmt == "choice":
        found = _CHOICE_FALLBACK_RE.findall(text)
        if found:
            return next(g for g in found[-1] if g), "choice"
        return None, None
    if fmt == "exact":
        stripped = text.strip()
        return (stripped, "exact") if stripped else (None, None)
    last = None
    for last in _numbers(_delatex(text)):
        pass
    return (last, "last_number") if last is not None else (None, None)


def equivalent(pred: str | None, gold: str, fmt: str = "number") -> bool:
    """Is the extracted answer `pred` the gold answer? Numbers compare exactly as rationals. A math
    comparison that runs out of time is False (`compare` tells it apart)."""
    return bool(compare(pred, gold, fmt))


def compare(pred: str | None, gold: str, fmt: str = "number") -> bool | None:
    """`equivalent`, with None for a math comparison math-verify did not finish in MATH_TIMEOUT_S."""
    if pred is None or gold is None:
        return False
    gold = str(gold)
    if fmt == "choice":
        return _letter(pred) is not None and _letter(pred) == _letter(gold)
    if fmt == "exact":
        return pred.strip() == gold.strip()
    p_num, g_num = normalize_number(pred), normalize_number(gold)
    if p_num is not None and g_num is not None:
        return p_num == g_num
    if fmt == "number":
        return pred.strip() == gold.strip()
    if fmt != "math":
        raise ValueError(f"unknown answer format {fmt!r} (known: {', '.join(FORMATS)})")
    if _clean_expr(pred) == _clean_expr(gold):
        return True
    return _math_verify(_clean_expr(pred), _clean_expr(gold))


def grade(text: str, gold: str, fmt: str = "number") -> Grade:
    """Extract the answer from `text` and compare it with `gold`; see the module docstring for the rules. A
    math answer that cannot be compared in time is no answer (rule ``timeout``)."""
    answer, rule = extract_answer(text, fmt)
    same = compare(answer, gold, fmt)
    if same is None:
        return Grade(answer=None, rule="timeout", correct=False)
    return Grade(answer=answer, rule=rule, correct=same)


# ---------------------------------------------------------------------------------------- math-verify

_WORKER = None
_WORKER_LOCK = threading.Lock()


def _worker():
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            from reachtui.grading.math_worker import MathWorker

            _WORKER = MathWorker()
        return _WORKER


@lru_cache(maxsize=65536)
def _math_verify(pred: str, gold: str) -> bool | None:
    """math-verify's verdict on (pred, gold) from its worker process, None past MATH_TIMEOUT_S (cached too:
    an output repeated over K samples waits once)."""
    if len(pred) > MAX_MATH_CHARS or len(gold) > MAX_MATH_CHARS:
        return False
    return _worker().equal(pred, gold, MATH_TIMEOUT_S)
