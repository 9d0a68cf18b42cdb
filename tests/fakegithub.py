"""A tiny, real HTTP server speaking the GitHub REST shapes that ha-bot's PyGithub calls need.

Fakes over mocks: tests point the real PyGithub client at ``FakeGitHub.base_url`` and assert on
the server's state (comments, statuses) and on its request log. Supported routes, each also under
``/repositories/{id}/...`` (the form GitHub uses in pagination ``Link`` headers):

    GET    /user
    GET    /repos/{owner}/{repo}
    GET    /repos/{owner}/{repo}/pulls/{number}
    GET    /repos/{owner}/{repo}/issues/{number}
    GET    /repos/{owner}/{repo}/issues/{number}/comments        (Link pagination, per_page, page)
    POST   /repos/{owner}/{repo}/issues/{number}/comments
    GET    /repos/{owner}/{repo}/issues/comments/{id}
    PATCH  /repos/{owner}/{repo}/issues/comments/{id}
    DELETE /repos/{owner}/{repo}/issues/comments/{id}
    GET    /repos/{owner}/{repo}/commits/{sha}
    POST   /repos/{owner}/{repo}/statuses/{sha}
    GET    /repos/{owner}/{repo}/commits/{sha}/statuses           (newest first, paginated)

A ``prefix`` (``"/api/v3"``) serves everything under a GitHub Enterprise Server-style path.
Faults are queued per route with :meth:`FakeGitHub.fail`; ``read_only=True`` answers every write
with the 403 a fork pull request's token gets; ``token=...`` makes any other token a 401.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "github"
DOCS = "https://docs.github.com/rest"
ACTIONS_BOT = "github-actions[bot]"
SECONDARY_RATE_LIMIT = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID ABCD:1234."
)
NOT_ACCESSIBLE = "Resource not accessible by integration"
DEFAULT_MESSAGES = {
    401: "Bad credentials",
    403: NOT_ACCESSIBLE,
    404: "Not Found",
    422: "Validation Failed",
    429: SECONDARY_RATE_LIMIT,
}
STATUS_STATES = ("error", "failure", "pending", "success")
SHA_RE = re.compile(r"[0-9a-f]{40}")
EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)


def load_event(name: str) -> dict[str, Any]:
    """A real webhook payload from ``tests/fixtures/github`` (e.g. ``"pull_request.opened"``)."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


class Logged(NamedTuple):
    """One request the server received."""

    method: str
    path: str  # without the prefix and without the query
    route: str  # the matched template, e.g. "/repos/{owner}/{repo}/issues/{number}/comments"
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: Any


class Fault(NamedTuple):
    status: int
    body: Any
    headers: dict[str, str]
    perform: bool  # carry the request out, then answer with the fault anyway


class _Reply(NamedTuple):
    status: int
    body: Any = None
    headers: dict[str, str] = {}  # noqa: RUF012  (NamedTuple default, never mutated)


ROUTES: tuple[tuple[str, str, str], ...] = (  # method, template, handler
    ("GET", "/user", "_get_user"),
    ("GET", "/repos/{owner}/{repo}", "_get_repo"),
    ("GET", "/repos/{owner}/{repo}/pulls/{number}", "_get_pull"),
    ("GET", "/repos/{owner}/{repo}/issues/{number}", "_get_issue"),
    ("GET", "/repos/{owner}/{repo}/issues/{number}/comments", "_list_comments"),
    ("POST", "/repos/{owner}/{repo}/issues/{number}/comments", "_create_comment"),
    ("GET", "/repos/{owner}/{repo}/issues/comments/{id}", "_get_comment"),
    ("PATCH", "/repos/{owner}/{repo}/issues/comments/{id}", "_edit_comment"),
    ("DELETE", "/repos/{owner}/{repo}/issues/comments/{id}", "_delete_comment"),
    ("GET", "/repos/{owner}/{repo}/commits/{sha}", "_get_commit"),
    ("POST", "/repos/{owner}/{repo}/statuses/{sha}", "_create_status"),
    ("GET", "/repos/{owner}/{repo}/commits/{sha}/statuses", "_list_statuses"),
)


