"""An OpenAI-compatible server as reachtui speaks to it: what it serves, and completions with retries.

One `Client` per run, on httpx's async API. A completion is retried with exponential backoff when the
server is busy or failing (429, 5xx; `Retry-After` honoured), when the connection breaks (refused, reset, a
response cut short) and when a request outlives its timeout; after `TRIES` tries it fails the run with one
line (`EnvironmentFault`: the server, not the input), which stays resumable. A prompt the server refuses
(400: longer than its context) is `PromptRefused`, which the engine names by its question. A body that is
not a completion (not JSON, no choices, fewer choices than asked, no log-probs) is retried, then one line.

The API key comes from the environment variable `--api-key-env` names, only ever into the Authorization
header: every line that leaves this module is scrubbed of it, and URLs are shown without user, password
or query.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from reachtui.errors import EnvironmentFault, ReachError, first_line
from reachtui.generation import PromptRefused

#: Tries of one request before the run fails (the first and five retries).
TRIES = 6
#: The first retry's wait in seconds (doubled each time, with jitter, at most MAX_WAIT), unless the server
#: says how long (Retry-After, also capped at MAX_WAIT).
FIRST_WAIT = 0.5
MAX_WAIT = 30.0
#: Statuses worth trying again: the server is busy, restarting or behind a failing proxy.
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: Statuses that refuse one prompt (its length, its parameters): the engine names the question.
PROMPT_STATUSES = frozenset({400, 413, 422})
#: Connections per httpx pool. httpx's pool looks over every connection for every request waiting on each
#: event, so its work grows with the square of what it holds: 64 requests in flight cost 3-5 ms of CPU
#: each in one pool, 1.4 ms in 8 pools of 8 (measured against vLLM on the demo model).
POOL_SIZE = 8


@dataclass(frozen=True)
class ServerOptions:
    """The `--server` options: the base URL, the served model (None: the one /v1/models lists), the
    environment variable holding the API key (None: no key), requests in flight at once, and the seconds
    one request may take."""

    url: str
    model: str | None = None
    api_key_env: str | None = None
    concurrency: int = 64
    timeout: float = 600.0


def base_url(url: str) -> str:
    """The API's base URL: `http://host:port` and `http://host:port/v1` alike end in /v1 (a path that
    ends otherwise, e.g. a proxy's `/openai/v1`, is kept as given)."""
    text = url.strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ReachError(f"--server {shown(url)}: give the server's URL, e.g. http://127.0.0.1:8000/v1")
    return text if parts.path else text + "/v1"


