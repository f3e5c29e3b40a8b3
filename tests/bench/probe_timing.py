"""What the probe benchmarks share: loading a model the same way, and timing one phase of a real audit."""

from __future__ import annotations

import time


def load(model: str, task: str, device: str, threads: int | None):
    """(loaded model, warmed-up Runner, task) with torch on `threads` threads."""
    import torch

    from reachtui.model.load import load_model
    from reachtui.generation import Decoding
    from reachtui.model.run import Runner
    from reachtui.tasks import load_task

    if threads:
        torch.set_num_threads(threads)
    loaded = load_model(model, device=device)
    runner = Runner(loaded)
    runner.generate(["warm up"], decoding=Decoding(max_new_tokens=2))
    return loaded, runner, load_task(task)


def timed_audit(path, loaded, runner, task, protocol, phase: str, *, limit: int | None, batch_size: int):
    """A real audit (grading and store writes included) into a new store at `path`; returns (store, run id,
    attempts generated in `phase`, wall seconds, CPU seconds), timed from the phase's first progress event
    to its last."""
    from reachtui.engine.audit import run_audit
    from reachtui.store import Store

    store = Store(path)
    state = {"t0": None, "c0": None, "n": 0, "t1": None, "c1": None}

    def on_event(ev):
        if ev.phase != phase:
            return
        if state["t0"] is None:
            state["t0"], state["c0"] = time.perf_counter(), time.process_time()
        state["t1"], state["c1"], state["n"] = time.perf_counter(), time.process_time(), ev.generated

    res = run_audit(store, runner, model_name=loaded.name, model_path=str(loaded.path),
                    model_class=loaded.arch.model_class, task=task, protocol=protocol, limit=limit,
                    batch_size=batch_size, on_event=on_event)
    return store, res.run_id, state["n"], state["t1"] - state["t0"], state["c1"] - state["c0"]


def timed_phases(path, loaded, runner, task, protocol, phases, *, limit: int | None, batch_size: int,
                 on_phase=None):
    """A real audit into a new store at `path`; returns {phase: (attempts generated, wall seconds, CPU
    seconds)} for each of `phases`, each timed from its first progress event to its last. `on_phase(phase,
    started)` is called at a timed phase's first event (True) and when the next phase's first event comes
    (False): a profiler can cover the phase alone."""
    from reachtui.engine.audit import run_audit
    from reachtui.store import Store

    state: dict = {p: {"t0": None, "c0": None, "n": 0, "t1": None, "c1": None} for p in phases}
    current = {"phase": None}

    def on_event(ev):
        if ev.phase != current["phase"]:
            if on_phase is not None and current["phase"] in state:
                on_phase(current["phase"], False)
            current["phase"] = ev.phase
            if on_phase is not None and ev.phase in state:
                on_phase(ev.phase, True)
        s = state.get(ev.phase)
        if s is None:
            return
        if s["t0"] is None:
            s["t0"], s["c0"] = time.perf_counter(), time.process_time()
        s["t1"], s["c1"], s["n"] = time.perf_counter(), time.process_time(), ev.generated

    run_audit(Store(path), runner, model_name=loaded.name, model_path=str(loaded.path),
              model_class=loaded.arch.model_class, task=task, protocol=protocol, limit=limit,
              batch_size=batch_size, on_event=on_event)
    return {p: (s["n"], s["t1"] - s["t0"], s["c1"] - s["c0"]) for p, s in state.items()}
