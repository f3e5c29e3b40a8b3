"""The chance control: how much of "reachable" luck alone would give (pure Python, reading the store).

Each question's stored attempts are re-scored against the gold answer of *another* question of the run
(its partner: `derangement`, within answer-format strata: `stratum`), through the one grader's
`equivalent`. Nothing is generated again: the control is computed at table time from the store, so it
works for imported runs too. `run_control` also gathers, in the same pass, each (probe, question)'s
outcomes: hits and the first hit, the answer scatter and the answer-blind picks (`reachtui.outcomes`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from reachtui.grading import FORMATS, equivalent, normalize_number
from reachtui.outcomes import first_hit
from reachtui.probes import registry
from reachtui.seeds import derive_seed

if TYPE_CHECKING:
    from reachtui.protocol import Protocol
    from reachtui.store import Store

STRATA_SCHEMES = ("format", "none")
ALL = "all"


def stratum(gold: str, fmt: str = "number") -> str:
    """The answer-format stratum of a gold answer (`strata = "format"`, the default):

    - number (and math answers that are plain numbers): sign, integer or not, and the number of digits of
      the integer part: "14" -> "+int:2", "-3" -> "-int:1", "0.75" -> "+dec:1", "1/3" -> "+dec:1",
      "1200" -> "+int:4". A model that writes some two-digit number hits a two-digit gold by luck far more
      often than a four-digit one, so luck is measured against golds of the same magnitude.
    - math answers that are not plain numbers: "expr"; golds the number format cannot read: "text".
    - choice: one stratum (every letter is a possible gold); exact: one stratum.
    """
    if fmt in ("choice", "exact"):
        return fmt
    num = normalize_number(str(gold))
    if num is None:
        return "expr" if fmt == "math" else "text"
    return _number_stratum(num)


def _number_stratum(num: str) -> str:
    """The stratum of normalize_number's canonical text: an integer ("-12"), a finite decimal ("0.75") or
    "p/q" ("-7/3"); the integer part's digits are those of trunc(|value|)."""
    sign = "-" if num.startswith("-") else "+"
    digits = num.lstrip("-")
    if "/" in digits:
        p, q = digits.split("/")
        return f"{sign}dec:{len(str(int(p) // int(q)))}"
    if "." in digits:
        return f"{sign}dec:{len(digits.partition('.')[0])}"
    return f"{sign}int:{len(digits)}"


def _stratum_order(name: str) -> tuple:
    """Numbers by sign (negative first, largest magnitude first), kind and magnitude; then the rest."""
    head = name.split("|", 1)[0]
    if len(head) > 1 and head[0] in "+-" and ":" in head:
        kind, _, digits = head[1:].partition(":")
        d = int(digits) if digits.isdigit() else 0
        return (0, 0 if head[0] == "-" else 1, -d if head[0] == "-" else d, kind)
    return (1, head)


def assign_strata(golds: Sequence[str], fmt: str = "number", scheme: str = "format") -> list[str]:
    """The stratum of each gold (in the given order). `scheme = "none"` puts every question in one stratum.
    A stratum with a single question cannot be deranged: it joins its neighbour in stratum order (numbers
    by sign, kind and magnitude; "expr" and "text" last), the previous one, or the next when it is first."""
    if scheme == "none" or fmt not in FORMATS:
        return [ALL] * len(golds)
    raw = [stratum(g, fmt) for g in golds]
    members: dict[str, list[int]] = {}
    for i, s in enumerate(raw):
        members.setdefault(s, []).append(i)
    order = sorted(members, key=_stratum_order)
    groups: list[tuple[str, list[int]]] = [(s, list(members[s])) for s in order]
    merged: list[tuple[str, list[int]]] = []
    carry: tuple[str, list[int]] | None = None  # a leading singleton waiting for the next stratum
    for name, idx in groups:
        if carry is not None:
            name, idx = f"{carry[0]}|{name}", carry[1] + idx
            carry = None
        if len(idx) >= 2:
            merged.append((name, idx))
        elif merged:  # join the previous stratum
            prev_name, prev_idx = merged[-1]
            merged[-1] = (f"{prev_name}|{name}", prev_idx + idx)
        else:
            carry = (name, idx)
    if carry is not None:  # one question in all: nothing to pair it with
        merged.append(carry)
    out = [""] * len(golds)
    for name, idx in merged:
        for i in idx:
            out[i] = name
    return out


