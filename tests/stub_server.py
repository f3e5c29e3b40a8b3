"""A small OpenAI-compatible server for the fault tests of `--server` (the real engine, vLLM, is in
tests/test_serving_vllm.py): GET /v1/models and /version, POST /v1/completions answering every prompt with
" #### N" (N from the request's seed, so a resumed run can be checked attempt by attempt), unless a fault
is queued for the next request:

  429, 500         that status (Retry-After: 0), with an error message
  slow             the answer after `slow_s` seconds (past a short --request-timeout)
  malformed        200 with a body that is not JSON
  short            200 with an empty list of choices
  nologprobs       200 with a choice that has no log-probs
  cut              a Content-Length larger than the body, then the connection closed
  echo-key         401 whose message repeats the Authorization header it was sent

`tokens` answers with token ids and their log-probs (as vLLM's return_token_ids), made from the request.
`fail_always` makes every completion after the first `fail_after` that fault; `max_prompt` answers longer prompts (token ids) with a
400 like vLLM's context-length error. It counts requests, records the bodies and headers, and the most
requests it held at once (`peak`).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StubServer:
    def __init__(self, *, model: str = "stub-model", faults=(), fail_always: str | None = None, fail_after: int = 0,
                 max_prompt: int | None = None, max_model_len: int | None = None, delay: float = 0.0,
                 slow_s: float = 2.0, tokens=None) -> None:
        self.model, self.faults, self.fail_always, self.fail_after = model, list(faults), fail_always, fail_after
        self.max_prompt, self.max_model_len, self.delay, self.slow_s = max_prompt, max_model_len, delay, slow_s
        self.tokens = tokens        # body -> (token ids, log-probs): answer with these, as vLLM does
        self.bodies: list[dict] = []
        self.auth: list[str | None] = []
        self.lock = threading.Lock()
        self.inflight = self.peak = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    entry = {"id": stub.model, "object": "model", "created": 1, "owned_by": "stub",
                             "permission": []}
                    if stub.max_model_len:
                        entry["max_model_len"] = stub.max_model_len
                    self.reply(200, {"object": "list", "data": [entry]})
                elif self.path == "/version":
                    self.reply(200, {"version": "9.9.9"})
                else:
                    self.reply(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    stub.bodies.append(body)
                    stub.auth.append(self.headers.get("Authorization"))
                    always = stub.fail_always if len(stub.bodies) > stub.fail_after else None
                    fault = always or (stub.faults.pop(0) if stub.faults else None)
                    stub.inflight += 1
                    stub.peak = max(stub.peak, stub.inflight)
                try:
                    self.answer(body, fault)
                finally:
                    with stub.lock:
                        stub.inflight -= 1

            def answer(self, body: dict, fault: str | None) -> None:
                if stub.delay:
                    time.sleep(stub.delay)
                if body.get("model") != stub.model:
                    return self.reply(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
                if stub.max_prompt is not None and len(body["prompt"]) > stub.max_prompt:
                    return self.reply(400, {"error": {"message": f"This model's maximum context length is "
                                                                 f"{stub.max_prompt} tokens. However, you requested "
                                                                 f"{len(body['prompt'])} tokens in the messages."}})
                if fault in ("429", "500"):
                    return self.reply(int(fault), {"error": {"message": "busy" if fault == "429" else "boom"}},
                                      {"Retry-After": "0"})
                if fault == "malformed":
                    return self.raw(200, b'{"choices": [{"text": ')
                if fault == "short":
                    return self.reply(200, {"object": "text_completion", "choices": []})
                if fault == "cut":
                    return self.raw(200, b'{"choices": [', length=1000)
                if fault == "echo-key":
                    return self.reply(401, {"error": {"message": f"bad key: {self.headers.get('Authorization')}"}})
                if fault == "slow":
                    time.sleep(stub.slow_s)
                n = body.get("seed", 0) % 7 if body.get("temperature", 0) > 0 else len(body["prompt"]) % 7
                text = f" #### {n}"
                choice = {"index": 0, "text": text, "finish_reason": "stop",
                          "logprobs": {"token_logprobs": [-0.5, -0.25, -0.125], "tokens": []}}
                if stub.tokens is not None:
                    choice["token_ids"], choice["logprobs"]["token_logprobs"] = stub.tokens(body)
                    choice["text"] = "(the client decodes the token ids)"
                if fault == "nologprobs":
                    choice.pop("logprobs")
                self.reply(200, {"object": "text_completion", "model": stub.model, "choices": [choice]})

            def reply(self, status: int, payload: dict, headers: dict | None = None) -> None:
                self.raw(status, json.dumps(payload).encode(), headers=headers)

            def raw(self, status: int, data: bytes, *, length: int | None = None, headers: dict | None = None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data) if length is None else length))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                if length is not None:
                    self.close_connection = True

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address) -> None:
                pass            # a client that left mid-answer (a run stopped): nothing to say

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def completions(self) -> int:
        return len(self.bodies)
