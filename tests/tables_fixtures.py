"""Synthetic audit stores for the table/export/compare/import tests: built with the store API, no model."""

from __future__ import annotations

import hashlib
import random
from types import SimpleNamespace

from reachtui.store import Store


def make_task(name: str, n: int, *, prefix: str = "q") -> SimpleNamespace:
    questions = tuple(
        SimpleNamespace(id=f"{prefix}{i:03d}", question=f"What is {i} + {i}?", answer=str(2 * i), solution=None)
        for i in range(n)
    )
    sha = hashlib.sha256(f"{name}:{n}:{prefix}".encode()).hexdigest()
    return SimpleNamespace(name=name, path=f"/tmp/{name}.jsonl", sha256=sha, questions=questions)


def add_run(store: Store, model: str, task, protocol_hash: str, data: dict, *, status: str = "complete",
            failure_sets: bool = True, protocol: dict | None = None) -> int:
    """A run whose attempts are `data`: {qid: {probe: [(correct, answer, mean_logprob), ...]}}.

    The realized probe gets a one-element list. Failure sets failure:<probe> are frozen from the store's
    own candidates, like an audit does."""
    model_id = store.upsert_model(model)
    task_id = store.upsert_task(task)
    ids = store.task_question_ids(task_id)
    if protocol is None:  # the protocol's probes and budgets, as an audit records them
        budgets: dict[str, int] = {}
        for per_probe in data.values():
            for probe, attempts in per_probe.items():
                if probe != "realized" and not probe.startswith(("mlp:", "explore:")):
                    budgets[probe] = max(budgets.get(probe, 0), len(attempts))
        protocol = {"answer_format": "number", "probes": [{"name": p, "budget": k} for p, k in budgets.items()]}
    run_id = store.create_run(model_id, task_id, protocol_json=protocol,
                              protocol_hash=protocol_hash, question_ids=[ids[q] for q in data])
    rows = []
    probes = set()
    for qid, per_probe in data.items():
        for probe, attempts in per_probe.items():
            probes.add(probe)
            for j, (correct, answer, lp) in enumerate(attempts):
                rows.append({"question_id": ids[qid], "probe": probe, "attempt": j, "text": f"#### {answer}",
                             "answer": answer, "rule": None if answer is None else "hash",
                             "correct": correct, "mean_logprob": lp, "new_tokens": 5, "layers_executed": 8,
                             "compute": 80})
    store.insert_attempts(run_id, rows)
    if failure_sets:
        for probe in sorted(probes):
            if probe != "realized" and not probe.startswith(("mlp:", "explore:")):
                store.create_failure_set(run_id, f"failure:{probe}", probe,
                                         store.failure_candidates(run_id, probe))
    store.set_run_status(run_id, status)
    return run_id


def random_data(task, seed: int, *, probes=("sample", "routes", "mcts"), k: int = 6, p_real: float = 0.4,
                p_hit: float = 0.3) -> dict:
    """Random attempts: answers drawn from a few candidates so that votes tie and log-probs matter."""
    rng = random.Random(seed)
    data = {}
    for q in task.questions:
        gold = q.answer
        per = {}

        def attempt(p):
            r = rng.random()
            if r < p:
                return (True, gold, round(rng.uniform(-2, 0), 1))
            if r < p + 0.15:
                return (False, None, None if rng.random() < 0.5 else round(rng.uniform(-2, 0), 1))
            return (False, str(rng.choice([1, 2, 3])), round(rng.uniform(-2, 0), 1))

        per["realized"] = [attempt(p_real)]
        for probe in probes:
            per[probe] = [attempt(p_hit) for _ in range(k)]
        data[q.id] = per
    return data
