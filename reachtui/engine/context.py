"""A run as the engine works on it, and the one write path of generated attempts.

`RunContext` holds what every generation job of a run needs — its protocol, questions and prompts in
prompt-length order, batch size, seeds and decoding — and executes planned `Work`: missing attempts become
runner calls, each finished intervention is graded and stored in one transaction (an attempt is a row
before it counts), and progress goes out as `Progress` events. The audit's phases, the MLP scan and the
app's apply job all run through it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import TYPE_CHECKING

from reachtui.engine.fits import PromptFit, prompt_fit
from reachtui.engine.plan import Call, Work, mixed_calls, split
from reachtui.engine.progress import Cancelled, Progress
from reachtui.engine.record import attempt_row
from reachtui.errors import DamagedStore, EnvironmentFault, ReachError, sqlite_fault
from reachtui.generation import CallPool, Decoding, PromptRefused, Runner
from reachtui.probes import registry
from reachtui.seeds import attempt_seed

if TYPE_CHECKING:
    from reachtui.intervention import Intervention
    from reachtui.protocol import Sampling


def stopped_by(exc: BaseException, store, mark_failed: Callable[[], None]) -> BaseException:
    """What to raise after `exc` stopped a job on `store`, having marked the job failed (`mark_failed`)
    where that is safe: never in a damaged store, and a store that no longer takes writes (disk full,
    read-only) leaves it as it is (still resumable). An sqlite3 error that is a fault of the store becomes
    its one-line EnvironmentFault."""
    fault = exc if isinstance(exc, EnvironmentFault) else sqlite_fault(exc, store.path)
    if not isinstance(fault, DamagedStore):
        try:
            mark_failed()
        except EnvironmentFault:
            pass
    return exc if fault is None else fault


def runner_fit(runner: Runner, protocol, questions: Sequence[tuple[str, str]]) -> PromptFit:
    """Which of `questions` ((question id, text)) fit the runner's model under `protocol`
    (`reachtui.engine.fits.prompt_fit` with the runner's tokenizer and token count); a max_new_tokens that
    leaves no room at all is refused here (a runner that knows no limit checks nothing: the model runner
    checks again before every generation)."""
    limit = runner.max_positions
    m = protocol.max_new_tokens
    if limit and m >= limit:
        raise ReachError(f"--max-new-tokens {m} does not fit the model's position limit of {limit} "
                         f"tokens (prompt + generated tokens); nothing was generated")
    return prompt_fit(protocol, questions, limit, tokenizer=lambda: runner.tokenizer, count=runner.prompt_lengths)


def check_fits(runner, protocol, questions: Sequence[tuple[str, str]]) -> None:
    """Refuse, before anything is generated or stored, prompts that do not fit the model (`runner_fit`; the
    refusal names them and what can be done)."""
    runner_fit(runner, protocol, questions).check(skip_long=False)


class RunContext:
    """One run of the store (a writer `Store`) on one runner. `batch_size`: asked for (--batch-size), else
    the run's own, else the runner's estimate; `remember` stores the choice with the run (the audit does,
    so a resumed run keeps its batches and its numbers). `fits_checked`: the job's prompts were checked
    against the model's positions already (`check_fits`: the audit checks before it touches the store), so
    they are not checked again."""

    def __init__(self, store, runner: Runner, run_id: int, *, batch_size: int | None = None, remember: bool = True,
                 on_event: Callable[[Progress], None] | None = None, cancel=None, fits_checked: bool = False) -> None:
        self.store = store
        self.runner = runner
        self.run_id = int(run_id)
        self.run_row = store.get_run(self.run_id)
        self.protocol = store.run_protocol(self.run_row)
        if self.protocol.hash() != self.run_row["protocol_hash"]:
            raise ReachError(f"run {run_id}: its stored protocol no longer hashes to {self.run_row['protocol_hash']} "
                             f"(made by another reachtui version?); start a new run")
        self.on_event = on_event
        self.cancel = cancel
        self.L = int(runner.num_layers)
        self.questions = store.run_questions(self.run_id)
        if not self.questions:
            raise ReachError(f"run {self.run_id} has no questions")
        self.fmt = self.protocol.answer_format
        if not fits_checked:
            check_fits(runner, self.protocol, [(q["qid"], q["question"]) for q in self.questions])
        self.prompts = [self.protocol.render_prompt(q["question"], runner.tokenizer) for q in self.questions]
        # questions in order of prompt length: a batch holds prompts of similar length, so little padding
        self.by_length = sorted(range(len(self.prompts)), key=lambda i: (len(self.prompts[i]), i))
        self.position = {q["question_id"]: pos for pos, q in enumerate(self.questions)}
        self.batch_size = self._choose_batch_size(batch_size, remember)
        self._oom_seen = runner.batch_size_hint
        self.generated = 0
        self.t0 = time.monotonic()
        self.phase = ""
        self.phase_index = 0
        self.n_phases = 0

    # -- settings ----------------------------------------------------------------------------------------
    def _choose_batch_size(self, asked: int | None, remember: bool) -> int:
        stored = self.run_row.get("batch_size")
        if asked is not None:
            size, why = max(1, int(asked)), "--batch-size"
        elif stored:
            return int(stored)
        else:
            routed = any(registry.get(p.name).routed for p in self.protocol.probes)
            L = self.L
            longest = max(L, math.floor(self.protocol.route_sampler.max_frac * L)) if routed else L
            size, why = self.runner.suggest_batch_size(self.prompts, self.protocol.max_new_tokens, longest)
            why = f"auto: {why}"
        if remember and size != stored:
            self.store.set_run_batch_size(self.run_id, size)
            self.store.add_run_event(self.run_id, "batch_size", f"{size} ({why})")
        return size

    def decoding(self, temperature: float, top_p: float) -> Decoding:
        return Decoding.of(self.protocol, temperature, top_p)

    def seed(self, stream: str, pos: int, attempt: int, temperature: float) -> int | None:
        """The seed of one attempt (`reachtui.seeds.attempt_seed`; None when greedy)."""
        return attempt_seed(self.protocol.seed, stream, self.questions[pos]["idx"], attempt, temperature)

    def work(self, pos: int, probe: str, attempt: int, intervention: Intervention, sampling: Sampling, *,
             stream: str | None = None) -> Work:
        """One planned attempt, drawn as `sampling` says and seeded in `stream` (default: the probe's own)."""
        return Work(pos=pos, probe=probe, attempt=attempt, intervention=intervention,
                    temperature=sampling.temperature, top_p=sampling.top_p,
                    seed=self.seed(stream or probe, pos, attempt, sampling.temperature))

    # -- events ------------------------------------------------------------------------------------------
    def emit(self, done: int, total: int, **kw) -> None:
        if self.on_event is None:
            return
        kw.setdefault("phase", self.phase)
        self.on_event(Progress(run_id=self.run_id, done=done, total=total, phase_index=self.phase_index,
                               n_phases=self.n_phases, elapsed=time.monotonic() - self.t0, **kw))

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled()

    # -- the store ---------------------------------------------------------------------------------------
    def record(self, todo: Sequence[Work], gens) -> list[dict]:
        """Grade `gens` (one per work item), store them in one transaction, note an out-of-memory halving
        the runner made meanwhile and what else it has to say (`take_notes`); returns the rows."""
        rows = [attempt_row(self.questions[w.pos], w, g, self.fmt) for w, g in zip(todo, gens)]
        self.generated += self.store.insert_attempts(self.run_id, rows)   # new rows only: never another's
        hint = self.runner.batch_size_hint
        if hint is not None and hint != self._oom_seen:
            self._oom_seen = hint
            self.store.add_run_event(self.run_id, "out_of_memory",
                                     f"out of memory in {self.phase}: generation batches halved to {hint} prompts")
        for note in self.runner.take_notes():      # e.g. decoding fell back to eager steps
            self.store.add_run_event(self.run_id, "engine", note)
        return rows

    # -- execution ---------------------------------------------------------------------------------------
    def call(self, groups: list[list[Work]], mixed: bool = False) -> Call:
        """The runner call of intervention groups over the same questions; `mixed`: over any questions (each
        group's own), decoded as one batch."""
        first = groups[0][0]
        positions = list(dict.fromkeys(w.pos for g in groups for w in g)) if mixed else [w.pos for w in groups[0]]
        at = {pos: n for n, pos in enumerate(positions)}
        return Call([self.prompts[pos] for pos in positions],
                    [g[0].intervention for g in groups],
                    self.decoding(first.temperature, first.top_p),
                    [[w.seed if w.seed is not None else 0 for w in g] for g in groups],
                    self.batch_size if mixed else len(positions),
                    [[at[w.pos] for w in g] for g in groups] if mixed else None)

    def mixed_calls(self, items: Sequence[Work], stored: frozenset) -> list[list[list[Work]]]:
        return mixed_calls(items, stored, self.batch_size)

    def run_calls(self, calls: list[list[list[Work]]], on_rows: Callable[[Sequence[Work], list[dict]], None], *,
                  mixed: bool = False, stored: frozenset = frozenset()) -> None:
        """See `_run_calls`; a prompt the runner refuses (a server's context limit) is named by its question."""
        try:
            self._run_calls(calls, on_rows, mixed=mixed, stored=stored)
        except PromptRefused as exc:
            if exc.prompt not in self.prompts:
                raise
            raise ReachError(f"question {self.questions[self.prompts.index(exc.prompt)]['qid']}: {exc}") from None

    def _run_calls(self, calls: list[list[list[Work]]], on_rows: Callable[[Sequence[Work], list[dict]], None], *,
                   mixed: bool = False, stored: frozenset = frozenset()) -> None:
        """Generate every call's attempts; each intervention's rows are recorded and reported
        (`on_rows(todo, rows)`) as soon as it is finished, so a kill loses at most the interventions in
        flight. Calls run one after another here, or all at once on the runner's own workers (a `CallPool`).
        `mixed`: the calls are planned whole, stored attempts included ((pos, attempt) in `stored`: generated
        again, not stored again), so a resumed run decodes exactly the batches of an uninterrupted one."""

        def deliver(groups: list[Work], gens) -> None:
            fresh = [(w, g) for w, g in zip(groups, gens) if (w.pos, w.attempt) not in stored]
            if fresh:
                todo = [w for w, _ in fresh]
                on_rows(todo, self.record(todo, [g for _, g in fresh]))

        if not isinstance(self.runner, CallPool):
            for groups in calls:
                self.check_cancel()

                def done(i: int, gens, groups=groups) -> None:
                    deliver(groups[i], gens)
                    self.check_cancel()

                self.call(groups, mixed).run(self.runner, done)
            return
        with closing(self.runner.run_calls([self.call(g, mixed) for g in calls], cancel=self.cancel)) as results:
            for c, i, gens in results:
                deliver(calls[c][i], gens)
                self.check_cancel()
        self.check_cancel()        # the workers stop early when cancel is set

    def forget_prefixes(self) -> None:
        """After a phase of mixed calls: the runner may drop the prompts' prefills it kept across them."""
        self.runner.forget_prefixes()

    def run_plan(self, jobs: list[list[Work]], *, mixed: bool = False) -> None:
        """Run a phase's plan, skipping what is stored (`mixed`: the plan's attempts as mixed calls)."""
        items = [w for job in jobs for w in job]
        probes = sorted({it.probe for it in items})
        done: set = set()
        for p in probes:
            done |= self.store.done_keys(self.run_id, p)
        key = lambda it: (self.questions[it.pos]["question_id"], it.probe, it.attempt)  # noqa: E731
        state = {"done": sum(1 for it in items if key(it) in done), "generated": 0, "correct": 0}
        if state["done"]:
            state["correct"] = self.store.correct_count(self.run_id, probes)
        total = len(items)
        self.emit(state["done"], total, correct=state["correct"])

        def on_rows(todo: Sequence[Work], rows: list[dict]) -> None:
            state["done"] += len(rows)
            state["generated"] += len(rows)
            state["correct"] += sum(1 for r in rows if r["correct"])
            self.emit(state["done"], total, generated=state["generated"], correct=state["correct"],
                      question_ids=tuple(dict.fromkeys(r["question_id"] for r in rows)))

        if mixed:
            stored = frozenset((it.pos, it.attempt) for it in items if key(it) in done)
            self.run_calls(self.mixed_calls(items, stored), on_rows, mixed=True, stored=stored)
            return
        calls = []
        for job in jobs:
            todo = [it for it in job if key(it) not in done]
            if todo:
                calls += split(todo)
        self.run_calls(calls, on_rows)