def derangement(golds: Sequence[str], fmt: str = "number", *, seed: int = 0,
                scheme: str = "format", strata: Sequence[str] | None = None) -> list[int | None]:
    """partner[i]: the position of question i's partner (golds in task order); never i, always in i's
    stratum; None only for a question alone in the run.

    Within each stratum the questions in task order are shuffled by a `random.Random` seeded from (control
    seed, stratum name), and each question's partner is the next one in the shuffled cycle: one cycle per
    stratum, so no question is its own partner and every question is the partner of exactly one other (a
    bijection). Partners may share a gold (two questions whose answer is 14): scoring against such a
    partner is what luck would give, so it is kept; and a probe that always answers the same constant c
    is control-reachable on exactly as many questions as have c as their gold. `strata`: the golds'
    `assign_strata`, when already computed."""
    names = assign_strata(golds, fmt, scheme) if strata is None else strata
    by_stratum: dict[str, list[int]] = {}
    for i, s in enumerate(names):
        by_stratum.setdefault(s, []).append(i)
    partner: list[int | None] = [None] * len(golds)
    for name, idx in by_stratum.items():
        if len(idx) < 2:
            continue
        cycle = list(idx)
        random.Random(derive_seed("control", seed, name)).shuffle(cycle)
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            partner[a] = b
    return partner


@dataclass(slots=True)
class Scatter:
    """One (probe, question): attempts, correct attempts and the first of them, attempts without an
    extracted answer, distinct extracted answers, attempts whose answer equals the partner's gold (control
    hits) and the first such attempt, and whether each answer-blind pick is correct (`reachtui.outcomes`)."""

    n: int = 0
    hits: int = 0  # correct attempts (against the question's own gold, as stored)
    no_answer: int = 0
    distinct: int = 0
    control_hits: int = 0
    control_first: int | None = None  # the k (1-based) of the first attempt hitting the partner's gold
    first_hit: int | None = None  # the k (1-based) of the first correct attempt (`outcomes.first_hit`)
    vote: bool | None = None  # the majority-vote pick is correct (None: no attempt has an answer)
    logprob: bool | None = None  # the highest-log-prob pick is correct (None: no attempt)


@dataclass
class RunControl:
    fmt: str
    seed: int
    scheme: str
    question_ids: list[int]  # the run's questions in task order
    partner: dict[int, int | None]  # question_id -> partner question_id
    stratum: dict[int, str]
    per: dict[str, dict[int, Scatter]] = field(default_factory=dict)  # probe -> question_id -> Scatter
    logprobs: set[str] = field(default_factory=set)  # probes with some attempt carrying a mean log-prob

    def probe(self, probe: str) -> dict[int, Scatter]:
        return self.per.get(probe, {})


#: `grading.equivalent` of (answer, gold) pairs, per answer format: one table build's runs share it (they
#: share questions, golds and partners, and most answers recur), so each pair is graded once per build.
Graded = dict[str, dict[tuple[str, str], bool]]


def control_params(protocol: Protocol | None) -> tuple[str, int, str]:
    """(answer format, control seed, strata scheme) of a run's protocol; the defaults for a protocol this
    reachtui cannot read (None)."""
    if protocol is None:
        return "number", 0, "format"
    return protocol.answer_format, protocol.control.seed, protocol.control.strata


