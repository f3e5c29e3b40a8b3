"""Interventions on a failure set and the realized set: the audit's MLP scan and the app's apply job.

Both run one plan (`set_plan`): the questions of F ∪ R in the run's prompt-length order, in chunks of the
run's batch size, each chunk under every intervention, with the protocol's default decoding. The scan
silences each MLP in turn (probe `mlp:<L>`); an apply runs one edited intervention (probe `explore:<id>`).
Both count repaired and broken with `reachtui.outcomes.repaired_broken` over the stored attempts, so
silencing MLP L from the app gives exactly the scan's row for layer L.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reachtui.engine.context import RunContext, stopped_by
from reachtui.engine.plan import Work, jobs_by_questions, split
from reachtui.engine.progress import APPLY, Cancelled, Progress
from reachtui.intervention import Intervention
from reachtui.outcomes import failure_set_name, repaired_broken
from reachtui.probes.registry import EXPLORE, MLP


def scope(ctx: RunContext, question_ids: set[int]) -> list[int]:
    """The run positions of `question_ids`, in prompt-length order."""
    return [pos for pos in ctx.by_length if ctx.questions[pos]["question_id"] in question_ids]


def set_plan(ctx: RunContext, positions: Sequence[int], interventions: Sequence[tuple[str, Intervention]]
             ) -> list[list[Work]]:
    """Each (probe, intervention) on `positions`: one attempt each, stored as `probe`, seeded from the
    intervention's seed stream (when the default decoding samples)."""
    sampling = ctx.protocol.decoding_of(MLP.name(0))   # the default decoding, as every mlp:<L> and explore:<id>
    streams = [(probe, iv, iv.seed_stream(probe)) for probe, iv in interventions]     # once, not per question
    return jobs_by_questions(positions, ctx.batch_size, lambda pos: [
        ctx.work(pos, probe, 0, iv, sampling, stream=stream) for probe, iv, stream in streams])


def counts(ctx: RunContext, probe: str, failure: set[int], realized: set[int]) -> tuple[set[int], set[int]]:
    """(repaired, broken) question ids under the stored attempts of `probe`."""
    return repaired_broken(failure, realized, ctx.store.first_attempts(ctx.run_id, probe))


def scan(ctx: RunContext, set_id: int) -> None:
    """Silence each MLP in turn on the frozen set `set_id` and on the realized set; store per layer
    repaired/|F| and broken/|R| (table mlp_scan)."""
    failure = set(ctx.store.failure_set_members(set_id))
    realized = set(ctx.store.realized_ids(ctx.run_id))
    layers = [(MLP.name(L), Intervention(None, frozenset({L}))) for L in range(ctx.L)]
    ctx.run_plan(set_plan(ctx, scope(ctx, failure | realized), layers))
    rows = []
    for L, (probe, _iv) in enumerate(layers):
        repaired, broken = counts(ctx, probe, failure, realized)
        rows.append(dict(set_id=set_id, layer=L, failure_n=len(failure), repaired=len(repaired),
                         realized_n=len(realized), broken=len(broken)))
    ctx.store.write_mlp_scan(ctx.run_id, rows)


def failure_members(store, run_id: int, probe: str) -> set[int]:
    """The probe's frozen failure set, else (a run still going) its members by the same definition now."""
    fs = store.get_failure_set(run_id, failure_set_name(probe))
    if fs is not None:
        return set(store.failure_set_members(fs["id"]))
    return set(store.failure_candidates(run_id, probe))


def exploration_of(probe: str, intervention: Intervention, num_layers: int) -> tuple[str, str | None, str | None]:
    """How an exploration of `intervention` on failure:<probe> is stored: (target, route text or None for the
    normal order, silenced text or None)."""
    return (f"{failure_set_name(probe)}+realized", *intervention.normalized(num_layers).texts())


def stored_exploration(store, run_id: int, probe: str, intervention: Intervention, num_layers: int) -> dict | None:
    """The run's complete exploration of this very intervention on failure:<probe>, if one is stored (the
    latest): applying it again would only repeat its attempts, so the app re-opens it instead."""
    want = exploration_of(probe, intervention, num_layers)
    for e in reversed(store.explorations(run_id)):
        if (e["target"], e["route"], e["silenced"]) == want and e["status"] == "complete":
            return e
    return None


def apply(store, runner, run_id: int, probe: str, intervention: Intervention, *,
          on_event: Callable[[Progress], None] | None = None, cancel=None) -> Progress:
    """Run `intervention` on failure:<probe> and the realized set as the MLP scan would, stored as a new
    exploration (attempts `explore:<id>`); returns the last progress event (status complete or cancelled;
    `extra` holds exploration_id, name, target, repaired, failure_n, broken, realized_n)."""
    ctx = RunContext(store, runner, run_id, remember=False, on_event=on_event, cancel=cancel)
    ctx.phase = APPLY
    iv = intervention.normalized(ctx.L)
    failure, realized = failure_members(store, run_id, probe), set(store.realized_ids(run_id))
    target = failure_set_name(probe)
    name = f"{iv.describe(ctx.L)} on {target}"
    stored_target, route_text, silenced_text = exploration_of(probe, iv, ctx.L)
    eid = store.create_exploration(run_id, name, target=stored_target, route=route_text, silenced=silenced_text)
    probe = EXPLORE.name(eid)
    positions = scope(ctx, failure | realized)
    calls = [c for job in set_plan(ctx, positions, [(probe, iv)]) for c in split(job)]
    done = 0
    repaired: set[int] = set()      # question ids so far
    broken: set[int] = set()

    def event(status: str = "running") -> Progress:
        extra = dict(exploration_id=eid, name=name, target=target, repaired=len(repaired),
                     failure_n=len(failure), broken=len(broken), realized_n=len(realized))
        ev = Progress(run_id, APPLY, done, len(positions), generated=done, message=name, status=status,
                      extra=extra)
        if on_event is not None:
            on_event(ev)
        return ev

    def on_rows(todo, rows) -> None:
        nonlocal done
        fixed, broke = repaired_broken(failure, realized, {r["question_id"]: r["correct"] for r in rows})
        repaired.update(fixed)
        broken.update(broke)
        done += len(rows)
        store.update_exploration(eid, n=done, repaired=len(repaired), broken=len(broken))
        event()

    event()
    try:
        ctx.run_calls(calls, on_rows)
    except Cancelled:
        store.update_exploration(eid, status="cancelled")
        return event("cancelled")
    except BaseException as exc:
        raised = stopped_by(exc, store, lambda: store.update_exploration(eid, status="failed"))
        if raised is exc:
            raise
        raise raised from exc
    repaired, broken = counts(ctx, probe, failure, realized)
    store.update_exploration(eid, n=done, repaired=len(repaired), broken=len(broken), status="complete")
    return event("complete")
