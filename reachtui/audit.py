"""The audit engine: protocol x questions x probes -> attempts in the store, batched and resumable.

Pure Python: the model is reached only through a `Runner`-like object (`generate(prompts, route=,
silenced=, decoding=, seeds=, batch_size=)`, `num_layers`, `tokenizer`), so browsing code can import this
module without torch, and tests can drive it with a fake runner.

Order of work (each phase is a deterministic plan of attempts):

1. `realized`: one attempt (index 0) per question under the protocol's default decoding.
2. The protocol's probes, in canonical order:
   - `sample`: K attempts at the probe's temperature / top-p, normal layer order. Attempt j of the
     question with task index i is seeded with derive_seed(protocol.seed, "sample", i, j), and the
     runner seeds one generator per prompt, so a row never depends on its batch companions.
   - `routes`: shared mode: one pool `sample_routes(L, K, protocol.seed)`; attempt j of every question
     uses route j, so each route is one batched generation over the task. per_question mode: question i
     draws `sample_routes(L, K, derive_seed(protocol.seed, "routes", i))`; mixed calls (as MCTS rounds).
   - `mcts` / `mcts-blind`: one `RouteSearch` per question (seed derive_seed(protocol.seed, probe, i)),
     advanced in lock-step: every round, each unfinished search proposes a route; a round's attempts are
     generated in mixed calls (`Call.rows`: every proposed route over the questions that proposed it,
     decoded as one batch; log-probs then depend in their last bits on the batch, so the calls are planned
     whole, the same on a resumed run). Reward: correct (mcts) or the mean token log-prob
     (mcts-blind, answer-blind; its final answer is its highest-log-prob route's).
3. Failure sets `failure:<probe>` (reachable under the probe and not realized), frozen in the store.
4. Optional MLP scan: for every layer L, default decoding with MLP L silenced (probe `mlp:<L>`) on the
   chosen failure set F and on the realized set R; per layer repaired/|F| and broken/|R| in `mlp_scan`.

Jobs: a phase's plan is a list of jobs, each one runner call and one store transaction per intervention
(`insert_attempts`): an attempt is a row before it counts. Questions are taken in order of prompt length
(a batch then carries little padding). realized, sample, per-question routes: chunks of `batch_size`
attempts of one intervention (route, silenced, decoding) in plan order. Shared-pool routes and
the MLP scan: chunks of `batch_size` questions, each with every route (every silenced layer), so the runner
prefills the chunk's prompts once for all of them (`Runner.generate_many`, bit-identical to one call per
intervention). A resumed run rebuilds the same plan, skips the keys already stored (`done_keys`) and so
regenerates exactly the attempts that were lost, in the same batches (so even greedy rows see the same
batch companions): the batch size is stored with the run (`--batch-size`, else the runner's estimate from
its memory), and a resumed run keeps it. Out-of-memory halvings inside the runner are stored as run events.
MCTS resume replays each question's stored attempts through its search (a pure function of its seed and
the rewards it observed) before proposing anything new.

Execution: a job's missing attempts become runner calls (`Call`: the same prompts under one or more
interventions), run one after another in this process, or, when the runner has workers of its own
(`run_calls`: `reachtui.cluster.RayRunner` under `--ray`), on all its workers at once. Either way every
intervention's generations come back here to be graded and stored, so this process is the store's only
writer, and a call runs with the same prompts, seeds and batch wherever it runs.

Progress: `on_event(Progress)` after every chunk and at phase boundaries; cancel with a
`threading.Event` (checked between chunks; the run is then marked 'cancelled', resumable).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from reachtui.errors import ReachError
from reachtui.grading import grade
from reachtui.model.routes import format_route, format_silenced, sample_routes
from reachtui.probes.mcts import RouteSearch
from reachtui.seeds import derive_seed

#: An MCTS round's mixed calls hold this many batches' worth of questions (a larger mixed batch spreads a
#: decoding step's fixed cost over more rows).
MIXED_CALL = 4

#: Reward used for mcts-blind when a generation has no finite mean log-prob (no new token).
NO_LOGPROB_REWARD = -50.0

UNFINISHED = ("running", "cancelled", "failed")


# ------------------------------------------------------------------------------------------ events


@dataclass(frozen=True)
class Progress:
    """One progress report. `done`/`total` count attempts of the current phase (stored ones included);
    `generated` counts attempts generated by this session in the phase; `correct` the correct ones among
    `done`. `question_ids`: the store ids of the questions whose attempts were just written."""

    run_id: int
    phase: str                 # realized | sample | routes | mcts | mcts-blind | failure_sets | mlp_scan | done
    done: int
    total: int
    generated: int = 0
    correct: int = 0
    question_ids: tuple[int, ...] = ()
    phase_index: int = 0
    n_phases: int = 0
    elapsed: float = 0.0
    message: str = ""


class AuditCancelled(Exception):
    """Raised inside the engine when the cancel event is set; the run is left 'cancelled'."""


@dataclass
class AuditResult:
    run_id: int
    status: str                        # complete | cancelled
    resumed: bool
    generated: int                     # attempts generated by this session
    seconds: float
    phase_seconds: dict[str, float] = field(default_factory=dict)
    failure_sets: dict[str, int] = field(default_factory=dict)   # name -> set id


# ------------------------------------------------------------------------------------------ plan


@dataclass(frozen=True)
class Work:
    """One planned attempt. `pos` indexes the run's question list."""

    pos: int
    probe: str
    attempt: int
    route: tuple[int, ...] | None
    silenced: frozenset[int]
    temperature: float
    top_p: float
    seed: int | None

    @property
    def group(self) -> tuple:
        return (self.route, tuple(sorted(self.silenced)), self.temperature, self.top_p)


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


