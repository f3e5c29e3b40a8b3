"""Answer-blind selection over a probe's K candidates (pure Python).

A selector sees each candidate's extracted answer and mean token log-prob, never the gold answer, and
picks one candidate; the question counts as solved by the selector when that candidate is correct.

- `vote`: majority vote over extracted answers (candidates without an answer don't vote). Ties between
  answers go to the answer whose best candidate has the highest mean log-prob, then to the earliest
  attempt. The chosen candidate is the highest-log-prob candidate carrying the winning answer.
- `logprob`: the candidate with the highest mean token log-prob (ties: earliest attempt).

Selectors return the index of the chosen candidate, or None when there is nothing to choose (no
candidates, or no candidate with an answer for `vote`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SELECTORS = ("vote", "logprob")


@dataclass(frozen=True)
class Candidate:
    answer: str | None
    mean_logprob: float | None
    correct: bool = False


def _lp(x: float | None) -> float:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return -math.inf
    return float(x)


def select_logprob(cands: Sequence[Candidate]) -> int | None:
    best: int | None = None
    for i, c in enumerate(cands):
        if best is None or _lp(c.mean_logprob) > _lp(cands[best].mean_logprob):
            best = i
    return best


def select_vote(cands: Sequence[Candidate]) -> int | None:
    counts: dict[str, int] = {}
    best_of: dict[str, int] = {}   # answer -> index of its highest-log-prob (earliest on ties) candidate
    for i, c in enumerate(cands):
        if c.answer is None:
            continue
        counts[c.answer] = counts.get(c.answer, 0) + 1
        j = best_of.get(c.answer)
        if j is None or _lp(c.mean_logprob) > _lp(cands[j].mean_logprob):
            best_of[c.answer] = i
    if not counts:
        return None
    # Highest count, then highest best log-prob, then earliest first appearance (dicts keep insertion order).
    winner = max(counts, key=lambda a: (counts[a], _lp(cands[best_of[a]].mean_logprob)))
    top = [a for a in counts if (counts[a], _lp(cands[best_of[a]].mean_logprob))
           == (counts[winner], _lp(cands[best_of[winner]].mean_logprob))]
    return best_of[top[0]]


def select(selector: str, cands: Sequence[Candidate]) -> int | None:
    if selector == "vote":
        return select_vote(cands)
    if selector == "logprob":
        return select_logprob(cands)
    raise ValueError(f"unknown selector {selector!r} (known: {', '.join(SELECTORS)})")


def blind_correct(selector: str, cands: Sequence[Candidate]) -> bool:
    """Whether the selector's pick is correct (False when it picks nothing)."""
    i = select(selector, cands)
    return i is not None and bool(cands[i].correct)
