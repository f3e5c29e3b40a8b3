"""The closing summary of an audit run, computed from the store (pure Python + SQL), in ONE place.

`summarize(store, run_id)` returns one row per probe of the run (realized first, then the protocol's
probes in canonical order), each a dict of plain numbers (fractions in [0, 1], not percents):

    probe            "realized" | "sample" | "routes" | "mcts" | "mcts-blind"
    budget           K (attempts per question planned by the protocol; 1 for realized)
    n                questions of the run
    n_attempted      questions with at least one attempt of this probe
    realized         share of the run's questions whose realized attempt is correct
    reachable        share with at least one correct attempt of this probe
    gap              reachable - realized
    blind_vote       share where the majority vote over the probe's extracted answers is correct
    blind_logprob    share where the highest-mean-log-prob attempt is correct (for mcts-blind: the
                     answer of its best route, which is the same thing: its reward is the log-prob)
    retained_vote    (blind_vote - realized) / (reachable - realized); NaN when reachable == realized
    retained_logprob the same for blind_logprob
    failure          size of the frozen failure set `failure:<probe>` (reachable, not realized); when
                     the set is not frozen yet (unfinished run), the live count
    chance           multiple choice with m options: 1 - (1 - 1/m)^K, the chance that K blind guesses
                     hit; None for other answer formats
    pass_at_k        sample: [pass@1, ..., pass@K] (unbiased estimator over all questions)
    reachable_at_k   routes / mcts / mcts-blind: [reachable@1, ..., reachable@K] from first-hit indices
                     (both curves None until every question of the run has attempts of the probe)

Every number is a function of the `attempts` table alone (plus the frozen sets), so tests recompute
them with plain SQL. `mlp_best(store, run_id)` gives the MLP scan's best block per failure set.
"""

from __future__ import annotations

import json
import math
from typing import Any

from reachtui.probes.blind import Candidate, blind_correct
from reachtui.probes.passk import pass_at_k_curve, reachable_curve


def _frac(num: float, den: float) -> float:
    return num / den if den else math.nan


def _retained(blind: float, realized: float, reachable: float) -> float:
    den = reachable - realized
    if not den or math.isnan(den):
        return math.nan
    return (blind - realized) / den


def summarize(store, run_id: int) -> list[dict[str, Any]]:
    run = store.get_run(run_id)
    protocol = json.loads(run["protocol_json"])
    budgets = {p["name"]: int(p["budget"]) for p in protocol.get("probes", [])}
    m = protocol.get("choices") if protocol.get("answer_format") == "choice" else None
    conn = store.conn
    n = conn.execute("SELECT count(*) FROM run_questions WHERE run_id = ?", (run_id,)).fetchone()[0]
    realized_ok = {q for (q,) in conn.execute(
        "SELECT question_id FROM attempts WHERE run_id = ? AND probe = 'realized' AND attempt = 0 AND correct = 1",
        (run_id,))}
    realized = _frac(len(realized_ok), n)
    n_realized_done = conn.execute(
        "SELECT count(*) FROM attempts WHERE run_id = ? AND probe = 'realized' AND attempt = 0",
        (run_id,)).fetchone()[0]
    rows: list[dict[str, Any]] = [dict(
        probe="realized", budget=1, n=n, n_attempted=n_realized_done, realized=realized, reachable=realized,
        gap=0.0, blind_vote=realized, blind_logprob=realized, retained_vote=math.nan,
        retained_logprob=math.nan, failure=0, chance=(1.0 / m) if m else None, pass_at_k=None,
        reachable_at_k=None)]
    frozen = {r["name"]: r["size"] for r in store.failure_sets(run_id)}
    for probe in [p["name"] for p in protocol.get("probes", [])]:
        K = budgets[probe]
        per_q: dict[int, list[tuple]] = {}
        for q, attempt, answer, lp, ok in conn.execute(
                "SELECT question_id, attempt, answer, mean_logprob, correct FROM attempts "
                "WHERE run_id = ? AND probe = ? ORDER BY question_id, attempt", (run_id, probe)):
            per_q.setdefault(q, []).append((attempt, answer, lp, bool(ok)))
        reach_q = {q for q, atts in per_q.items() if any(a[3] for a in atts)}
        reachable = _frac(len(reach_q), n)
        vote = logprob = 0
        first_hits: list[int | None] = []
        counts: list[tuple[int, int]] = []
        for q, atts in per_q.items():
            cands = [Candidate(a[1], a[2], a[3]) for a in atts]
            vote += blind_correct("vote", cands)
            logprob += blind_correct("logprob", cands)
            first_hits.append(next((a[0] for a in atts if a[3]), None))
            counts.append((len(atts), sum(a[3] for a in atts)))
        blind_vote, blind_logprob = _frac(vote, n), _frac(logprob, n)
        failure = frozen.get(f"failure:{probe}")
        if failure is None:
            failure = len(reach_q - realized_ok) if n_realized_done else 0
        row = dict(
            probe=probe, budget=K, n=n, n_attempted=len(per_q), realized=realized, reachable=reachable,
            gap=reachable - realized, blind_vote=blind_vote, blind_logprob=blind_logprob,
            retained_vote=_retained(blind_vote, realized, reachable),
            retained_logprob=_retained(blind_logprob, realized, reachable),
            failure=failure, chance=(1.0 - (1.0 - 1.0 / m) ** K) if m else None,
            pass_at_k=None, reachable_at_k=None)
        if probe == "sample":
            row["pass_at_k"] = pass_at_k_curve(counts, K) if counts and len(per_q) == n else None
        else:
            row["reachable_at_k"] = reachable_curve(first_hits, K) if n and len(per_q) == n else None
        rows.append(row)
    return rows


def mlp_best(store, run_id: int) -> list[dict[str, Any]]:
    """Per scanned failure set: the best block (highest repair rate, then lowest break rate, then lowest
    layer) as the `mlp_scan` row plus its set name."""
    best: dict[int, dict] = {}
    for row in store.mlp_scan(run_id):
        key = (-(row["repair_rate"] or 0.0), row["break_rate"] if row["break_rate"] is not None else 0.0,
               row["layer"])
        cur = best.get(row["set_id"])
        if cur is None or key < cur[0]:
            best[row["set_id"]] = (key, row)
    return [v[1] for _, v in sorted(best.items())]