@dataclass
class Call:
    """One runner call: `prompts` under each of `interventions` ((Route | None, silenced layers)) with one
    decoding; `seeds[i][j]` seeds prompt j under intervention i. Plain data, so that a worker process runs
    exactly the call this process would (reachtui.cluster)."""

    prompts: list[str]
    interventions: list[tuple]
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
            route, silenced = self.interventions[0]
            on_done(0, runner.generate(self.prompts, route=route, silenced=silenced, decoding=self.decoding,
                                       seeds=self.seeds[0], batch_size=self.batch_size))
            return
        runner.generate_many(self.prompts, self.interventions, decoding=self.decoding, seeds=self.seeds,
                             batch_size=self.batch_size, on_done=on_done)

    def only(self, kept: Sequence[int]) -> "Call":
        """The same call restricted to the interventions `kept` (what a lost worker had not delivered)."""
        return Call(self.prompts, [self.interventions[i] for i in kept], self.decoding,
                    [self.seeds[i] for i in kept], self.batch_size,
                    None if self.rows is None else [self.rows[i] for i in kept])

    @property
    def mixed(self) -> bool:
        return self.rows is not None


def mcts_reward(probe: str, correct: Any, mean_logprob: Any) -> float:
    if probe == "mcts":
        return 1.0 if correct else 0.0
    if mean_logprob is None or not math.isfinite(float(mean_logprob)):
        return NO_LOGPROB_REWARD
    return float(mean_logprob)


# ------------------------------------------------------------------------------------------ run setup


def _protocol_diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    keys = sorted(set(a) | set(b))
    out = []
    for k in keys:
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _protocol_diff(va, vb, f"{prefix}{k}.")
        elif va != vb:
            out.append(f"{prefix}{k}")
    return out


