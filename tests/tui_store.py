"""Synthetic audit stores for the app's tests and bench, written through the store's own API.

Deterministic: the same arguments give the same file contents (a seeded random.Random decides which
attempts are correct). No model is involved; the attempts look like the demo model's outputs.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from types import SimpleNamespace

from reachtui.engine.finish import write_stored_pass
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store

QUESTION_WORDS = ("apples", "marbles", "pencils", "stickers", "coins", "books", "shells", "cards")


def synthetic_task(n: int, seed: int = 0) -> SimpleNamespace:
    rng = random.Random(seed)
    questions = []
    for i in range(n):
        a, b, c = rng.randint(2, 40), rng.randint(2, 40), rng.randint(1, 9)
        thing = QUESTION_WORDS[i % len(QUESTION_WORDS)]
        text = (f"Sam has {a} {thing} and finds {b} more. He gives away {c}. How many {thing} does Sam have?"
                + ("\nShow your work." if i % 7 == 0 else ""))
        questions.append(SimpleNamespace(id=f"syn-{i:05d}", question=text, answer=str(a + b - c),
                                         solution=f"{a}+{b}={a + b}. {a + b}-{c}={a + b - c}. #### {a + b - c}"))
    blob = json.dumps([q.__dict__ for q in questions], sort_keys=True).encode()
    return SimpleNamespace(name=f"synthetic{n}", path=f"/synthetic/{n}.jsonl",
                           sha256=hashlib.sha256(blob + str(seed).encode()).hexdigest(), questions=questions)


def _text(gold: str, ok: bool, rng: random.Random) -> tuple[str, str]:
    answer = gold if ok else str(int(gold) + rng.choice((-3, -2, -1, 1, 2, 5)))
    return f" the total is {answer}. #### {answer}", answer


def build_store(path: str | Path, *, n: int = 40, k: int = 8, probes: tuple[str, ...] = ("sample", "routes"),
                seed: int = 0, num_layers: int = 8, status: str = "complete", mlp_scan: bool = True,
                model: str = "synthetic", model_path: str | None = None, freeze: bool = True,
                progress: float = 1.0) -> int:
    """Write a run of `n` questions x (1 realized + k attempts per probe) and return its id.

    `progress` < 1 writes only the first fraction of the questions (an audit still running)."""
    rng = random.Random(seed)
    task = synthetic_task(n, seed)
    spec = Protocol(probes=tuple(ProbeSpec(p, budget=k, temperature=1.0) for p in probes), seed=seed)
    protocol, phash = spec.canonical_json(), spec.hash()
    with Store(path) as store:
        model_id = store.upsert_model(model, model_path, "LlamaForCausalLM", num_layers)
        task_id = store.upsert_task(task)
        qids = store.task_question_ids(task_id)
        run_id = store.create_run(model_id, task_id, protocol_json=protocol, protocol_hash=phash,
                                  question_ids=qids.values(), status="running")
        batch = []
        done = int(round(n * progress))
        for i, q in enumerate(task.questions[:done]):
            key = qids[q.id]
            realized = rng.random() < 0.45
            text, answer = _text(q.answer, realized, rng)
            batch.append(dict(question_id=key, probe="realized", attempt=0, text=text, answer=answer,
                              rule="hash", correct=realized, new_tokens=12,
                              layers_executed=num_layers, compute=num_layers * 40))
            for p, probe in enumerate(probes):
                p_hit = (0.35 if realized else 0.12) / (p + 1)
                for j in range(k):
                    ok = rng.random() < p_hit
                    text, answer = _text(q.answer, ok, rng)
                    route = None if probe == "sample" else f"0-{num_layers // 2},{num_layers // 2}-{num_layers - 1}"
                    batch.append(dict(question_id=key, probe=probe, attempt=j, text=text, answer=answer,
                                      rule="hash", correct=ok, route=route,
                                      new_tokens=12, layers_executed=num_layers + 1, compute=(num_layers + 1) * 40))
            if len(batch) > 20000:
                store.insert_attempts(run_id, batch)
                batch = []
        store.insert_attempts(run_id, batch)
        if progress >= 1.0 and freeze:
            for probe in probes:
                store.create_failure_set(run_id, f"failure:{probe}", probe,
                                         store.failure_candidates(run_id, probe))
            if mlp_scan:
                fs = store.get_failure_set(run_id, f"failure:{probes[-1]}")
                realized_n = sum(1 for a in store.attempts(run_id, probe="realized") if a["correct"])
                rows = []
                for layer in range(num_layers):
                    repaired = (fs["size"] * ((layer * 37) % 11)) // 20
                    broken = (realized_n * ((layer * 53) % 13)) // 16
                    rows.append(dict(set_id=fs["id"], layer=layer, failure_n=fs["size"], repaired=repaired,
                                     realized_n=realized_n, broken=broken))
                store.write_mlp_scan(run_id, rows)
        if progress >= 1.0:
            if status == "complete":    # as a finished audit leaves it: with the tables' pass stored
                write_stored_pass(store, run_id)
            store.set_run_status(run_id, status)
    return run_id
