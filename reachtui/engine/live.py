"""A live run: one question under one intervention, now, graded by the one grader (what the app's enter
key shows). Nothing is stored."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from reachtui.engine.record import graded
from reachtui.generation import Decoding
from reachtui.intervention import Intervention


@dataclass(frozen=True)
class LiveResult:
    prompt: str
    gold: str
    text: str
    answer: str | None
    rule: str | None
    correct: bool
    route: str                 # the route that ran (text form)
    silenced: str              # "" for none
    new_tokens: int
    layers_executed: int
    seconds: float             # generating
    waited: float              # waiting for the model (an audit batch in flight)


def live_run(runner, protocol, question: dict[str, Any], intervention: Intervention = Intervention()) -> LiveResult:
    """`question` (question, gold) under `intervention` with the protocol's prompt and default decoding,
    seeded with the protocol's seed."""
    prompt = protocol.render_prompt(question["question"], runner.tokenizer)
    checked = runner.resolve(intervention)      # the route that runs: the identity route when none is given
    asked = time.perf_counter()
    with runner.lock:  # reentrant: generate() takes it again; held here to time the run apart from the wait
        t0 = time.perf_counter()
        gen = runner.generate([prompt], checked, decoding=Decoding.of(protocol), seeds=[protocol.seed])[0]
        seconds = time.perf_counter() - t0
    g = graded(gen.text, question["gold"], protocol.answer_format)
    return LiveResult(prompt=prompt, gold=question["gold"], text=gen.text, answer=g["answer"], rule=g["rule"],
                      correct=g["correct"], route=checked.texts()[0], silenced=checked.texts()[1] or "",
                      new_tokens=gen.new_tokens, layers_executed=gen.layers_executed, seconds=seconds,
                      waited=t0 - asked)