def check_given_run(store, run_id: int, *, task, protocol, limit: int | None = None,
                    model_name: str | None = None) -> dict:
    """The run `run_id` if this command may continue it (same model, task, protocol and limit); else
    ReachError with one line saying what differs."""
    run = store.get_run(run_id)
    if run["source"] != "audit":
        raise ReachError(f"run {run_id} was imported, not audited; it cannot be continued")
    if model_name is not None and run["model"] != model_name:
        raise ReachError(f"run {run_id} audits model {run['model']!r}, not {model_name!r}")
    if run["task_sha256"] != task.sha256:
        raise ReachError(f"run {run_id} audits task {run['task']!r} ({run['task_sha256'][:12]}), "
                         f"not {task.name!r} ({task.sha256[:12]})")
    phash = protocol.hash()
    if run["protocol_hash"] != phash:
        try:
            stored = type(protocol).from_dict(json.loads(run["protocol_json"])).to_dict()
            diff = _protocol_diff(stored, protocol.to_dict())
        except (ValueError, TypeError, ReachError):
            diff = []
        detail = f" (differs in: {', '.join(diff)})" if diff else ""
        raise ReachError(f"run {run_id} was made with protocol {run['protocol_hash']}, this command gives "
                         f"protocol {phash}{detail}; repeat the run's own settings to continue it, or "
                         f"drop --run to start a new run")
    if limit is not None and run["limit_n"] != limit:
        raise ReachError(f"run {run_id} was made with --limit {run['limit_n']}, not {limit}")
    return run


def open_run(store, *, model_name: str, model_path: str | None, model_class: str | None, num_layers: int,
             task, protocol, limit: int | None = None, run_id: int | None = None,
             versions: dict[str, str | None] | None = None, new: bool = False) -> tuple[int, bool]:
    """The run to work on: `run_id` if given (checked against model, task, protocol and limit), else the
    latest unfinished run of the same (model, task, protocol, limit), else a new one. Returns
    (run_id, resumed)."""
    if limit is not None and limit < 1:
        raise ReachError(f"--limit must be at least 1, not {limit}")
    model_id = store.upsert_model(model_name, model_path, model_class, num_layers)
    task_id = store.upsert_task(task)
    phash = protocol.hash()
    if run_id is not None:
        check_given_run(store, run_id, task=task, protocol=protocol, limit=limit, model_name=model_name)
        return int(run_id), True
    if not new:
        run = store.find_run(model_id, task_id, phash, limit, statuses=UNFINISHED)
        if run is not None:
            return int(run["id"]), True
    qids = store.task_question_ids(task_id)          # {qid: question_id} in task order
    ids = [qids[str(q.id)] for q in task.questions]
    if limit is not None:
        ids = ids[:limit]
    versions = versions or {}
    rid = store.create_run(model_id, task_id, protocol_json=protocol.canonical_json(), protocol_hash=phash,
                           limit_n=limit, question_ids=ids,
                           torch_version=versions.get("torch"),
                           transformers_version=versions.get("transformers"),
                           device=versions.get("device"), dtype=versions.get("dtype"))
    return rid, False


# ------------------------------------------------------------------------------------------ the engine


