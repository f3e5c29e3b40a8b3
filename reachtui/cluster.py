"""`reachtui audit --ray`: the audit's generations on Ray workers, one model load per worker, many workers.

`RayRunner` is what the engine sees instead of a `Runner`: `num_layers`, `tokenizer`, and `run_calls`, which
spreads a phase's runner calls (`reachtui.engine.plan.Call`) over the workers (an actor per GPU, or per `threads`
CPU cores) and yields each intervention's generations as soon as a worker has finished it. The engine
grades and stores them exactly as it does for a local runner: this process is the store's only writer.
A call runs on a worker with the same prompts, interventions, seeds and batch as it would locally, so a
Ray run equals a plain run with the same seed and the same `--threads` (CPU numerics depend on the
thread count).

A worker lost mid-call (its process or its node died) is restarted by Ray, and the call goes back to the
queue holding only the interventions not yet delivered: nothing is generated twice, nothing is lost. A
call that loses its worker `RETRIES` times fails the run (resumable) with one line.

`ray` is imported only here, and only when `--ray` is used. The model is loaded only by the workers, each in
its own process; calls and results cross as the torch-free types of `reachtui.generation`.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import deque

from reachtui.errors import EnvironmentFault, ReachError, first_line
from reachtui.generation import Decoding, Generation, RunnerDefaults
from reachtui.intervention import Intervention

#: How often one call may lose its worker (and a worker may be restarted) before the run fails.
RETRIES = 3
#: Test hook: PATH makes a worker exit mid-call (after the first intervention of a call of several), once:
#: the worker that creates PATH.
KILL_ENV = "REACHTUI_TEST_KILL_WORKER"

_ADDRESS = re.compile(r"^(auto|[\w.\-]+:\d+)$")


def check_options(address: str, workers: int | None = None, device: str = "auto") -> str:
    """The `--ray` options, checked before anything starts (no ray import); returns the address.

    ADDRESS: "" (start Ray here), auto or HOST:PORT (a running cluster). Ray Client (ray://) is left out: it
    needs grpcio and the cluster's auth token on the client, and a long audit is better run on a node of the
    cluster (`ray job submit -- reachtui audit ... --ray auto`)."""
    if workers is not None and workers < 1:
        raise ReachError(f"--workers must be at least 1, not {workers}")
    if (device or "auto") not in ("auto", "cpu", "cuda"):
        raise ReachError(f"--device {device} with --ray: use auto, cpu or cuda (each worker is given its own GPU)")
    address = address.strip()
    if address.startswith("ray://"):
        raise ReachError(f"--ray {address}: Ray Client is not supported; run reachtui on a node of the cluster "
                         "with --ray auto (e.g. through ray job submit)")
    if address and not _ADDRESS.match(address):
        raise ReachError(f"--ray {address!r}: give no value (start Ray here), auto (the cluster this machine "
                         "belongs to) or HOST:PORT (its head node)")
    return address


def import_ray():
    try:
        import ray
    except ImportError:
        raise ReachError("--ray needs Ray: pip install 'reachtui[ray]'") from None
    return ray



class Worker:
    """A Ray actor: one model, loaded on first use and kept for every call sent to it."""

    def __init__(self, model: str, load: dict, threads: int) -> None:
        self.model, self.load, self.threads = model, load, threads
        self.runner = None

    def _runner(self):
        if self.runner is None:
            from reachtui.model.run import load_runner

            self.runner = load_runner(self.model, threads=self.threads, **self.load)
        return self.runner

    def info(self) -> dict:
        """What the driver records about the model (and checks is the same on every worker)."""
        runner = self._runner()
        return dict(runner.info, num_layers=runner.num_layers, max_positions=runner.max_positions)

    def prompt_lengths(self, prompts: list[str]) -> list[int]:
        return self._runner().prompt_lengths(prompts)

    def suggest_batch_size(self, *args) -> tuple[int, str]:
        return self._runner().suggest_batch_size(*args)

    def forget_prefixes(self) -> None:
        if self.runner is not None:
            self.runner.forget_prefixes()

    def run(self, call):
        """Yield (intervention index, generations, the runner's batch_size_hint) as each intervention of `call`
        is finished. The call runs in a thread so that its per-intervention callback can feed this generator
        (a Ray stream)."""
        import queue

        runner = self._runner()
        results: queue.Queue = queue.Queue()

        def work() -> None:
            try:
                call.run(runner, lambda i, gens: results.put((i, gens, runner.batch_size_hint)))
                results.put(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the driver
                results.put(exc)

        threading.Thread(target=work, daemon=True).start()
        while (item := results.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
            if len(call.interventions) > 1:
                _die_if_asked()


def _die_if_asked() -> None:
    path = os.environ.get(KILL_ENV)
    if path:
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL))     # once, whichever worker gets there first
        except FileExistsError:
            return
        time.sleep(1.0)             # let the delivered intervention reach the driver
        os._exit(1)


class RayRunner(RunnerDefaults):
    """The engine's runner under `--ray`: a pool of `Worker` actors. `address`: "" starts Ray here, else the
    running cluster to join (if this process has Ray up already, e.g. in tests, that one is used). Use as a
    context manager (or `close()`): it kills the workers, and stops Ray if it started it. The engine runs its
    calls through `run_calls`; `generate` and `generate_many` run one call on a worker."""

    cannot_trace = "tracing with --ray: a trace runs in-process, without --ray"

    def __init__(self, model: str, *, address: str = "", workers: int | None = None, threads: int = 1,
                 device: str = "auto", dtype: str = "auto", trust_remote_code: bool = False,
                 allow_download: bool = False, allow_pickle: bool = False,
                 allow_missing_weights: bool = False) -> None:
        address = check_options(address, workers, device)
        if threads < 1:
            raise ReachError(f"--threads must be at least 1, not {threads}")
        ray = self.ray = import_ray()
        self.tokenizer = None       # set by the caller when the protocol renders prompts with a chat template
        self.lock = threading.RLock()
        self.losses: list[str] = []     # one line per worker lost mid-call
        self.batch_size_hint: int | None = None     # the smallest batch a worker's out-of-memory halving left
        self.actors: list = []
        self.started = not ray.is_initialized()
        if self.started:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")   # nothing leaves the machine unasked
            try:
                ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR)
            except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ...
                raise ReachError(f"cannot start or reach Ray{' at ' + address if address else ''}: "
                                 f"{first_line(exc)}") from None
        try:
            self._start(model, workers, threads, device, dict(device=device, dtype=dtype,
                                                             trust_remote_code=trust_remote_code,
                                                             allow_download=allow_download,
                                                             allow_pickle=allow_pickle,
                                                             allow_missing_weights=allow_missing_weights))
        except BaseException:
            self.close()
            raise

    def _start(self, model: str, workers: int | None, threads: int, device: str, load: dict) -> None:
        ray = self.ray
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0)) if device != "cpu" else 0
        cpus = int(resources.get("CPU", 0))
        if device == "cuda" and not gpus:
            raise ReachError("--device cuda with --ray: the Ray cluster has no GPUs")
        if gpus:
            workers = workers or gpus
            if workers > gpus:
                raise ReachError(f"--workers {workers}: the Ray cluster has {gpus} GPU(s), one per worker")
            need = dict(num_gpus=1)
        else:
            workers = workers or max(1, cpus // threads)
            if workers * threads > cpus:
                raise ReachError(f"--workers {workers} x --threads {threads} needs {workers * threads} CPUs; the "
                                 f"Ray cluster has {cpus}")
            need = dict(num_cpus=threads)
        env = {k: v for k, v in os.environ.items() if k.startswith("REACHTUI_")}
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        actor = ray.remote(Worker).options(max_restarts=RETRIES, max_task_retries=0,
                                           runtime_env={"env_vars": env}, **need)
        self.actors = [actor.remote(model, load, threads) for _ in range(workers)]
        infos = [_get(ray, a.info.remote()) for a in self.actors]
        same = [{k: v for k, v in i.items() if k != "path"} for i in infos]
        if any(s != same[0] for s in same):
            diff = next(s for s in same if s != same[0])
            raise ReachError(f"the Ray workers did not load the same model: {same[0]} vs {diff}")
        self.info = infos[0]
        self.num_layers = int(self.info["num_layers"])
        self.max_positions = self.info.pop("max_positions", None)
        self.workers = workers

    def resolve(self, intervention) -> Intervention:
        return Intervention.of(intervention).checked(self.num_layers)

    def generate(self, prompts: list[str], intervention=None, *, decoding: Decoding = Decoding(),
                 seeds: list[int] | None = None, batch_size: int = 64) -> list[Generation]:
        return self.generate_many(prompts, [intervention], decoding=decoding,
                                  seeds=None if seeds is None else [seeds], batch_size=batch_size)[0]

    def generate_many(self, prompts: list[str], interventions, *, decoding: Decoding = Decoding(),
                      seeds: list[list[int]] | None = None, batch_size: int = 64, on_done=None,
                      rows: list[list[int]] | None = None) -> list[list[Generation]]:
        """One engine call (`reachtui.engine.plan.Call`) on a worker, as `Runner.generate_many` runs it."""
        from reachtui.engine.plan import Call

        ivs = [self.resolve(iv) for iv in interventions]
        if seeds is None:
            seeds = [[0] * (len(prompts) if rows is None else len(rows[i])) for i in range(len(ivs))]
        out: list[list[Generation]] = [[] for _ in ivs]
        with self.lock:
            for _, i, gens in self.run_calls([Call(prompts, ivs, decoding, seeds, batch_size, rows)]):
                out[i] = gens
                if on_done is not None:
                    on_done(i, gens)
        return out

    def suggest_batch_size(self, prompts: list[str], max_new_tokens: int, route_len: int) -> tuple[int, str]:
        """`Runner.suggest_batch_size` on every worker; the smallest (a job must fit on any of them)."""
        args = (prompts, max_new_tokens, route_len)
        size, why = min(_get(self.ray, [a.suggest_batch_size.remote(*args) for a in self.actors]))
        return size, why if len(self.actors) == 1 else f"{why}; the least of {len(self.actors)} workers"

    def prompt_lengths(self, prompts: list[str]) -> list[int]:
        """Tokens of each prompt, counted by a worker's tokenizer (checked against `max_positions`)."""
        return _get(self.ray, self.actors[0].prompt_lengths.remote(prompts))

    def forget_prefixes(self) -> None:
        """`Runner.forget_prefixes` on every worker (best effort: a lost worker kept nothing)."""
        try:
            _get(self.ray, [a.forget_prefixes.remote() for a in self.actors])
        except Exception:  # noqa: BLE001 - only memory is at stake
            pass

    def run_calls(self, calls: list, cancel=None):
        """See `stream_calls` (the engine's seam: a runner with workers of its own)."""
        return stream_calls(self.ray, self.actors, calls, cancel=cancel, pool=self)

    def close(self) -> None:
        for actor in self.actors:
            try:
                self.ray.kill(actor)
            except Exception:  # noqa: BLE001
                pass
        self.actors = []
        if self.started and self.ray.is_initialized():
            self.ray.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _get(ray, ref):
    """ray.get; a worker's ReachError as one line (any other error keeps the worker's traceback)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, EnvironmentFault):      # out of memory on a worker: exit status 3 here too
            raise EnvironmentFault(str(exc.cause)) from None
        if isinstance(exc.cause, ReachError):
            raise ReachError(str(exc.cause)) from None
        raise


def stream_calls(ray, actors: list, calls: list, *, cancel=None, pool: RayRunner | None = None):
    """Run `calls` (reachtui.engine.plan.Call) on `actors` (`Worker`s), one call per actor at a time, and yield
    (call index, intervention index, generations) for every intervention of every call, each once, in the
    order they finish. A call whose worker is lost goes back to the queue with the interventions not yet
    delivered (a mixed call whole, its delivered interventions then skipped; a line on `pool.losses`);
    after RETRIES losses the run fails. A worker's out-of-memory halving
    lowers `pool.batch_size_hint`. Stops early (cancelling the work in flight) when `cancel` is set or the
    consumer stops."""
    left = {c: list(range(len(call.interventions))) for c, call in enumerate(calls)}   # not yet delivered
    pending = deque(range(len(calls)))
    idle = list(actors)
    running: dict = {}          # stream -> (actor, call index, the call's intervention indices it runs)
    lost: dict[int, int] = {}
    try:
        while pending or running:
            while pending and idle:
                c, actor = pending.popleft(), idle.pop(0)
                # a mixed call goes whole (its numbers depend on its batch); what was delivered is not repeated
                kept = list(range(len(calls[c].interventions))) if calls[c].mixed else list(left[c])
                call = calls[c] if len(kept) == len(calls[c].interventions) else calls[c].only(kept)
                running[actor.run.options(num_returns="streaming").remote(call)] = (actor, c, kept)
            if not running:
                raise ReachError("every Ray worker died; the run is resumable")
            if cancel is not None and cancel.is_set():
                return
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for stream in ready:
                actor, c, kept = running[stream]
                try:
                    i, gens, hint = _get(ray, next(stream))
                except StopIteration:
                    del running[stream]
                    idle.append(actor)
                    continue
                except ray.exceptions.RayActorError as exc:
                    del running[stream]
                    if pool is not None:
                        pool.losses.append(f"a Ray worker was lost mid-job ({type(exc).__name__}): "
                                           f"{len(kept) - len(left[c])} of {len(kept)} interventions were done, "
                                           f"{len(left[c])} sent again")
                    if not isinstance(exc, ray.exceptions.ActorDiedError):
                        idle.append(actor)          # Ray restarts it; calls sent meanwhile wait for it
                    lost[c] = lost.get(c, 0) + 1
                    if lost[c] >= RETRIES:
                        raise ReachError(f"a generation job lost its Ray worker {lost[c]} times (last: "
                                         f"{first_line(exc)}); the run is resumable") from None
                    if left[c]:
                        pending.appendleft(c)
                    continue
                if kept[i] not in left[c]:
                    continue
                left[c].remove(kept[i])
                if pool is not None and hint is not None:
                    pool.batch_size_hint = min(hint, pool.batch_size_hint or hint)
                yield c, kept[i], gens
    finally:
        for stream in running:
            try:
                ray.cancel(stream)
            except Exception:  # noqa: BLE001 - best effort: close() kills the workers anyway
                pass
