"""Planning: attempts (`Work`) grouped into jobs and runner calls (`Call`). Pure data, no model.

A phase plans its attempts in the run's prompt-length order; a job is a chunk of them that becomes one
or more runner calls; a call is plain data (prompts, interventions, decoding, seeds, batch), so a worker
process runs exactly the call this process would (`reachtui.cluster`). An attempt's intervention is one
value (`reachtui.intervention.Intervention`) from the plan to the runner and the store row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from reachtui.intervention import Intervention
#: A mixed call (interventions over different questions, decoded as one batch) holds this many batches'
#: worth of attempts: a larger mixed batch spreads a decoding step's fixed cost over more rows.
MIXED_CALL = 4


@dataclass(frozen=True)
class Work:
    """One planned attempt. `pos` indexes the run's question list."""

    pos: int
    probe: str
    attempt: int
    intervention: Intervention
    temperature: float
    top_p: float
    seed: int | None

    @property
    def group(self) -> tuple:
        """The intervention and decoding: attempts with equal groups can share a runner call."""
        return (self.intervention, self.temperature, self.top_p)


def chunks(items: Sequence, size: int) -> Iterable[Sequence]:
    size = max(1, int(size))
    for start in range(0, len(items), size):
        yield items[start:start + size]


def group_in_order(items: Iterable[Work]) -> list[list[Work]]:
    """Items grouped by intervention, groups in order of first appearance, items in plan order."""
    groups: dict[tuple, list[Work]] = {}
    for it in items:
        groups.setdefault(it.group, []).append(it)
    return list(groups.values())


def jobs_by_intervention(items: Sequence[Work], size: int) -> list[list[Work]]:
    """One job per chunk of `size` items of one intervention (groups in order of first appearance)."""
    return [list(chunk) for group in group_in_order(items) for chunk in chunks(group, size)]


def jobs_by_questions(positions: Sequence[int], size: int, make: Callable[[int], list[Work]]) -> list[list[Work]]:
    """One job per chunk of `size` questions, holding every intervention of `make(pos)` for them: the
    runner prefills the chunk's prompts once for all the interventions (`Runner.generate_many`)."""
    jobs = []
    for chunk in chunks(positions, size):
        per_pos = [make(pos) for pos in chunk]
        jobs.append([w for k in range(len(per_pos[0]) if per_pos else 0) for w in (ws[k] for ws in per_pos)])
    return jobs


def split(todo: list[Work]) -> list[list[list[Work]]]:
    """A job's missing attempts as runner calls, each a list of intervention groups. Interventions over the
    same questions with the same decoding make one call (the runner prefills the prompts once for all of
    them); otherwise each intervention is a call of its own."""
    groups = group_in_order(todo)
    positions = [w.pos for w in groups[0]]
    decodings = {(g[0].temperature, g[0].top_p) for g in groups}
    if len(decodings) > 1 or any([w.pos for w in g] != positions for g in groups):
        return [[g] for g in groups]
    return [groups]


def mixed_calls(items: Sequence[Work], stored: frozenset, batch_size: int) -> list[list[list[Work]]]:
    """`items` (over any questions) as mixed calls of MIXED_CALL x batch_size attempts, grouped by
    intervention, whatever is stored ((pos, attempt) in `stored`): a resumed run decodes the same batches.
    A call with nothing left to store is dropped."""
    ordered = [w for g in group_in_order(items) for w in g]
    return [group_in_order(chunk) for chunk in chunks(ordered, MIXED_CALL * batch_size)
            if any((w.pos, w.attempt) not in stored for w in chunk)]


@dataclass
class Call:
    """One runner call: `prompts` under each of `interventions` with one decoding; `seeds[i][j]` seeds prompt j
    under intervention i."""

    prompts: list[str]
    interventions: list[Intervention]
    decoding: Any
    seeds: list[list[int]]
    batch_size: int
    rows: list[list[int]] | None = None     # intervention i runs on prompts rows[i] only (seeds[i] theirs)

    def run(self, runner, on_done: Callable[[int, list], None]) -> None:
        """Run on `runner`, calling `on_done(i, generations)` as soon as intervention i is finished. One
        intervention goes through `generate`; several through `generate_many`, which prefills the prompts
        once for all of them (bit-identical to one call per intervention). With `rows`, the interventions
        decode as one batch, whose numbers depend (in the last bits) on the whole call: such a call is
        always run whole (`mixed`)."""
        if self.rows is not None:
            runner.generate_many(self.prompts, self.interventions, decoding=self.decoding, seeds=self.seeds,
                                 batch_size=self.batch_size, on_done=on_done, rows=self.rows)
            return
        if len(self.interventions) == 1:
            on_done(0, runner.generate(self.prompts, self.interventions[0], decoding=self.decoding,
                                       seeds=self.seeds[0], batch_size=self.batch_size))
            return
        runner.generate_many(self.prompts, self.interventions, decoding=self.decoding, seeds=self.seeds,
                             batch_size=self.batch_size, on_done=on_done)

    def only(self, kept: Sequence[int]) -> Call:
        """The same call restricted to the interventions `kept` (what a lost worker had not delivered)."""
        return Call(self.prompts, [self.interventions[i] for i in kept], self.decoding,
                    [self.seeds[i] for i in kept], self.batch_size,
                    None if self.rows is None else [self.rows[i] for i in kept])

    @property
    def mixed(self) -> bool:
        return self.rows is not None
