"""A tiny, real HTTP server speaking the Anthropic Messages API shape (``POST /v1/messages``).

Fakes over mocks: tests point the real ``anthropic`` client at ``FakeAnthropic.base_url`` and
assert on what the server received. Every request must carry the API key (the configured key, else
401 ``authentication_error``) and ``anthropic-version`` (else 400). The key is accepted in
``x-api-key`` (the documented API header, sent by anthropic SDKs before 2.x) or as
``authorization: Bearer <key>`` (what anthropic 2.14 sends for ``api_key=``). Replies are scripted in
order with :meth:`answer`, :meth:`error` and :meth:`slow`; with nothing scripted the server
answers 500 with ``x-should-retry: false`` so a test that forgot a reply fails loudly.
Usage tokens default to a rough size of the request (bytes / 4) and of the text (bytes / 4).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

import pytest

API_KEY = "sk-ant-test-key"
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


class Received(NamedTuple):
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any
    raw: bytes


class Reply(NamedTuple):
    status: int
    body: Any
    headers: dict[str, str]
    delay_s: float = 0.0


def api_key_of(headers: dict[str, str]) -> str | None:
    """The API key a request carries: ``x-api-key``, else an ``authorization: Bearer`` token."""
    if headers.get("x-api-key"):
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth[len("Bearer "):] if auth.startswith("Bearer ") else None


class FakeAnthropic:
    def __init__(self, api_key: str = API_KEY) -> None:
        self.api_key = api_key
        self.replies: deque[Reply] = deque()
        self.requests: list[Received] = []
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    # --- scripting -------------------------------------------------------------------------------

    def answer(self, text: str, *, input_tokens: int | None = None, output_tokens: int | None = None,
               stop_reason: str = "end_turn", delay_s: float = 0.0) -> None:
        """A successful Messages response with ``text``; token counts computed at request time unless given."""
        body = {"text": text, "input_tokens": input_tokens, "output_tokens": output_tokens, "stop_reason": stop_reason}
        self.replies.append(Reply(200, body, {}, delay_s))

    def error(self, status: int, message: str = "", *, headers: dict[str, str] | None = None, times: int = 1) -> None:
        body = {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message or f"HTTP {status}"}}
        for _ in range(times):
            self.replies.append(Reply(status, body, dict(headers or {})))

    def slow(self, delay_s: float, text: str = "late") -> None:
        """An answer that arrives after ``delay_s`` (past the client's timeout, for timeout tests)."""
        self.answer(text, delay_s=delay_s)

    @property
    def messages_requests(self) -> list[Received]:
        return [r for r in self.requests if r.path == "/v1/messages"]

    # --- serving ---------------------------------------------------------------------------------

    def _respond(self, req: Received) -> Reply:
        if api_key_of(req.headers) != self.api_key:
            return Reply(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}, {})
        if not req.headers.get("anthropic-version"):
            return Reply(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                          "message": "anthropic-version header is required"}}, {})
        if req.path != "/v1/messages":
            return Reply(404, {"type": "error", "error": {"type": "not_found_error", "message": req.path}}, {})
        if not self.replies:
            return Reply(500, {"type": "error", "error": {"type": "api_error", "message": "nothing scripted"}},
                         {"x-should-retry": "false"})
        reply = self.replies.popleft()
        if reply.status != 200:
            return reply
        text = reply.body["text"]
        usage = {
            "input_tokens": reply.body["input_tokens"] if reply.body["input_tokens"] is not None else len(req.raw) // 4,
            "output_tokens": reply.body["output_tokens"] if reply.body["output_tokens"] is not None else max(1, len(text.encode()) // 4),
        }
        message = {
            "id": f"msg_fake_{len(self.requests):04d}", "type": "message", "role": "assistant",
            "model": (req.body or {}).get("model", "unknown"), "content": [{"type": "text", "text": text}],
            "stop_reason": reply.body["stop_reason"], "stop_sequence": None, "usage": usage,
        }
        return Reply(200, message, {}, reply.delay_s)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
                path = self.path.split("?")[0]
                req = Received(path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
                fake.requests.append(req)
                reply = fake._respond(req)
                if reply.delay_s and fake._stop.wait(reply.delay_s):
                    return
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("request-id", f"req_fake_{len(fake.requests):04d}")
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout)
                    pass

        return Handler


@pytest.fixture(name="fake_anthropic")
def fake_anthropic_fixture() -> Iterator[FakeAnthropic]:
    """A running :class:`FakeAnthropic`. Use it with ``from tests.fakeanthropic import fake_anthropic_fixture``."""
    fake = FakeAnthropic().start()
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture(name="no_backoff")
def no_backoff_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's retry backoff starts at 0.5 s (``anthropic._base_client.INITIAL_RETRY_DELAY``, doubling,
    with jitter) unless the response has ``retry-after(-ms)``: zero it so retry tests stay fast."""
    import anthropic._base_client

    monkeypatch.setattr(anthropic._base_client, "INITIAL_RETRY_DELAY", 0.0)
