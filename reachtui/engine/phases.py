"""How each probe plans its attempts: one phase function per probe, `(ctx, probe, spec) -> None` (named by
the probe's registry record), run by the audit on a `RunContext` (which executes, grades and stores).

Decoding and seeds (`Protocol.decoding_of`, `reachtui.seeds.attempt_seed`): attempt j of the question with
task index i under probe P decodes at P's temperature and is seeded with derive_seed(protocol seed, P, i, j),
only when it samples. The store keeps neither: an export recomputes both with the same functions. Questions are taken in the run's prompt-length order (`ctx.by_length`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from reachtui.engine.plan import Work, jobs_by_intervention, jobs_by_questions
from reachtui.errors import ReachError
from reachtui.intervention import Intervention
from reachtui.probes.mcts import RouteSearch
from reachtui.routes import Route, format_route, sample_routes
from reachtui.seeds import derive_seed

#: mcts-blind's reward for a generation with no finite mean log-prob (no new token).
NO_LOGPROB_REWARD = -50.0


def realized(ctx, probe, spec=None) -> None:
    """One attempt (index 0) per question under the protocol's default decoding."""
    sampling = ctx.protocol.decoding_of(probe.name)
    ctx.run_plan(jobs_by_intervention([ctx.work(i, probe.name, 0, Intervention(), sampling)
                                      for i in ctx.by_length], ctx.batch_size))


def sample(ctx, probe, spec) -> None:
    """K attempts at the probe's temperature / top-p, normal layer order (the runner seeds one generator
    per prompt, so a row never depends on its batch companions)."""
    sampling = ctx.protocol.decoding_of(probe.name)
    ctx.run_plan(jobs_by_intervention([ctx.work(i, probe.name, j, Intervention(), sampling)
                                      for i in ctx.by_length for j in range(spec.budget)], ctx.batch_size))


def route_pool(ctx, spec, pos: int | None = None) -> list[Intervention]:
    """The routes probe's K routes: the shared pool (seeded by the protocol's seed), or in per_question
    mode question `pos`'s own (seeded by derive_seed(seed, "routes", its task index))."""
    if ctx.protocol.routes_mode == "shared":
        seed = ctx.protocol.seed
    else:
        seed = derive_seed(ctx.protocol.seed, spec.name, ctx.questions[pos]["idx"])
    return [Intervention(r) for r in sample_routes(ctx.L, spec.budget, seed, ctx.protocol.route_sampler)]


def routes(ctx, probe, spec) -> None:
    """Shared mode: attempt j of every question runs route j; a job is a chunk of questions with every
    route, so the runner prefills the chunk's prompts once for all routes. per_question mode: every
    question its own routes, generated in mixed calls (as MCTS rounds)."""
    sampling = ctx.protocol.decoding_of(probe.name)
    if ctx.protocol.routes_mode == "shared":
        pool = route_pool(ctx, spec)
        ctx.run_plan(jobs_by_questions(ctx.by_length, ctx.batch_size, lambda i: [
            ctx.work(i, probe.name, j, iv, sampling) for j, iv in enumerate(pool)]))
        return
    items = [ctx.work(i, probe.name, j, iv, sampling)
             for i in ctx.by_length for j, iv in enumerate(route_pool(ctx, spec, i))]
    try:
        ctx.run_plan([items], mixed=True)
    finally:
        ctx.forget_prefixes()


def reward(probe, correct: Any, mean_logprob: Any) -> float:
    """What a search learns from one generation: correctness when the probe is answer-aware, else the
    mean token log-prob."""
    if probe.answer_aware:
        return 1.0 if correct else 0.0
    if mean_logprob is None or not math.isfinite(float(mean_logprob)):
        return NO_LOGPROB_REWARD
    return float(mean_logprob)


def mcts(ctx, probe, spec) -> None:
    """One `RouteSearch` per question (seed derive_seed(protocol seed, probe, task index)), advanced in
    lock-step: every round, each unfinished search proposes a route, and the round's attempts run as mixed
    calls (planned whole, so a resumed run decodes the same batches). A resumed run first replays each
    question's stored attempts through its search (a pure function of its seed and the rewards it saw).
    The runner may keep each prompt's identity prefill across the rounds; it is told when they end."""
    K = spec.budget
    searches = [RouteSearch(ctx.L, K, derive_seed(ctx.protocol.seed, probe.name, q["idx"]), mcts=ctx.protocol.mcts,
                            sampler=ctx.protocol.route_sampler, route_factory=tuple) for q in ctx.questions]
    correct = _replay(ctx, probe, searches)

    def totals() -> tuple[int, int]:
        return (sum(len(s.order) for s in searches),
                sum(len(s.order) if s.exhausted else K for s in searches))

    ctx.emit(*totals(), correct=correct)
    try:
        _rounds(ctx, probe, spec, searches, totals, correct)
    finally:
        ctx.forget_prefixes()


def _rounds(ctx, probe, spec, searches: list[RouteSearch], totals, correct: int) -> None:
    """The searches' rounds until every one is done: each round's attempts as mixed calls."""
    sampling = ctx.protocol.decoding_of(probe.name)
    generated = 0
    while True:
        pending = [pos for pos, s in enumerate(searches) if s.propose_layers() is not None]
        if not pending:
            break
        j = min(len(searches[pos].order) for pos in pending)
        members: list[tuple[Work, bool]] = []    # (work, already stored)
        for pos, s in enumerate(searches):
            if len(s.order) > j:
                route, stored = s.order[j], True
            elif len(s.order) == j and s.pending is not None:
                route, stored = s.pending, False
            else:
                continue
            members.append((ctx.work(pos, probe.name, j, Intervention(Route(route)), sampling), stored))
        stored_now = frozenset((m.pos, m.attempt) for m, done in members if done)

        def observe(todo: Sequence[Work], rows: list[dict]) -> None:
            nonlocal generated, correct
            for w, r in zip(todo, rows):
                searches[w.pos].observe(w.intervention.layers(ctx.L), reward(probe, r["correct"], r["mean_logprob"]))
            generated += len(rows)
            correct += sum(1 for r in rows if r["correct"])
            ctx.emit(*totals(), generated=generated, correct=correct,
                     question_ids=tuple(dict.fromkeys(r["question_id"] for r in rows)))

        ctx.run_calls(ctx.mixed_calls([m for m, _ in members], stored_now), observe, mixed=True, stored=stored_now)
    ctx.emit(*totals(), generated=generated, correct=correct)


def _replay(ctx, probe, searches: list[RouteSearch]) -> int:
    """Feed each search the attempts already stored for its question; returns how many were correct."""
    stored: dict[int, list[tuple]] = {}
    for qid, attempt, route, ok, lp in ctx.store.stored_attempts(ctx.run_id, probe.name):
        stored.setdefault(qid, []).append((attempt, route, ok, lp))
    correct = 0
    for pos, s in enumerate(searches):
        q = ctx.questions[pos]
        for j, (attempt, route_text, ok, lp) in enumerate(stored.get(q["question_id"], [])):
            proposed = s.propose_layers()
            if attempt != j or proposed is None or format_route(proposed) != route_text:
                raise ReachError(
                    f"run {ctx.run_id}: the stored {probe.name} attempts of question {q['qid']} do not replay "
                    f"(attempt {attempt}: stored route {route_text}, the search proposes "
                    f"{None if proposed is None else format_route(proposed)}); start a new run")
            s.observe(proposed, reward(probe, ok, lp))
            correct += 1 if ok else 0
    return correct
