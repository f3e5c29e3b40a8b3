"""A deterministic stand-in for `reachtui.model.run.Runner` (no torch), for engine tests.

Questions look like "What is A + B?"; the fake "model" knows the sum but answers it correctly only
for some (prompt, intervention, seed) combinations, decided by a hash, so probes differ in what they reach.
Optionally it sleeps per call (to give kill tests time to land) and records its calls.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from pathlib import Path

from reachtui.generation import Decoding, Generation, RunnerDefaults
from reachtui.intervention import Intervention


def _h(*parts) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


class FakeRunner(RunnerDefaults):
    """Implements `reachtui.generation.Runner` (the real contract types, no torch)."""

    def __init__(self, num_layers: int = 8, delay: float = 0.0):
        self.num_layers = num_layers
        self.lock = threading.RLock()
        self.delay = delay
        self.calls: list[tuple] = []
        self.info = dict(name="fake", path=None, model_class="FakeModel", device="cpu", dtype=None, load_report=None)

    def suggest_batch_size(self, prompts, max_new_tokens, route_len):
        return 64, "fake"

    def resolve(self, intervention):
        return Intervention.of(intervention).checked(self.num_layers)

    def generate(self, prompts, intervention=None, *, decoding=Decoding(), seeds=None, batch_size=64):
        if self.delay:
            time.sleep(self.delay)
        iv = Intervention.of(intervention)
        route, silenced = iv.route, iv.silenced
        layers = tuple(route.layers) if route is not None else tuple(range(self.num_layers))
        self.calls.append((len(prompts), layers, tuple(sorted(silenced)), decoding.temperature))
        seeds = seeds or [0] * len(prompts)
        out = []
        for prompt, seed in zip(prompts, seeds):
            a, b = map(int, re.findall(r"(\d+) \+ (\d+)", prompt)[0])
            truth = a + b
            sampling = decoding.temperature > 0
            key = (prompt, layers, tuple(sorted(silenced)), seed if sampling else None)
            h = _h(*key)
            if route is None and not silenced and not sampling:
                ok = _h(prompt) % 3 == 0                      # realized: about a third
            elif silenced:
                ok = _h(prompt, tuple(sorted(silenced))) % 3 == 0
            else:
                ok = h % 4 == 0
            ans = truth if ok else truth + 1 + h % 3
            text = f" {a}+{b}={ans}. #### {ans}"
            lp = -((h >> 8) % 1000) / 1000.0
            out.append(Generation(text, [1] * 8, lp, 8, len(layers), len(layers) * (len(prompt) + 8)))
        return out


    def generate_many(self, prompts, interventions, *, decoding=Decoding(), seeds=None, batch_size=64,
                      on_done=None, rows=None):
        out = []
        for i, iv in enumerate(interventions):
            mine = prompts if rows is None else [prompts[j] for j in rows[i]]
            gens = self.generate(mine, iv, decoding=decoding, seeds=None if seeds is None else seeds[i],
                                 batch_size=batch_size)
            out.append(gens)
            if on_done is not None:
                on_done(i, gens)
        return out


def write_task(path: Path, n: int = 12) -> Path:
    with open(path, "w") as fh:
        for i in range(n):
            a, b = 3 + 7 * i % 23, 5 + 11 * i % 17
            fh.write(json.dumps({"id": f"q{i:03d}", "question": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n")
    return path