def shown(url: str) -> str:
    """`url` as reachtui writes it anywhere (messages, the store): no user, password, query or fragment."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def api_key(env: str | None) -> str | None:
    """The key from the environment variable `env` names (None: none asked for); one line when unset."""
    import os

    if env is None:
        return None
    key = os.environ.get(env, "")
    if not key.strip():
        raise ReachError(f"--api-key-env {env}: the environment variable {env} is not set (export it with the "
                         f"server's key; the key is never given as an option)")
    return key.strip()


class Client:
    """Requests to one server, `concurrency` at a time at most: each holds one of `concurrency` slots, and slot
    k sends through pool k // POOL_SIZE, so no pool ever queues. Make it, use it and `aclose` it on one event
    loop."""

    def __init__(self, options: ServerOptions, key: str | None) -> None:
        self.url = base_url(options.url)
        self.where = shown(self.url)
        self._key = key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        timeout = httpx.Timeout(options.timeout, connect=min(options.timeout, 30.0))
        size = min(POOL_SIZE, options.concurrency)
        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        self.pools = [httpx.AsyncClient(base_url=self.url + "/", headers=headers, trust_env=False, timeout=timeout,
                                        limits=limits) for _ in range(-(-options.concurrency // size))]
        self.http = self.pools[0]
        self._free: asyncio.Queue[int] = asyncio.Queue()
        for slot in range(options.concurrency):
            self._free.put_nowait(slot)
        self._size = size
        self.retried: Counter[str] = Counter()    # why requests were tried again, since last asked

    async def aclose(self) -> None:
        for pool in self.pools:
            await pool.aclose()

    def scrub(self, text: str) -> str:
        """`text` without the API key (a server may echo the header it refused)."""
        return text.replace(self._key, "***") if self._key else text

    async def get(self, path: str) -> dict:
        """GET one JSON object (no retries: asked once, when a run starts); one line for what goes wrong."""
        try:
            response = await self.http.get(path)
        except httpx.TransportError as exc:
            raise EnvironmentFault(f"no server answers at {self.where} ({self._why(exc)}); start it, or check "
                                   f"--server") from None
        if response.status_code in (401, 403):
            raise ReachError(f"the server at {self.where} refused the request ({self._status(response)}): "
                             f"give its key with --api-key-env VAR") from None
        if response.status_code != 200:
            raise EnvironmentFault(f"the server at {self.where} answered GET /{path} with "
                                   f"{self._status(response)}") from None
        body = self._json(response)
        if not isinstance(body, dict):
            raise EnvironmentFault(f"the server at {self.where} answered GET /{path} with something other than a "
                                   f"JSON object; is it an OpenAI-compatible server?")
        return body

    async def complete(self, body: dict) -> dict:
        """POST /completions with `body` (one choice asked for); its one choice, checked to hold text and
        log-probs, after as many tries as it takes (at most TRIES)."""
        slot = await self._free.get()
        try:
            return await self._complete(body, self.pools[slot // self._size])
        finally:
            self._free.put_nowait(slot)

    async def _complete(self, body: dict, http: httpx.AsyncClient) -> dict:
        last = ""
        for attempt in range(TRIES):
            wait = None
            try:
                response = await http.post("completions", json=body)
            except httpx.TransportError as exc:      # refused, reset, cut short, timed out
                last, reason = self._why(exc), type(exc).__name__
            else:
                status = response.status_code
                reason = f"{status} {response.reason_phrase}".strip()
                if status == 200:
                    choice, last = self._choice(response)
                    if choice is not None:
                        return choice
                    reason = last.split(" (")[0]
                elif status in PROMPT_STATUSES:
                    raise PromptRefused(f"the server at {self.where} refused its prompt of {len(body['prompt'])} "
                                        f"tokens ({self._status(response)})")
                elif status in (401, 403):
                    raise ReachError(f"the server at {self.where} refused the request ({self._status(response)}): "
                                     f"check the key in --api-key-env")
                elif status == 404:
                    raise ReachError(f"the server at {self.where} does not serve {body['model']!r} "
                                     f"({self._status(response)}); see --server-model")
                elif status in RETRY_STATUSES:
                    last, wait = self._status(response), _retry_after(response)
                else:
                    raise EnvironmentFault(f"the server at {self.where} answered a completion with "
                                           f"{self._status(response)}")
            if attempt + 1 < TRIES:
                self.retried[reason] += 1
                await asyncio.sleep(wait if wait is not None else _backoff(attempt))
        raise EnvironmentFault(f"the server at {self.where} gave no completion in {TRIES} tries of a request "
                               f"(last: {last})")

    def _choice(self, response: httpx.Response) -> tuple[dict | None, str]:
        """(the one choice, "") of a 200 answer, or (None, what is wrong with it)."""
        try:
            body = response.json()
        except ValueError as exc:
            return None, f"a malformed answer: not JSON ({first_line(exc, 80)})"
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list):
            return None, "a malformed answer: no list of choices"
        if len(choices) < 1:
            return None, f"{len(choices)} choices for the 1 asked"
        choice = choices[0]
        if not isinstance(choice, dict) or not isinstance(choice.get("text"), str):
            return None, "a malformed answer: a choice without text"
        logprobs = choice.get("logprobs")
        if not isinstance(logprobs, dict) or not isinstance(logprobs.get("token_logprobs"), list):
            return None, "a malformed answer: a choice without log-probs"
        return choice, ""

    def _json(self, response: httpx.Response):
        try:
            return response.json()
        except ValueError:
            return None

    def _status(self, response: httpx.Response) -> str:
        """"404 Not Found: the server's own message" (its first line, at most 200 characters, no key)."""
        said = ""
        body = self._json(response)
        if isinstance(body, dict):
            error = body.get("error", body.get("message", body.get("detail")))
            if isinstance(error, dict):
                error = error.get("message")
            if isinstance(error, str):
                said = error
        elif response.text:
            said = response.text
        said = (said.strip().splitlines() or [""])[0][:200]
        head = f"{response.status_code} {response.reason_phrase}".strip()
        return self.scrub(f"{head}: {said}" if said else head)

    def _why(self, exc: BaseException) -> str:
        text = first_line(exc, 200)
        name = type(exc).__name__
        return self.scrub(name if text == name else f"{name}: {text}")


def _retry_after(response: httpx.Response) -> float | None:
    """The server's Retry-After in seconds (capped at MAX_WAIT), when it gives one as a number."""
    try:
        return min(max(float(response.headers.get("retry-after", "")), 0.0), MAX_WAIT)
    except ValueError:
        return None


def _backoff(attempt: int) -> float:
    """Exponential backoff with full jitter: a crowd of clients retrying does not come back at once."""
    return random.uniform(0.5, 1.0) * min(FIRST_WAIT * 2 ** attempt, MAX_WAIT)