class Audit:
    """Runs (or continues) one audit run. Construct, then `run()`."""

    def __init__(self, store, runner, run_id: int, *, batch_size: int | None = None, mlp_scan: str | None = None,
                 on_event: Callable[[Progress], None] | None = None, cancel=None,
                 decoding_factory: Callable[..., Any] | None = None, resumed: bool = False) -> None:
        from reachtui.protocol import Protocol

        self.store = store
        self.runner = runner
        self.run_id = int(run_id)
        self.run_row = store.get_run(self.run_id)
        self.protocol = Protocol.from_dict(json.loads(self.run_row["protocol_json"]))
        if self.protocol.hash() != self.run_row["protocol_hash"]:
            raise ReachError(f"run {run_id}: its stored protocol no longer hashes to {self.run_row['protocol_hash']} "
                             f"(made by another reachtui version?); start a new run")
        self.mlp_probe = mlp_scan
        self.on_event = on_event
        self.cancel = cancel
        self.resumed = resumed
        self._decoding_factory = decoding_factory
        self.L = int(runner.num_layers)
        self.questions = store.run_questions(self.run_id)
        if not self.questions:
            raise ReachError(f"run {self.run_id} has no questions")
        self.fmt = self.protocol.answer_format
        tokenizer = getattr(runner, "tokenizer", None)
        self.prompts = [self.protocol.render_prompt(q["question"], tokenizer) for q in self.questions]
        # questions in order of prompt length: a batch holds prompts of similar length, so little padding
        self.by_length = sorted(range(len(self.prompts)), key=lambda i: (len(self.prompts[i]), i))
        self.batch_size = self._choose_batch_size(batch_size)
        self._oom_seen = getattr(runner, "batch_size_hint", None)
        self.generated = 0
        self._t0 = time.monotonic()
        self._phase = ""
        self._phase_index = 0
        self.phases = ["realized"] + [p.name for p in self.protocol.probes] + ["failure_sets"]
        if mlp_scan is not None:
            names = [p.name for p in self.protocol.probes]
            if mlp_scan not in names:
                raise ReachError(f"--mlp-scan {mlp_scan}: that probe is not in this run "
                                 f"(probes: {', '.join(names) or 'none'})")
            self.phases.append("mlp_scan")

    # -- helpers ---------------------------------------------------------------------------------------
    def _choose_batch_size(self, asked: int | None) -> int:
        """--batch-size if given; else the run's own (a resumed run keeps its batches, so its numbers come
        out the same); else the runner's estimate from memory. Stored with the run, and why in its events."""
        stored = self.run_row.get("batch_size")
        if asked is not None:
            size, why = max(1, int(asked)), "--batch-size"
        elif stored:
            return int(stored)
        else:
            routed = any(p.name != "sample" for p in self.protocol.probes)
            longest = max(self.L, math.floor(self.protocol.route_sampler.max_frac * self.L)) if routed else self.L
            suggest = getattr(self.runner, "suggest_batch_size", None)
            size, why = suggest(self.prompts, self.protocol.max_new_tokens, longest) if suggest else (64, "default")
            why = f"auto: {why}"
        if size != stored:
            self.store.set_run_batch_size(self.run_id, size)
            self.store.add_run_event(self.run_id, "batch_size", f"{size} ({why})")
        return size

    def _note_out_of_memory(self) -> None:
        """Record a batch the runner halved after running out of memory (the run goes on)."""
        hint = getattr(self.runner, "batch_size_hint", None)
        if hint is not None and hint != self._oom_seen:
            self._oom_seen = hint
            detail = f"out of memory in {self._phase}: generation batches halved to {hint} prompts"
            self.store.add_run_event(self.run_id, "out_of_memory", detail)

    def _decoding(self, temperature: float, top_p: float):
        kw = dict(max_new_tokens=self.protocol.max_new_tokens, temperature=temperature, top_p=top_p,
                  stop=tuple(self.protocol.stop))
        if self._decoding_factory is not None:
            return self._decoding_factory(**kw)
        from reachtui.model.run import Decoding  # torch lives behind this import
        return Decoding(**kw)

    def _emit(self, **kw) -> None:
        if self.on_event is None:
            return
        kw.setdefault("phase", self._phase)
        self.on_event(Progress(run_id=self.run_id, phase_index=self._phase_index, n_phases=len(self.phases),
                               elapsed=time.monotonic() - self._t0, **kw))

    def _check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise AuditCancelled()

    def _seed(self, probe: str, pos: int, attempt: int, temperature: float) -> int | None:
        if temperature <= 0:
            return None       # greedy: the seed plays no part, so none is recorded
        return derive_seed(self.protocol.seed, probe, self.questions[pos]["idx"], attempt)

    def _counts(self, probe: str | None = None, like: str | None = None) -> tuple[int, int]:
        sql = "SELECT count(*), coalesce(sum(correct), 0) FROM attempts WHERE run_id = ? AND "
        if like is not None:
            row = self.store.conn.execute(sql + "probe LIKE ?", (self.run_id, like)).fetchone()
        else:
            row = self.store.conn.execute(sql + "probe = ?", (self.run_id, probe)).fetchone()
        return int(row[0]), int(row[1])

    @staticmethod
    def _route(layers):
        if layers is None:
            return None
        from reachtui.model.routes import Route
        return Route(layers)

    def _store(self, todo: Sequence[Work], gens) -> list[dict]:
        """Grade `gens` (one per work item) and store them in one transaction; returns the rows."""
        rows = []
        for w, g in zip(todo, gens):
            q = self.questions[w.pos]
            gr = grade(g.text, q["gold"], self.fmt)
            rows.append(dict(
                question_id=q["question_id"], probe=w.probe, attempt=w.attempt,
                route=None if w.route is None else format_route(w.route),
                silenced=format_silenced(w.silenced) or None, temperature=w.temperature, seed=w.seed,
                text=g.text, answer=gr.answer, rule=gr.rule, correct=gr.correct,
                mean_logprob=g.mean_logprob, new_tokens=g.new_tokens, layers_executed=g.layers_executed,
                compute=g.compute))
        self.store.insert_attempts(self.run_id, rows)
        self.generated += len(rows)
        self._note_out_of_memory()
        return rows

    @staticmethod
    def _split(todo: list[Work]) -> list[list[list[Work]]]:
        """A job's missing attempts as runner calls, each a list of intervention groups. Interventions over
        the same questions with the same decoding make one call (the runner prefills the prompts once for
        all of them); otherwise each intervention is a call of its own."""
        groups = group_in_order(todo)
        positions = [w.pos for w in groups[0]]
        decodings = {(g[0].temperature, g[0].top_p) for g in groups}
        if len(decodings) > 1 or any([w.pos for w in g] != positions for g in groups):
            return [[g] for g in groups]
        return [groups]

    def _call(self, groups: list[list[Work]], mixed: bool = False) -> Call:
        """The runner call of intervention groups over the same questions; `mixed`: over any questions (each
        group's own), decoded as one batch."""
        first = groups[0][0]
        positions = list(dict.fromkeys(w.pos for g in groups for w in g)) if mixed else [w.pos for w in groups[0]]
        at = {pos: n for n, pos in enumerate(positions)}
        return Call([self.prompts[pos] for pos in positions], [(self._route(g[0].route), g[0].silenced) for g in groups],
                    self._decoding(first.temperature, first.top_p),
                    [[w.seed if w.seed is not None else 0 for w in g] for g in groups],
                    self.batch_size if mixed else len(positions),
                    [[at[w.pos] for w in g] for g in groups] if mixed else None)

    def _run_calls(self, calls: list[list[list[Work]]],
                   on_rows: Callable[[Sequence[Work], list[dict]], None], *, mixed: bool = False,
                   stored: frozenset = frozenset()) -> None:
        """Generate every call's attempts; each intervention's rows are graded, stored in one transaction and
        reported (`on_rows(todo, rows)`) as soon as it is finished, so a kill loses at most the interventions
        in flight. Calls run one after another here, or all at once on the runner's workers if it has them
        (`run_calls`, yielding (call, intervention, generations) in the order they finish). `mixed`: each
        call's groups are over different questions and decode as one batch (`Call.rows`); such calls are
        planned whole, stored attempts included ((pos, attempt) in `stored`, generated again, not stored),
        so that a resumed run decodes exactly the batches of an uninterrupted one."""

        def deliver(groups: list[Work], gens) -> None:
            fresh = [(w, g) for w, g in zip(groups, gens) if (w.pos, w.attempt) not in stored]
            if fresh:
                todo = [w for w, _ in fresh]
                on_rows(todo, self._store(todo, [g for _, g in fresh]))

        if not hasattr(self.runner, "run_calls"):
            for groups in calls:
                self._check_cancel()

                def done(i: int, gens, groups=groups) -> None:
                    deliver(groups[i], gens)
                    self._check_cancel()

                self._call(groups, mixed).run(self.runner, done)
            return
        with closing(self.runner.run_calls([self._call(g, mixed) for g in calls], cancel=self.cancel)) as results:
            for c, i, gens in results:
                deliver(calls[c][i], gens)
                self._check_cancel()
        self._check_cancel()        # the workers stop early when cancel is set

    def _mixed_calls(self, items: Sequence[Work], stored: frozenset) -> list[list[list[Work]]]:
        """`items` (over any questions) as mixed calls of MIXED_CALL x batch_size attempts, grouped by
        intervention, whatever is stored ((pos, attempt) in `stored`): a resumed run decodes the same batches.
        A call with nothing left to store is dropped."""
        ordered = [w for g in group_in_order(items) for w in g]
        return [group_in_order(chunk) for chunk in chunks(ordered, MIXED_CALL * self.batch_size)
                if any((w.pos, w.attempt) not in stored for w in chunk)]

    def _execute(self, jobs: list[list[Work]], *, count_like: str | None = None, mixed: bool = False) -> None:
        """Run a phase's plan, skipping stored keys (`mixed`: the plan's attempts as `_mixed_calls`)."""
        items = [w for job in jobs for w in job]
        probes = {it.probe for it in items}
        done = set()
        for p in probes:
            done |= self.store.done_keys(self.run_id, p)
        qid = lambda it: self.questions[it.pos]["question_id"]  # noqa: E731
        key = lambda it: (qid(it), it.probe, it.attempt)  # noqa: E731
        state = {"done": sum(1 for it in items if key(it) in done), "generated": 0, "correct": 0}
        if state["done"]:
            if count_like is not None:
                state["correct"] = self._counts(like=count_like)[1]
            else:
                state["correct"] = sum(self._counts(p)[1] for p in probes)
        total = len(items)
        self._emit(done=state["done"], total=total, correct=state["correct"])

        def on_rows(rows: list[dict]) -> None:
            state["done"] += len(rows)
            state["generated"] += len(rows)
            state["correct"] += sum(1 for r in rows if r["correct"])
            self._emit(done=state["done"], total=total, generated=state["generated"], correct=state["correct"],
                       question_ids=tuple(dict.fromkeys(r["question_id"] for r in rows)))

        if mixed:
            stored = frozenset((it.pos, it.attempt) for it in items if key(it) in done)
            self._run_calls(self._mixed_calls(items, stored), lambda todo, rows: on_rows(rows), mixed=True,
                            stored=stored)
            return
        calls = []
        for job in jobs:
            todo = [it for it in job if key(it) not in done]
            if todo:
                calls += self._split(todo)
        self._run_calls(calls, lambda todo, rows: on_rows(rows))

    # -- phases ----------------------------------------------------------------------------------------
    def _plan_realized(self) -> list[list[Work]]:
        t, p = self.protocol.temperature, self.protocol.top_p
        return jobs_by_intervention([Work(i, "realized", 0, None, frozenset(), t, p, self._seed("realized", i, 0, t))
                                     for i in self.by_length], self.batch_size)

    def _plan_sample(self, spec) -> list[list[Work]]:
        t, p = spec.temperature, spec.top_p
        return jobs_by_intervention([Work(i, "sample", j, None, frozenset(), t, p, self._seed("sample", i, j, t))
                                     for i in self.by_length for j in range(spec.budget)],
                                    self.batch_size)

    def route_pool(self, spec, pos: int | None = None) -> list[tuple[int, ...]]:
        """The routes probe's routes: the shared pool, or question `pos`'s own in per_question mode."""
        if self.protocol.routes_mode == "shared":
            seed = self.protocol.seed
        else:
            seed = derive_seed(self.protocol.seed, "routes", self.questions[pos]["idx"])
        return [tuple(r.layers) for r in sample_routes(self.L, spec.budget, seed, self.protocol.route_sampler)]

    def _plan_routes(self, spec) -> list[list[Work]]:
        t, p = spec.temperature, spec.top_p
        if self.protocol.routes_mode == "shared":
            pool = self.route_pool(spec)
            return jobs_by_questions(self.by_length, self.batch_size, lambda i: [
                Work(i, "routes", j, route, frozenset(), t, p, self._seed("routes", i, j, t))
                for j, route in enumerate(pool)])
        items = []
        for i in self.by_length:       # every question its own routes: mixed calls (see _run_calls)
            for j, route in enumerate(self.route_pool(spec, i)):
                items.append(Work(i, "routes", j, route, frozenset(), t, p, self._seed("routes", i, j, t)))
        return [items]

    def _run_mcts(self, spec) -> None:
        probe = spec.name
        t, p = spec.temperature, spec.top_p
        K = spec.budget
        searches = [RouteSearch(self.L, K, derive_seed(self.protocol.seed, probe, q["idx"]),
                                mcts=self.protocol.mcts, sampler=self.protocol.route_sampler,
                                route_factory=tuple) for q in self.questions]
        # Replay what is stored.
        stored: dict[int, list[tuple]] = {}
        for row in self.store.conn.execute(
                "SELECT question_id, attempt, route, correct, mean_logprob FROM attempts "
                "WHERE run_id = ? AND probe = ? ORDER BY question_id, attempt", (self.run_id, probe)):
            stored.setdefault(row[0], []).append(row[1:])
        correct = 0
        for pos, s in enumerate(searches):
            qid = self.questions[pos]["question_id"]
            for j, (attempt, route_text, ok, lp) in enumerate(stored.get(qid, [])):
                proposed = s.propose_layers()
                if attempt != j or proposed is None or format_route(proposed) != route_text:
                    raise ReachError(
                        f"run {self.run_id}: the stored {probe} attempts of question {self.questions[pos]['qid']} "
                        f"do not replay (attempt {attempt}: stored route {route_text}, the search proposes "
                        f"{None if proposed is None else format_route(proposed)}); start a new run")
                s.observe(proposed, mcts_reward(probe, ok, lp))
                correct += 1 if ok else 0

        def totals() -> tuple[int, int]:
            done = sum(len(s.order) for s in searches)
            total = sum(len(s.order) if s.exhausted else K for s in searches)
            return done, total

        generated = 0
        d, tot = totals()
        self._emit(done=d, total=tot, correct=correct)
        while True:
            pending = [pos for pos, s in enumerate(searches) if s.propose_layers() is not None]
            if not pending:
                break
            j = min(len(searches[pos].order) for pos in pending)
            members: list[tuple[Work, bool]] = []    # (work, already stored)
            for pos, s in enumerate(searches):
                if len(s.order) > j:
                    route, is_done = s.order[j], True
                elif len(s.order) == j and s.pending is not None:
                    route, is_done = s.pending, False
                else:
                    continue
                members.append((Work(pos, probe, j, route, frozenset(), t, p, self._seed(probe, pos, j, t)),
                                is_done))
            stored_now = frozenset((m.pos, m.attempt) for m, f in members if f)
            # this round's calls: independent (each search has one route in the round)
            calls = self._mixed_calls([m for m, _ in members], stored_now)

            def observe(todo: Sequence[Work], rows: list[dict]) -> None:
                nonlocal generated, correct
                for w, r in zip(todo, rows):
                    searches[w.pos].observe(w.route, mcts_reward(probe, r["correct"], r["mean_logprob"]))
                generated += len(rows)
                correct += sum(1 for r in rows if r["correct"])
                d, tot = totals()
                self._emit(done=d, total=tot, generated=generated, correct=correct,
                           question_ids=tuple(dict.fromkeys(r["question_id"] for r in rows)))

            self._run_calls(calls, observe, mixed=True, stored=stored_now)
        d, tot = totals()
        self._emit(done=d, total=tot, generated=generated, correct=correct)

    def _freeze_failure_sets(self) -> dict[str, int]:
        out = {}
        for spec in self.protocol.probes:
            name = f"failure:{spec.name}"
            existing = self.store.get_failure_set(self.run_id, name)
            if existing is None:
                members = self.store.failure_candidates(self.run_id, spec.name)
                out[name] = self.store.create_failure_set(self.run_id, name, spec.name, members)
            else:
                out[name] = existing["id"]
        self._emit(done=len(out), total=len(out), message=", ".join(out))
        return out

    def _mlp_scan(self, set_name: str, set_id: int) -> None:
        members = set(self.store.failure_set_members(set_id))
        realized = set(self.store.realized_ids(self.run_id))
        scope = [pos for pos in self.by_length if self.questions[pos]["question_id"] in members | realized]
        t, p = self.protocol.temperature, self.protocol.top_p
        self._execute(jobs_by_questions(scope, self.batch_size, lambda pos: [
            Work(pos, f"mlp:{layer}", 0, None, frozenset({layer}), t, p, self._seed(f"mlp:{layer}", pos, 0, t))
            for layer in range(self.L)]), count_like="mlp:%")
        rows = []
        for layer in range(self.L):
            res = dict(self.store.conn.execute(
                "SELECT question_id, correct FROM attempts WHERE run_id = ? AND probe = ? AND attempt = 0",
                (self.run_id, f"mlp:{layer}")).fetchall())
            repaired = sum(1 for q in members if res.get(q) == 1)
            broken = sum(1 for q in realized if res.get(q) == 0)
            rows.append(dict(set_id=set_id, layer=layer, failure_n=len(members), repaired=repaired,
                             realized_n=len(realized), broken=broken))
        self.store.write_mlp_scan(self.run_id, rows)

    # -- driver ----------------------------------------------------------------------------------------
    def run(self) -> AuditResult:
        result = AuditResult(self.run_id, "running", self.resumed, 0, 0.0)
        self.store.set_run_status(self.run_id, "running")
        try:
            for self._phase_index, phase in enumerate(self.phases):
                self._phase = phase
                t0 = time.monotonic()
                if phase == "realized":
                    self._execute(self._plan_realized())
                elif phase == "sample":
                    self._execute(self._plan_sample(self.protocol.probe("sample")))
                elif phase == "routes":
                    self._execute(self._plan_routes(self.protocol.probe("routes")),
                                  mixed=self.protocol.routes_mode != "shared")
                elif phase in ("mcts", "mcts-blind"):
                    self._run_mcts(self.protocol.probe(phase))
                elif phase == "failure_sets":
                    self._check_cancel()
                    result.failure_sets = self._freeze_failure_sets()
                elif phase == "mlp_scan":
                    name = f"failure:{self.mlp_probe}"
                    self._mlp_scan(name, result.failure_sets[name])
                result.phase_seconds[phase] = time.monotonic() - t0
        except AuditCancelled:
            self.store.set_run_status(self.run_id, "cancelled")
            result.status = "cancelled"
        except KeyboardInterrupt:
            self.store.set_run_status(self.run_id, "cancelled")
            raise
        except BaseException:
            self.store.set_run_status(self.run_id, "failed")
            raise
        else:
            self.store.set_run_status(self.run_id, "complete")
            result.status = "complete"
        result.generated = self.generated
        result.seconds = time.monotonic() - self._t0
        self._phase = "done"
        self._emit(done=self.generated, total=self.generated, generated=self.generated, message=result.status)
        return result


def run_audit(store, runner, *, model_name: str, model_path: str | None = None, model_class: str | None = None,
              task, protocol, limit: int | None = None, run_id: int | None = None, batch_size: int | None = None,
              mlp_scan: str | None = None, on_event=None, cancel=None, versions=None, new: bool = False,
              decoding_factory=None) -> AuditResult:
    """Open (or resume) the run and execute it. See `open_run` and `Audit`."""
    rid, resumed = open_run(store, model_name=model_name, model_path=model_path, model_class=model_class,
                            num_layers=int(runner.num_layers), task=task, protocol=protocol, limit=limit,
                            run_id=run_id, versions=versions, new=new)
    audit = Audit(store, runner, rid, batch_size=batch_size, mlp_scan=mlp_scan, on_event=on_event,
                  cancel=cancel, decoding_factory=decoding_factory, resumed=resumed)
    return audit.run()