def _template_regex(template: str) -> re.Pattern[str]:
    pattern = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template)
    # every /repos/{owner}/{repo} route is also served as /repositories/{repo_id}
    pattern = pattern.replace(
        "/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)",
        "(?:/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)|/repositories/(?P<repo_id>\\d+))",
    )
    return re.compile(pattern + "$")


_COMPILED = tuple((m, t, _template_regex(t), h) for m, t, h in ROUTES)


def _route(method: str, path: str) -> tuple[str, str, re.Match[str]] | None:
    """The (template, handler name, match) serving ``method path``, if any."""
    for route_method, template, regex, handler_name in _COMPILED:
        match = regex.match(path)
        if match and route_method == method:
            return template, handler_name, match
    return None


class FakeGitHub:
    """In-memory GitHub: repositories, pull requests, issue comments and commit statuses."""

    def __init__(
        self,
        *,
        prefix: str = "",
        login: str = ACTIONS_BOT,
        app_token: bool = True,
        token: str | None = None,
        read_only: bool = False,
    ) -> None:
        """``app_token``: like ``GITHUB_TOKEN``, ``GET /user`` is a 403 and the author is ``login``."""
        self.prefix = prefix.rstrip("/")
        self.login, self.app_token, self.token, self.read_only = login, app_token, token, read_only
        self.repos: dict[str, dict[str, Any]] = {}
        self.pulls: dict[tuple[str, int], dict[str, Any]] = {}
        self.comments: dict[int, dict[str, Any]] = {}  # id -> comment JSON (+ "_issue": (repo, n))
        self.statuses: dict[
            tuple[str, str], list[dict[str, Any]]
        ] = {}  # (repo, sha) -> oldest first
        self.log: list[Logged] = []
        self._faults: dict[tuple[str, str], deque[Fault]] = {}
        self._next_id = 1000
        self._clock = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                reply = fake._dispatch(self.command, self.path, headers, raw)
                payload = b"" if reply.body is None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                if reply.body is not None:
                    self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """What to pass as PyGithub's ``base_url`` (ha-bot's ``api_url`` / ``GITHUB_API_URL``)."""
        assert self._server is not None, "start() the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.prefix}"

    # --- state set-up -------------------------------------------------------------------------

    def add_repo(self, full_name: str) -> dict[str, Any]:
        if full_name not in self.repos:
            owner, name = full_name.split("/")
            repo_id = 100 + len(self.repos)
            self.repos[full_name] = {
                "id": repo_id,
                "node_id": f"R_{repo_id}",
                "name": name,
                "full_name": full_name,
                "owner": {"login": owner, "id": repo_id, "type": "User"},
                "private": False,
                "fork": False,
                "default_branch": "main",
                "url": f"{self.base_url}/repos/{full_name}",
                "html_url": f"https://github.com/{full_name}",
            }
        return self.repos[full_name]

    def add_pull(self, pull_request: dict[str, Any], repo: str | None = None) -> int:
        """Store a pull request JSON (e.g. a webhook payload's ``pull_request``); its number."""
        text = json.dumps(pull_request).replace("https://api.github.com", self.base_url)
        pull: dict[str, Any] = json.loads(text)
        full_name = repo or pull["base"]["repo"]["full_name"]
        self.add_repo(full_name)
        self.pulls[(full_name, int(pull["number"]))] = pull
        return int(pull["number"])

    def add_pull_from_event(self, event: dict[str, Any]) -> int:
        return self.add_pull(event["pull_request"], event["repository"]["full_name"])

    def add_comment(
        self, repo: str, number: int, body: str, login: str | None = None
    ) -> dict[str, Any]:
        """A comment as if posted by ``login`` (default: the token's own identity)."""
        with self._lock:
            return self._new_comment(repo, number, body, login or self.login)

    def fail(
        self,
        method: str,
        route: str,
        status: int,
        *,
        message: str | None = None,
        headers: dict[str, str] | None = None,
        times: int = 1,
        body: Any = None,
        perform: bool = False,
    ) -> None:
        """Answer the next ``times`` requests to ``method route`` (``"*"`` matches any) with ``status``.

        Faults queue in order: ``fail(..., 502, times=2)`` then ``fail(..., 403, ...)`` answers
        502, 502, 403, then the real thing. 5xx answers have an empty body. ``perform=True``
        carries the request out first (a write that landed behind a proxy's 502).
        """
        if body is None:
            if status >= 500:
                body = None
            else:
                body = {
                    "message": message or DEFAULT_MESSAGES.get(status, "Error"),
                    "documentation_url": DOCS,
                }
                if status == 422 and message is None:
                    body["errors"] = [{"resource": "Issue", "code": "custom", "message": "invalid"}]
        queue = self._faults.setdefault((method.upper(), route), deque())
        queue.extend([Fault(status, body, dict(headers or {}), perform)] * times)

    # --- assertions ---------------------------------------------------------------------------

    def requests(self, method: str | None = None, route: str | None = None) -> list[Logged]:
        return [r for r in self.log if method in (None, r.method) and route in (None, r.route)]

    def comments_on(self, repo: str, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.values() if c["_issue"] == (repo, number)]

    # --- the server side ----------------------------------------------------------------------

    def _now(self) -> str:
        self._clock += 1
        return (EPOCH + timedelta(seconds=self._clock)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _new_comment(self, repo: str, number: int, body: str, login: str) -> dict[str, Any]:
        self._next_id += 1
        cid, now = self._next_id, self._now()
        comment = {
            "id": cid,
            "node_id": f"IC_{cid}",
            "url": f"{self.base_url}/repos/{repo}/issues/comments/{cid}",
            "html_url": f"https://github.com/{repo}/pull/{number}#issuecomment-{cid}",
            "issue_url": f"{self.base_url}/repos/{repo}/issues/{number}",
            "body": body,
            "user": {
                "login": login,
                "id": 41898282,
                "type": "Bot" if login.endswith("[bot]") else "User",
            },
            "author_association": "NONE",
            "created_at": now,
            "updated_at": now,
            "_issue": (repo, number),
        }
        self.comments[cid] = comment
        return comment

    def _dispatch(self, method: str, raw_path: str, headers: dict[str, str], raw: bytes) -> _Reply:
        split = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return _Reply(400, {"message": "Problems parsing JSON"})
        path = split.path
        if self.prefix:
            if not path.startswith(self.prefix + "/"):
                self.log.append(Logged(method, path, "", query, headers, body))
                return _Reply(404, {"message": "Not Found", "documentation_url": DOCS})
            path = path[len(self.prefix) :]
        found = _route(method, path)
        if found is None:
            self.log.append(Logged(method, path, "", query, headers, body))
            return _Reply(404, {"message": "Not Found", "documentation_url": DOCS})
        template, handler_name, match = found
        self.log.append(Logged(method, path, template, query, headers, body))
        with self._lock:
            fault = self._next_fault(method, template)
            if fault is None:
                return self._serve(method, handler_name, match, headers, query, body)
            if fault.perform:
                self._serve(method, handler_name, match, headers, query, body)
            return _Reply(fault.status, fault.body, fault.headers)

    def _next_fault(self, method: str, template: str) -> Fault | None:
        for key in ((method, template), (method, "*"), ("*", template), ("*", "*")):
            queue = self._faults.get(key)
            if queue:
                return queue.popleft()
        return None

    def _serve(
        self,
        method: str,
        handler_name: str,
        match: re.Match[str],
        headers: dict[str, str],
        query: dict[str, str],
        body: Any,
    ) -> _Reply:
        auth = headers.get("authorization", "")
        if self.token is not None and auth.split(" ", 1)[-1] != self.token:
            return _Reply(401, {"message": "Bad credentials", "documentation_url": DOCS})
        params = {k: v for k, v in match.groupdict().items() if v is not None}
        full = None
        if "repo_id" in params:
            full = next((n for n, r in self.repos.items() if str(r["id"]) == params["repo_id"]), "")
        elif "owner" in params:
            full = f"{params['owner']}/{params['repo']}"
        if full is not None and full not in self.repos:
            return _Reply(404, {"message": "Not Found", "documentation_url": DOCS})
        if self.read_only and method != "GET":
            return _Reply(403, {"message": NOT_ACCESSIBLE, "documentation_url": DOCS})
        reply: _Reply = getattr(self, handler_name)(full, params, query, body)
        return reply

    def _page(self, items: list[dict[str, Any]], path: str, query: dict[str, str]) -> _Reply:
        per_page = min(int(query.get("per_page", 30)), 100)
        page = max(int(query.get("page", 1)), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []

        def url(n: int) -> str:
            return f"{self.base_url}{path}?{urlencode({**query, 'per_page': per_page, 'page': n})}"

        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
        headers = {"Link": ", ".join(links)} if links else {}
        return _Reply(200, [_public(c) for c in chunk], headers)

    def _get_user(self, full: str | None, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        if self.app_token:
            return _Reply(403, {"message": NOT_ACCESSIBLE, "documentation_url": DOCS})
        return _Reply(
            200, {"login": self.login, "id": 1, "type": "User", "url": f"{self.base_url}/user"}
        )

    def _get_repo(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        return _Reply(200, self.repos[full])

    def _find_pull(self, full: str, p: dict[str, str]) -> dict[str, Any] | None:
        return self.pulls.get((full, int(p["number"])))

    def _get_pull(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        pull = self._find_pull(full, p)
        return (
            _Reply(200, pull)
            if pull
            else _Reply(404, {"message": "Not Found", "documentation_url": DOCS})
        )

    def _get_issue(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        pull = self._find_pull(full, p)
        if pull is None:
            return _Reply(404, {"message": "Not Found", "documentation_url": DOCS})
        number = pull["number"]
        return _Reply(
            200,
            {
                "id": pull["id"],
                "number": number,
                "title": pull.get("title", ""),
                "state": pull.get("state", "open"),
                "user": pull.get("user"),
                "url": f"{self.base_url}/repos/{full}/issues/{number}",
                "comments_url": f"{self.base_url}/repos/{full}/issues/{number}/comments",
                "html_url": pull.get("html_url"),
                "comments": len(self.comments_on(full, number)),
                "pull_request": {"url": f"{self.base_url}/repos/{full}/pulls/{number}"},
            },
        )

    def _list_comments(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        if self._find_pull(full, p) is None:
            return _Reply(404, {"message": "Not Found", "documentation_url": DOCS})
        items = sorted(self.comments_on(full, int(p["number"])), key=lambda c: c["id"])
        repo_id = self.repos[full]["id"]
        return self._page(items, f"/repositories/{repo_id}/issues/{p['number']}/comments", q)

    def _create_comment(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        if self._find_pull(full, p) is None:
            return _Reply(404, {"message": "Not Found", "documentation_url": DOCS})
        invalid = _invalid_body(b)
        if invalid:
            return invalid
        comment = self._new_comment(full, int(p["number"]), b["body"], self.login)
        return _Reply(201, _public(comment), {"Location": comment["url"]})

    def _find_comment(self, full: str, p: dict[str, str]) -> dict[str, Any] | None:
        comment = self.comments.get(int(p["id"]))
        return comment if comment and comment["_issue"][0] == full else None

    def _get_comment(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        comment = self._find_comment(full, p)
        return (
            _Reply(200, _public(comment))
            if comment
            else _Reply(404, {"message": "Not Found", "documentation_url": DOCS})
        )

    def _edit_comment(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        comment = self._find_comment(full, p)
        if comment is None:
            return _Reply(404, {"message": "Not Found", "documentation_url": DOCS})
        if comment["user"]["login"] != self.login:
            return _Reply(403, {"message": NOT_ACCESSIBLE, "documentation_url": DOCS})
        invalid = _invalid_body(b)
        if invalid:
            return invalid
        comment["body"], comment["updated_at"] = b["body"], self._now()
        return _Reply(200, _public(comment))

    def _delete_comment(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        comment = self._find_comment(full, p)
        if comment is None:
            return _Reply(404, {"message": "Not Found", "documentation_url": DOCS})
        del self.comments[comment["id"]]
        return _Reply(204)

    def _get_commit(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        sha = p["sha"]
        if not SHA_RE.fullmatch(sha):
            return _Reply(
                422, {"message": f"No commit found for SHA: {sha}", "documentation_url": DOCS}
            )
        return _Reply(200, {"sha": sha, "url": f"{self.base_url}/repos/{full}/commits/{sha}"})

    def _create_status(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        sha, b = p["sha"], b or {}
        if not SHA_RE.fullmatch(sha):
            return _Reply(
                422, {"message": f"No commit found for SHA: {sha}", "documentation_url": DOCS}
            )
        errors = []
        if b.get("state") not in STATUS_STATES:
            errors.append(
                {
                    "resource": "Status",
                    "code": "custom",
                    "field": "state",
                    "message": f"state is not included in the list ({b.get('state')!r})",
                }
            )
        if len(b.get("description") or "") > 140:
            errors.append(
                {
                    "resource": "Status",
                    "code": "custom",
                    "field": "description",
                    "message": "description is too long (maximum is 140 characters)",
                }
            )
        if errors:
            return _Reply(
                422, {"message": "Validation Failed", "errors": errors, "documentation_url": DOCS}
            )
        self._next_id += 1
        now = self._now()
        status = {
            "id": self._next_id,
            "url": f"{self.base_url}/repos/{full}/statuses/{sha}",
            "state": b["state"],
            "description": b.get("description"),
            "target_url": b.get("target_url"),
            "context": b.get("context") or "default",
            "created_at": now,
            "updated_at": now,
            "creator": {"login": self.login, "id": 41898282, "type": "Bot"},
        }
        self.statuses.setdefault((full, sha), []).append(status)
        return _Reply(201, status)

    def _list_statuses(self, full: str, p: dict[str, str], q: dict[str, str], b: Any) -> _Reply:
        items = list(reversed(self.statuses.get((full, p["sha"]), [])))
        return self._page(
            items, f"/repositories/{self.repos[full]['id']}/commits/{p['sha']}/statuses", q
        )


def _public(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if not k.startswith("_")}


def _invalid_body(body: Any) -> _Reply | None:
    text = (body or {}).get("body")
    if not isinstance(text, str) or not text:
        message = "body wasn't supplied."
    elif len(text) > 65536:
        message = "body is too long (maximum is 65536 characters)"
    else:
        return None
    return _Reply(
        422,
        {
            "message": "Validation Failed",
            "errors": [
                {"resource": "IssueComment", "code": "custom", "field": "body", "message": message}
            ],
            "documentation_url": DOCS,
        },
    )


@pytest.fixture(name="fake_github")
def fake_github_fixture() -> Iterator[FakeGitHub]:
    """``fake_github``: a running FakeGitHub holding the pull request of ``pull_request.opened``.

    Use it with ``from tests.fakegithub import fake_github_fixture`` (the import registers it).
    """
    with FakeGitHub() as fake:
        fake.add_pull_from_event(load_event("pull_request.opened"))
        yield fake