def run_control(store: Store, run_id: int, protocol: Protocol | None,
                graded: Graded | None = None, *, stored: bool = True) -> RunControl:
    """The run's derangement and every (probe, question)'s outcomes (realized included): attempts, hits and
    the first hit, the answer scatter, the control hits and the answer-blind picks. One pass: the run's
    (probe, question, answer) groups (`Store.answer_groups`, from a covering index); Python sees
    groups, never attempts, and looks attempts up only for the picks that groups leave open (tied best
    log-probs, an answer whose attempts disagree on correctness). `graded`: the pairs graded so far, when
    the caller builds several runs (`Graded`). A finished run's pass is stored (`outcome_rows`); with
    `stored` it is read back instead of made again while it still describes the run's attempts."""
    fmt, seed, scheme = control_params(protocol)
    questions = store.run_golds(run_id)
    ids = [q for q, _g in questions]
    golds = [g for _q, g in questions]
    names = assign_strata(golds, fmt, scheme)
    partner_pos = derangement(golds, fmt, seed=seed, scheme=scheme, strata=names)
    partner = {q: (None if p is None else ids[p]) for q, p in zip(ids, partner_pos)}
    partner_gold = {q: (None if p is None else golds[p]) for q, p in zip(ids, partner_pos)}
    rc = RunControl(fmt, seed, scheme, ids, partner, dict(zip(ids, names)))
    kept = stored_pass(store, run_id) if stored else None
    if kept is not None:
        rc.per, rc.logprobs = kept
        return rc
    equal = {} if graded is None else graded.setdefault(fmt, {})
    _fold_groups(store, run_id, rc, partner_gold, equal)
    return rc


# ---- the pass of a finished run, stored (tables `outcomes`, `outcome_runs`: reachtui.store.schema) --------

#: Bump with any change to what the pass computes (`_fold_groups` and what it calls): a stored pass made
#: under other definitions (or by another reachtui version) is not read.
FOLD_VERSION = 1


def fold_key() -> str:
    from reachtui import __version__

    return f"{FOLD_VERSION}/{__version__}"


def outcome_rows(rc: RunControl) -> list[tuple]:
    """The pass as `outcomes` rows: (probe, question_id, n, hits, no_answer, answers, control_hits,
    control_first, first_hit, vote, logprob)."""
    return [(probe, q, c.n, c.hits, c.no_answer, c.distinct, c.control_hits, c.control_first, c.first_hit,
             None if c.vote is None else int(c.vote), None if c.logprob is None else int(c.logprob))
            for probe, cells in rc.per.items() for q, c in cells.items()]


def stored_pass(store: Store, run_id: int) -> tuple[dict[str, dict[int, Scatter]], set[str]] | None:
    """The run's stored pass, (probe -> question_id -> Scatter, probes with log-probs), if there is one that
    still describes its attempts and was made under these definitions; else None (make the pass)."""
    kept = store.stored_pass(run_id, fold_key())
    if kept is None:
        return None
    rows, logprobs = kept
    per = {probe: {q: Scatter(n, hits, no_answer, answers, c_hits, c_first, first,
                              None if vote is None else bool(vote), None if lp is None else bool(lp))
                   for q, n, hits, no_answer, answers, c_hits, c_first, first, vote, lp in cells}
           for probe, cells in rows.items()}
    return per, logprobs


def _uniform(correct: int | None, count: int) -> bool | None:
    """An answer group's attempts all correct (True), none (False), or some of them (None); `correct`
    is the group's count of correct attempts (None: none graded)."""
    if not correct:
        return False
    return True if correct == count else None


_OPEN = object()  # a pick that groups leave open: the attempts are looked up


def _refuse_unreadable(store: Store, run_id: int, probe: str, q: int) -> None:
    """DamagedStore: an attempt's `correct` is neither 0, 1 nor NULL (edited outside reachtui), so no count
    of correct attempts can be trusted."""
    from reachtui.errors import DamagedStore

    value = store.unreadable_grade(run_id, probe, q)
    raise DamagedStore(store.path, f"an attempt of run {run_id} (probe {probe}) has correct = {value!r}, not 0, 1 "
                                   f"or empty", hint="It was changed outside reachtui: restore the store from a "
                                                     "backup, or set that column back to 0 or 1")


