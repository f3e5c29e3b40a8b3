"""What a question's outcome means, defined once: realized, reachable, first hit, failure set, repaired and
broken, gap and retained. Said here in words, with the pure functions on their results; written as queries
over the attempts table in `reachtui/store/outcomes.py` (the store answers them). The store, the tables, the
engine's MLP scan and apply job, and the app all use these.

- realized: the question's realized attempt (index 0) is correct; unknown (NULL/None) until it has run.
- reachable under a probe: some attempt of the probe is correct.
- first hit: the k at which the probe first reaches, 1-based as in pass@k and reachable@k: k = the
  lowest correct attempt index + 1 (attempt indices in the store are 0-based).
- failure set of a probe: reachable under it and realized known wrong.
- gap of a probe: reachable - realized. Reachable counts the probe's own attempts only (the seed's training
  finding needs a ceiling measured apart from realized), and those never include the default decoding (the
  routes never run the normal layer order; samples are drawn at the probe's temperature), so the gap can be
  negative: the probe reaches fewer questions than the default decoding realizes.
- retained (vote, logprob) of a probe: (blind - realized) / (reachable - realized), the share of the probe's
  gain an answer-blind pick keeps. Defined only where the gap is positive (else there is no gain to retain);
  negative where the blind pick scores below the default decoding; its interval only where the gap's
  interval lies above 0 (else the ratio is unbounded).
- answer-blind picks among a probe's attempts of a question (they never see the gold): `vote`, the most
  frequent extracted answer (attempts without one do not vote), ties to the answer whose best candidate
  has the highest mean log-prob (NULL lowest), then to the earliest first appearance, the pick being that
  answer's highest-log-prob (earliest) attempt; `logprob`, the attempt with the highest mean log-prob
  (NULL lowest, earliest on ties). The question counts as solved by a selector when its pick is correct.
- under an intervention (an MLP scan layer, an applied exploration), a failure-set member whose attempt is
  correct is repaired; a realized question whose attempt is wrong is broken.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reachtui.stats import diff, ratio
from reachtui.stats import is_missing as _missing

FAILURE_PREFIX = "failure:"


def failure_set_name(probe: str) -> str:
    """The name a probe's frozen failure set has in the store: `failure:<probe>`."""
    return FAILURE_PREFIX + probe


def first_hit(attempt_index: int | None) -> int | None:
    """The 1-based k of a first hit from its 0-based attempt index (None: never reached)."""
    return None if attempt_index is None else attempt_index + 1


def realized(correct: int | bool | None) -> bool | None:
    """A realized attempt's correctness as realized / not realized / unknown (not yet run)."""
    return None if correct is None else bool(correct)


def in_failure_set(is_realized: bool | None, reached: bool | None) -> bool:
    """Reachable and realized known wrong (what a frozen failure set holds)."""
    return is_realized is False and bool(reached)


def repaired_broken(failure: Iterable[int], realized_ids: Iterable[int],
                    correct_now: Mapping[int, bool | int | None]) -> tuple[set[int], set[int]]:
    """Under an intervention: (repaired = failure-set members now correct, broken = realized questions now
    wrong). `correct_now` maps a question id to its attempt's correctness under the intervention; a
    question without one counts as neither."""
    repaired = {q for q in failure if correct_now.get(q) in (True, 1)}
    broken = {q for q in realized_ids if correct_now.get(q) in (False, 0)}
    return repaired, broken


# --------------------------------------------------------------------------------------------------
# A probe's gap and retained, and what a table says where they are blank or negative
# --------------------------------------------------------------------------------------------------


def gap(reachable: float | None, realized: float | None) -> float:
    """reachable - realized (shares); NaN when either is unknown. Negative where the probe's own attempts
    reach fewer questions than the default decoding realizes."""
    return diff(reachable, realized)


def retained(blind: float | None, realized: float | None, reachable: float | None) -> float:
    """(blind - realized) / (reachable - realized) where the gap is positive; NaN where it is not (no gain
    to retain) or a share is unknown."""
    g = gap(reachable, realized)
    return ratio(diff(blind, realized), g) if not _missing(g) and g > 0 else math.nan


def retained_has_interval(value: float | None, gap_lo: float | None) -> bool:
    """Whether retained gets an interval: the value is defined and the gap's interval lies above 0 (where
    the interval holds 0 the replicates' ratio is unbounded)."""
    return not _missing(value) and not _missing(gap_lo) and gap_lo > 0


#: What the notes of a table say about its gap and retained cells (`gap_retained_notes`), after the rows' names.
NEGATIVE_GAP = ("gap below 0, because reachable counts only the probe's own attempts and they are not the default "
                "decoding (routes never run the normal layer order; samples are drawn at the probe's temperature)")
NO_GAIN = "retained is – because the gap is 0 or below (no gain to retain)"
UNBOUNDED = "retained has no interval because the gap's interval holds 0 (the ratio is unbounded)"
NEGATIVE_RETAINED = "retained below 0: the answer-blind pick gets fewer questions right than the default decoding"


def gap_retained_notes(rows: Sequence[Mapping[str, Any]], retained_keys: Sequence[str] = ("retained",)) -> list[str]:
    """The notes a table needs for its gap and retained cells, one per case that occurs, naming its rows:
    a negative gap, retained blank (gap <= 0), retained without interval (the gap's interval holds 0), a
    negative retained. `rows`: mappings with `label` (how the note names the row), `gap`, `gap_lo` (NaN:
    no intervals were made) and each of `retained_keys` (rows without a gap, such as the realized row, are
    skipped)."""
    cases: dict[str, list[str]] = {NEGATIVE_GAP: [], NO_GAIN: [], UNBOUNDED: [], NEGATIVE_RETAINED: []}
    for r in rows:
        g = r.get("gap")
        if _missing(g):
            continue
        label = r["label"]
        if g < 0:
            cases[NEGATIVE_GAP].append(label)
        if g <= 0:
            cases[NO_GAIN].append(label)
            continue
        values = [r.get(k) for k in retained_keys]
        gap_lo = r.get("gap_lo")
        if not _missing(gap_lo) and gap_lo <= 0 and any(not _missing(v) for v in values):
            cases[UNBOUNDED].append(label)
        if any(not _missing(v) and v < 0 for v in values):
            cases[NEGATIVE_RETAINED].append(label)
    return [f"{', '.join(dict.fromkeys(labels))}: {what}" for what, labels in cases.items() if labels]
