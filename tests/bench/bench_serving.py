"""Attempts/s through `--server` against the same requests sent by a minimal asyncio loop, on one server in
one run (run by hand, never collected). Target: reachtui at least 90% of the loop.

    REACHTUI_VLLM_PYTHON=.venv-vllm/bin/python python tests/bench/bench_serving.py [--questions 50] [--k 16]
    REACHTUI_TEST_SERVER=http://127.0.0.1:8000/v1 python tests/bench/bench_serving.py    # a running server

The workload is the sample probe on the demo task: QUESTIONS x K attempts at T = 1, each one request with
its own seed, `--concurrency` in flight. reachtui: the audit's sample phase (`run_audit`'s phase seconds:
requests, grading, the store's transactions, the engine's progress). The loop: the identical request
bodies (`ServerRunner._body`), sent with httpx under a semaphore, each answer parsed as JSON and nothing
else. Each round sends the same requests both ways (a new protocol seed per round), who goes first
alternating; the medians and their ratio are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vllm_server import vllm_server, why_none  # noqa: E402


def workload(runner, protocol, questions):
    """Every sample attempt's request body, in the audit's order (seeds from the engine's seed function)."""
    from reachtui.generation import Decoding
    from reachtui.seeds import attempt_seed

    spec = protocol.probe("sample")
    decoding = Decoding.of(protocol, spec.temperature, spec.top_p)
    bodies = []
    for i, q in enumerate(questions):
        ids = runner._encode(protocol.render_prompt(q.question))
        for j in range(spec.budget):
            bodies.append(runner._body(ids, decoding, attempt_seed(protocol.seed, "sample", i, j, spec.temperature)))
    return bodies


def cpu_seconds() -> float:
    """This process's CPU time (every thread): what the client takes from a machine it shares with a server."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def minimal_loop(url: str, bodies: list[dict], concurrency: int) -> float:
    """Seconds to send every body, `concurrency` at a time, and parse each answer (a request whose connection
    breaks, as a server's idle keep-alive closes it, is sent again: reachtui does so too)."""
    import httpx

    slots = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url + "/", timeout=600, limits=limits) as client:
        async def one(body):
            async with slots:
                for attempt in range(3):
                    try:
                        response = await client.post("completions", json=body)
                        break
                    except httpx.TransportError:
                        if attempt == 2:
                            raise
                response.raise_for_status()
                return response.json()["choices"][0]

        t0 = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
        return time.perf_counter() - t0


def through_reachtui(runner, protocol, task, limit: int, store: Path) -> float:
    """Seconds of the audit's sample phase (realized runs first, outside the clock)."""
    from reachtui.engine.audit import run_audit
    from reachtui.store import Store

    info = runner.info
    with Store(store) as st:
        result = run_audit(st, runner, model_name=info["name"], model_path=info["path"],
                           model_class=info["model_class"], task=task, protocol=protocol, limit=limit,
                           versions=info, new=True)
    assert result.status == "complete"
    return result.phase_seconds["sample"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if why_none():
        sys.exit(why_none())
    from reachtui.protocol import ProbeSpec, Protocol
    from reachtui.serving import ServerOptions, connect
    from reachtui.tasks import Fields, load_task

    task = load_task("demo", None, Fields())
    questions = list(task.questions)[: args.questions]
    n = len(questions) * args.k
    with tempfile.TemporaryDirectory() as tmp, vllm_server(Path(tmp) / "server.log") as url:
        with connect("demo", ServerOptions(url, concurrency=args.concurrency)) as runner:
            base = replace(Protocol(probes=(ProbeSpec("sample", budget=args.k),)), engine=runner.engine)
            asyncio.run(minimal_loop(url, workload(runner, replace(base, seed=999), questions[:8]), args.concurrency))
            loop_s, ours_s, loop_cpu, ours_cpu = [], [], [], []
            for r in range(args.rounds):
                protocol = replace(base, seed=r)       # the same requests for both, who goes first alternating
                for who in ((0, 1) if r % 2 == 0 else (1, 0)):
                    cpu = cpu_seconds()
                    if who == 0:
                        bodies = workload(runner, protocol, questions)
                        cpu = cpu_seconds()
                        loop_s.append(asyncio.run(minimal_loop(url, bodies, args.concurrency)))
                        loop_cpu.append(cpu_seconds() - cpu)
                    else:       # (its realized phase is in its CPU time: 1 attempt per question more)
                        ours_s.append(through_reachtui(runner, protocol, task, len(questions),
                                                       Path(tmp) / f"r{r}.sqlite"))
                        ours_cpu.append(cpu_seconds() - cpu)
                print(f"round {r + 1}: loop {n / loop_s[-1]:.1f} attempts/s, reachtui {n / ours_s[-1]:.1f} attempts/s",
                      flush=True)
    loop_rate, ours_rate = n / statistics.median(loop_s), n / statistics.median(ours_s)
    print(f"{n} attempts ({len(questions)} questions x K={args.k}, concurrency {args.concurrency}), medians of "
          f"{args.rounds} rounds: minimal asyncio loop {loop_rate:.1f} attempts/s, reachtui {ours_rate:.1f} "
          f"attempts/s: {ours_rate / loop_rate:.0%} of the loop (target >= 90%); client CPU per attempt: loop "
          f"{1000 * statistics.median(loop_cpu) / n:.2f} ms, reachtui "
          f"{1000 * statistics.median(ours_cpu) / (n + len(questions)):.2f} ms")


if __name__ == "__main__":
    main()