def _fold_groups(store: Store, run_id: int, rc: RunControl, partner_gold: dict[int, str | None],
                 equal: dict[tuple[str, str], bool]) -> None:
    """`run_control`'s pass: fold each probe's answer groups into one Scatter per question. `equal`: the
    (answer, gold) pairs graded so far in the run's answer format (filled in here)."""
    fmt, per, logprobs = rc.fmt, rc.per, rc.logprobs
    open_vote: list[tuple[str, int, str]] = []  # (probe, question, winning answer): look up the pick
    open_lp: list[tuple[str, int]] = []
    open_first: list[tuple[str, int, str]] = []  # (probe, question, answer) whose attempts disagree
    for probe in registry.names(registry.PROBES):
        cells: dict[int, Scatter] = {}
        q_now = gold = None
        # per question, while its groups stream by: attempts n, correct c, the first hit (1-based),
        # attempts without an answer, distinct answers, control hits and the first; the vote's best
        # group (key = count, has a log-prob, best log-prob, -first attempt) and whether its attempts are
        # correct; the best log-prob (None: none yet) and whether the attempts at it are correct (_OPEN:
        # answers tied there differ, or None: not known from groups); the earliest group's correctness
        # (the logprob pick when no attempt has a log-prob)
        n = c = no_answer = distinct = c_hits = 0
        first_ok = c_first = v_key = v_ok = v_answer = lp_best = lp_ok = early = early_ok = None
        has_lp = False

        def close() -> None:
            vote = None
            if v_key is not None:
                vote = v_ok
                if v_ok is None:
                    vote = _OPEN
                    open_vote.append((probe, q_now, v_answer))
            lp = lp_ok if lp_best is not None else early_ok
            if lp is None or lp is _OPEN:
                lp = _OPEN
                open_lp.append((probe, q_now))
            cells[q_now] = Scatter(n, c, no_answer, distinct, c_hits, c_first, first_ok, vote, lp)

        for q, answer, count, first, correct, best_lp, unreadable in store.answer_groups(run_id, probe):
            if unreadable:
                _refuse_unreadable(store, run_id, probe, q)
            if q != q_now:  # groups come ordered by question
                if q_now is not None:
                    close()
                q_now, gold = q, partner_gold.get(q)
                n = c = no_answer = distinct = c_hits = 0
                first_ok = c_first = v_key = v_ok = v_answer = lp_best = lp_ok = None
                early, early_ok = first, _uniform(correct, count)
            ok = _uniform(correct, count)
            n += count
            if correct:
                c += correct
                if ok is None:
                    open_first.append((probe, q, answer))
                elif first_ok is None or first < first_ok - 1:
                    first_ok = first_hit(first)
            if first < early:
                early, early_ok = first, ok
            if best_lp is not None:
                has_lp = True
                if lp_best is None or best_lp > lp_best:
                    lp_best, lp_ok = best_lp, ok
                elif best_lp == lp_best and lp_ok is not ok:
                    lp_ok = _OPEN  # answers tied at the best log-prob differ: the earliest attempt decides
            if answer is None:
                no_answer += count
                continue
            distinct += 1
            if v_key is None or count >= v_key[0]:
                vk = (count, best_lp is not None, best_lp if best_lp is not None else 0.0, -first)
                if v_key is None or vk > v_key:
                    v_key, v_ok, v_answer = vk, ok, answer
            if gold is None:
                continue
            hit = equal.get((answer, gold))
            if hit is None:
                hit = equal[(answer, gold)] = equivalent(answer, gold, fmt)
            if hit:
                c_hits += count
                if c_first is None or first < c_first - 1:
                    c_first = first_hit(first)
        if q_now is not None:
            close()
        if cells:
            per[probe] = cells
        if has_lp:
            logprobs.add(probe)
    for probe, q, answer in open_first:
        k = store.first_hit_of(run_id, probe, q, answer)
        cell = per[probe][q]
        if cell.first_hit is None or k < cell.first_hit:
            cell.first_hit = k
    for probe, q, answer in open_vote:
        per[probe][q].vote = store.vote_pick(run_id, probe, q, answer) == 1
    for probe, q in open_lp:
        per[probe][q].logprob = store.logprob_pick(run_id, probe, q) == 1
