"""math-verify in a worker process with a time limit: the one way a math grade can neither hang nor stall
the others.

math-verify guards parse/verify with `signal.alarm`, which works only in the main thread, and grading runs
in worker threads; sympy holds the GIL, so a thread cannot be stopped either (`\\boxed{9^{9^{9^{9}}}}` never
returns). So each comparison runs in one long-lived child process, `python -m reachtui.grading.math_worker`
(a plain subprocess: no fork of a process with threads, nothing of the parent's main module re-run), and a comparison
that outlives its time limit has its process killed; the next comparison starts a fresh one. The child
starts on the first math comparison (about half a second: it imports math-verify), runs in its own session
(the terminal's Ctrl-C is the parent's to handle), writes nothing to the terminal and ends when its input
closes. Should the parent die mid-comparison, the child still stops: each comparison runs under a CPU-time
limit (RLIMIT_CPU, enforced by the kernel even while sympy holds the GIL) a few seconds past its own.

Protocol: one JSON line `[pred, gold, seconds]` in, one line `1` or `0` out; `ready` once at start.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading

from reachtui.errors import EnvironmentFault

#: Seconds the worker has to start (import math-verify) before math grading is reported as broken.
START_TIMEOUT_S = 120.0


class MathWorker:
    """The child process and the pipes to it; one comparison at a time (a lock: sympy holds the GIL anyway)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        atexit.register(self.close)

    def _start(self) -> None:
        proc = subprocess.Popen([sys.executable, "-m", "reachtui.grading.math_worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self._proc = proc
        if _readable(proc, START_TIMEOUT_S) and proc.stdout.readline() == b"ready\n":
            proc.stderr.close()        # the child writes nothing more there
            return
        self._stop()
        why = proc.stderr.read().decode("utf-8", "replace").strip().splitlines()
        proc.stderr.close()
        raise EnvironmentFault(f"the math grader's worker process did not start ({why[-1] if why else 'no reason'}"
                               f"); math answers cannot be graded")

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass

    def equal(self, pred: str, gold: str, timeout: float) -> bool | None:
        """Whether math-verify shows `pred` equal to `gold`; None when it did not answer within `timeout`
        seconds (its process is killed; the next comparison starts another)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            proc = self._proc
            try:
                proc.stdin.write(json.dumps([pred, gold, timeout]).encode("utf-8") + b"\n")
                proc.stdin.flush()
                if _readable(proc, timeout):
                    line = proc.stdout.readline()
                    if line in (b"1\n", b"0\n"):
                        return line == b"1\n"
            except OSError:
                pass
            self._stop()
            return None

    def close(self) -> None:
        with self._lock:
            self._stop()


def _readable(proc: subprocess.Popen, timeout: float) -> bool:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return bool(ready)


def _cpu_limit(seconds: float) -> None:
    """Let this process use at most `seconds` more CPU time (then the kernel ends it: SIGXCPU), in case
    nobody is left to kill it. Best effort: not every system has RLIMIT_CPU."""
    try:
        import math
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = int(usage.ru_utime + usage.ru_stime) + math.ceil(seconds) + 5
        if hard == resource.RLIM_INFINITY or soft <= hard:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ImportError, OSError, ValueError):
        pass


def main() -> None:
    """The child: answer each `[pred, gold, seconds]` line with `1` or `0` (0 also when math-verify fails)."""
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    from functools import lru_cache

    import math_verify
    import math_verify.grader
    import math_verify.parser

    devnull = os.open(os.devnull, os.O_WRONLY)       # whatever sympy or math-verify print goes nowhere
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    math_verify.parser.TIMEOUT_WARNING_SHOWN = True   # the timeouts are ours: no warning about theirs
    math_verify.grader.TIMEOUT_WARNING_SHOWN = True

    @lru_cache(maxsize=8192)
    def parsed(expr: str):
        return math_verify.parse(f"${expr}$", parsing_timeout=None)

    out.write(b"ready\n")
    for line in sys.stdin.buffer:
        try:
            pred, gold, seconds = json.loads(line)
            _cpu_limit(seconds)
            g, p = parsed(gold), parsed(pred)
            same = bool(g) and bool(p) and bool(math_verify.verify(g, p, timeout_seconds=None))
        except Exception:  # noqa: BLE001 - math-verify's own errors mean "could not show equal"
            same = False
        out.write(b"1\n" if same else b"0\n")


if __name__ == "__main__":
    main()
