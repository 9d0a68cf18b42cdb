"""The one module that talks to GitHub: the sticky pull-request comment, the commit status, PR facts.

PyGithub is imported lazily, inside functions, so the pure core and the CLI start fast.

Retries are ours, not PyGithub's (``retry=None``): 5xx answers, dropped connections and secondary
rate limits are retried with exponential backoff (``backoff_s * 2**n``, or the ``Retry-After``
header) through an injectable ``sleep``. 401, 403 (permission), 404 and 422 are never retried: they
raise a :class:`GitHubError` subclass that says what to change. The unit retried for the comment is
the whole find-then-write, so a POST that GitHub answered 502 but did carry out is found, not
duplicated, on the next attempt.

The comment (:meth:`Client.upsert_comment`) is the bot's own comment carrying a hidden marker,
found by a paginated scan and edited in place. Under the marker sits a stamp,
``<!-- ha-bot:head=SHA run=RUN_ID attempt=N -->``: a run never overwrites a comment stamped by a
newer run (``skipped-stale``); the same text for the same head is left alone (``unchanged``, no
PATCH). Several marker comments of ours (left by a past bug or a race between two first runs):
the newest is kept and edited, the older ones, ours by author and marker, are deleted; their
URLs are returned in ``CommentResult.deleted`` and logged. Nobody else's comment is ever touched.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ha_bot import __version__
from ha_bot.errors import HaBotError

if TYPE_CHECKING:
    from github.IssueComment import IssueComment

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_BOT_LOGIN = "github-actions[bot]"  # the author of comments made with GITHUB_TOKEN
DEFAULT_MARKER = "<!-- ha-bot:report -->"
COMMENT_LIMIT = 65536  # characters in an issue or pull-request comment
COMMENT_BODY_LIMIT = COMMENT_LIMIT - 256  # what a body may use: the rest is for marker and stamp
SUMMARY_LIMIT = 1024 * 1024  # bytes in a job summary ($GITHUB_STEP_SUMMARY)
STATUS_DESCRIPTION_LIMIT = 140  # characters in a commit status description
STATUS_STATES = ("pending", "success", "failure", "error")
SECONDARY_RATE_WAIT_S = 60.0  # GitHub: "wait at least one minute" when no retry-after is given
MAX_RATE_WAIT_S = 300.0  # a longer rate-limit wait fails the call instead of stalling the job
TRUNCATED = "\n\n*… cut to fit GitHub's comment limit: the job summary and the report artifact have it all.*\n"

_STAMP_RE = re.compile(
    r"<!-- ha-bot:head=(?P<sha>[0-9a-f]{7,40})(?: run=(?P<run>\d+))?(?: attempt=(?P<attempt>\d+))? -->\n?"
)
_SHA_RE = re.compile(r"[0-9a-f]{7,40}")


class GitHubError(HaBotError):
    """A GitHub API call failed; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TokenRejected(GitHubError):
    """401: the token is missing, expired, revoked, or for another GitHub host."""


class PermissionDenied(GitHubError):
    """403: the token lacks a permission (fork pull requests get a read-only token)."""


class NotFound(GitHubError):
    """404: the repository or pull request does not exist, or the token cannot see it."""


class ValidationFailed(GitHubError):
    """422: GitHub refused the request's content."""


class RateLimited(GitHubError):
    """403/429 rate limit that retries could not wait out."""


class CommentResult(NamedTuple):
    action: str  # "created" | "updated" | "unchanged" | "skipped-stale" | "skipped" (create=False)
    url: str  # html_url of the comment ("" when skipped)
    deleted: tuple[str, ...] = ()  # html_urls of our own duplicate marker comments removed


class PRInfo(NamedTuple):
    base_sha: str  # the base branch tip GitHub recorded, not the merge-base (git computes that)
    head_sha: str
    base_ref: str
    head_ref: str
    is_fork: bool  # head lives in another repository (or a deleted one): read-only token


class Stamp(NamedTuple):
    """Which run wrote a comment; runs compare by ``(run_id, attempt)``."""

    head_sha: str
    run_id: int | None = None
    attempt: int = 1

    def render(self) -> str:
        if self.run_id is None:
            return f"<!-- ha-bot:head={self.head_sha} -->"
        return f"<!-- ha-bot:head={self.head_sha} run={self.run_id} attempt={self.attempt} -->"

    def newer_than(self, other: Stamp) -> bool:
        if self.run_id is None or other.run_id is None:
            return False
        return (self.run_id, self.attempt) > (other.run_id, other.attempt)


def parse_stamp(body: str) -> Stamp | None:
    """The first stamp in a comment body (ours sit right under the marker), if any."""
    m = _STAMP_RE.search(body)
    if m is None:
        return None
    run = int(m["run"]) if m["run"] else None
    return Stamp(m["sha"], run, int(m["attempt"] or 1))


def fit(text: str, limit: int, note: str = TRUNCATED) -> str:
    """``text`` cut at a line break so that it, plus ``note``, is at most ``limit`` characters."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - len(note), 0)]
    if "\n" in cut:
        cut = cut[: cut.rindex("\n")]
    return (cut + note)[:limit]


def compose(body: str, *, marker: str, stamp: Stamp) -> str:
    """The full comment text: marker, stamp, blank line, then ``body`` (cut to the limit)."""
    header = f"{marker}\n{stamp.render()}\n\n"
    return header + fit(body, COMMENT_LIMIT - len(header))


def shorten(text: str, limit: int = STATUS_DESCRIPTION_LIMIT) -> str:
    """One line of at most ``limit`` characters, ending in an ellipsis when cut."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _normalise(body: str) -> str:
    return _STAMP_RE.sub("", body.replace("\r\n", "\n"), count=1)


def _message(data: Any) -> tuple[str, str]:
    """GitHub's ``message`` and its ``errors`` details, from an error response body."""
    if not isinstance(data, dict):
        return (str(data).strip()[:200] if data else ""), ""
    details = []
    for error in data.get("errors") or []:
        if isinstance(error, dict):
            details.append(error.get("message") or f"{error.get('field')} {error.get('code')}")
        else:
            details.append(str(error))
    return str(data.get("message") or ""), "; ".join(details)


def _redactor(token: str) -> Callable[[str], str]:
    def redact(text: str) -> str:
        return text.replace(token, "***") if token else text

    return redact


class Client:
    """A repository on GitHub (or GitHub Enterprise Server), as ha-bot uses it."""

    def __init__(
        self,
        token: str,
        *,
        api_url: str = DEFAULT_API_URL,
        repo: str,
        retries: int = 4,
        backoff_s: float = 1.0,
        sleep: Callable[[float], None] | None = None,  # None: time.sleep, looked up now
        bot_login: str = DEFAULT_BOT_LOGIN,
        per_page: int = 100,
        timeout_s: int = 30,
    ) -> None:
        import github
        from github import Auth

        if not token:
            raise TokenRejected(
                "no GitHub token: pass the action's `github-token` input "
                "(default `${{ github.token }}`) or set GITHUB_TOKEN"
            )
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
            raise GitHubError(f"repository {repo!r} is not of the form owner/name")
        if not api_url.startswith(("https://", "http://")):
            raise GitHubError(f"GitHub API URL {api_url!r} is not an http(s) URL")
        self.repo = repo
        self.api_url = api_url.rstrip("/")
        self.retries, self.backoff_s, self.bot_login = retries, backoff_s, bot_login
        self._sleep = sleep or time.sleep
        self._redact = _redactor(token)
        self._own_login: str | None = None
        # lazy=True: no GET until an attribute is needed; retry=None: ours (see module docs);
        # no PyGithub throttling (it sleeps 0.25 s per request, 1 s per write, uninjectably).
        self._gh = github.Github(
            auth=Auth.Token(token),
            base_url=self.api_url,
            retry=None,
            lazy=True,
            per_page=per_page,
            timeout=timeout_s,
            user_agent=f"ha-bot/{__version__}",
            seconds_between_requests=None,
            seconds_between_writes=None,
        )
        self._repo = self._gh.get_repo(repo)

    def __repr__(self) -> str:
        return f"Client(repo={self.repo!r}, api_url={self.api_url!r})"

    # --- the three things ha-bot does --------------------------------------------------------

    def pr_info(self, pr_number: int) -> PRInfo:
        def read() -> PRInfo:
            pr = self._repo.get_pull(pr_number)
            head_repo, base_repo = pr.head.repo, pr.base.repo
            is_fork = (
                head_repo is None or head_repo.full_name.lower() != base_repo.full_name.lower()
            )
            return PRInfo(pr.base.sha, pr.head.sha, pr.base.ref, pr.head.ref, is_fork)

        what = f"reading pull request #{pr_number} of {self.repo}"
        return self._call(what, "pull-requests: read", read)

    def set_status(
        self,
        sha: str,
        state: str,
        description: str,
        *,
        context: str = "ha-bot",
        target_url: str | None = None,
    ) -> None:
        if state not in STATUS_STATES:
            raise ValueError(f"status state {state!r} is not one of {STATUS_STATES}")
        extra = {"target_url": target_url} if target_url else {}

        def post() -> None:
            commit = self._repo.get_commit(sha)
            commit.create_status(
                state=state, description=shorten(description), context=context, **extra
            )

        what = f"setting the {context!r} commit status on {sha[:12]} in {self.repo}"
        self._call(what, "statuses: write", post)

    def upsert_comment(
        self,
        pr_number: int,
        body: str,
        *,
        marker: str = DEFAULT_MARKER,
        head_sha: str,
        run_id: int | None = None,
        attempt: int = 1,
        create: bool = True,
    ) -> CommentResult:
        """Create, or edit in place, the one comment of ours on the PR that carries ``marker``.

        ``create=False`` only edits: with no comment yet, nothing is posted (``"skipped"``, no URL).
        """
        if not (marker.startswith("<!--") and marker.endswith("-->")):
            raise ValueError(f"marker {marker!r} must be a hidden HTML comment")
        if not _SHA_RE.fullmatch(head_sha.lower()):
            raise ValueError(f"head_sha {head_sha!r} is not a hexadecimal commit SHA")
        me = self.own_login().lower()
        stamp = Stamp(head_sha.lower(), run_id, attempt)
        text = compose(body, marker=marker, stamp=stamp)
        what = f"writing the ha-bot comment on pull request #{pr_number} of {self.repo}"
        return self._call(
            what,
            "pull-requests: write",
            lambda: self._upsert_once(pr_number, text, marker, stamp, me, create),
        )

    def own_login(self) -> str:
        """The login our comments carry: from ``GET /user``, else ``bot_login``.

        ``GITHUB_TOKEN`` and GitHub App installation tokens cannot read ``/user`` (403), so
        they fall back to ``bot_login`` (``github-actions[bot]``, or ``<app-slug>[bot]``).
        """
        if self._own_login is None:
            try:
                login = self._call("reading the token's own login", "none", self._read_login)
            except (PermissionDenied, NotFound):
                login = self.bot_login
            self._own_login = login
        return self._own_login

    # --- internals ---------------------------------------------------------------------------

    def _read_login(self) -> str:
        return str(self._gh.get_user().login)

    def _upsert_once(
        self, pr_number: int, text: str, marker: str, stamp: Stamp, me: str, create: bool
    ) -> CommentResult:
        issue = self._repo.get_issue(pr_number)
        mine = [
            c
            for c in issue.get_comments()
            if c.user is not None and c.user.login.lower() == me and marker in (c.body or "")
        ]
        if not mine and not create:
            return CommentResult("skipped", "")
        if not mine:
            created = issue.create_comment(text)
            log.info("created the ha-bot comment %s", created.html_url)
            return CommentResult("created", created.html_url)
        mine.sort(key=lambda c: (c.created_at, c.id))
        newest = mine[-1]
        existing = parse_stamp(newest.body or "")
        if existing is not None and existing.newer_than(stamp):
            log.info("left %s alone: run %s is newer than ours", newest.html_url, existing.run_id)
            return CommentResult("skipped-stale", newest.html_url)
        deleted = tuple(self._delete(c) for c in mine[:-1])
        unchanged = (
            existing is not None
            and existing.head_sha == stamp.head_sha
            and _normalise(newest.body or "") == _normalise(text)
        )
        if unchanged:
            return CommentResult("unchanged", newest.html_url, deleted)
        newest.edit(text)
        return CommentResult("updated", newest.html_url, deleted)

    def _delete(self, comment: IssueComment) -> str:
        from github.GithubException import GithubException

        url = str(comment.html_url)
        try:
            comment.delete()
        except GithubException as exc:
            if exc.status != 404:  # 404: a concurrent run removed it already
                raise
        log.warning("deleted a duplicate ha-bot comment %s (the newest one is kept)", url)
        return url

    def _call(self, what: str, permission: str, fn: Callable[[], T]) -> T:
        """``fn()``, retrying what is worth retrying, translating what is not."""
        import requests
        from github.GithubException import GithubException

        attempt = 0
        while True:
            try:
                return fn()
            except GithubException as exc:
                headers = {str(k).lower(): str(v) for k, v in (exc.headers or {}).items()}
                message, details = _message(exc.data)
                delay = self._retry_delay(exc.status, headers, message, attempt)
                if delay is None or attempt >= self.retries or delay > MAX_RATE_WAIT_S:
                    error = self._error(
                        what, permission, exc.status, headers, message, details, attempt
                    )
                    raise error from None
                reason = f"{exc.status} {message}".strip()
            except (requests.ConnectionError, requests.Timeout) as exc:
                if attempt >= self.retries:
                    raise GitHubError(
                        self._redact(
                            f"{what} failed: could not reach GitHub at {self.api_url} "
                            f"after {attempt + 1} attempts ({type(exc).__name__})"
                        )
                    ) from None
                delay, reason = self.backoff_s * 2**attempt, type(exc).__name__
            attempt += 1
            log.warning(
                "%s: GitHub answered %s; retry %d/%d in %gs",
                what,
                self._redact(reason),
                attempt,
                self.retries,
                delay,
            )
            self._sleep(delay)

    def _retry_delay(
        self, status: int, headers: dict[str, str], message: str, attempt: int
    ) -> float | None:
        """Seconds to wait before retry number ``attempt + 1``, or None when retrying cannot help."""
        backoff = self.backoff_s * 2**attempt
        if status >= 500:
            return backoff
        if status not in (403, 429):
            return None
        lower = message.lower()
        if "retry-after" in headers:
            try:
                return max(float(headers["retry-after"]), 0.0)
            except ValueError:
                return max(SECONDARY_RATE_WAIT_S, backoff)
        if "secondary rate limit" in lower or status == 429:
            return max(SECONDARY_RATE_WAIT_S, backoff)
        if (
            lower.startswith("api rate limit exceeded")
            or headers.get("x-ratelimit-remaining") == "0"
        ):
            reset = headers.get("x-ratelimit-reset", "")
            return max(float(reset) - time.time(), 0.0) + 1.0 if reset.isdigit() else None
        return None

    def _error(
        self,
        what: str,
        permission: str,
        status: int,
        headers: dict[str, str],
        message: str,
        details: str,
        attempt: int,
    ) -> GitHubError:
        said = f"{status} {message}".strip() + (f": {details}" if details else "")
        lower = message.lower()
        cls: type[GitHubError] = GitHubError
        text = f"{what} failed: GitHub answered {said}"
        if status == 401:
            cls = TokenRejected
            text = (
                f"GitHub rejected the token ({said}) while {what}: it is missing, expired or "
                f"revoked, or it belongs to another GitHub host than {self.api_url}"
            )
        elif status == 429 or (
            status == 403 and ("rate limit" in lower or "retry-after" in headers)
        ):
            cls = RateLimited
            text = (
                f"{what} failed: GitHub's rate limit ({said}) outlasted {attempt + 1} attempt(s); "
                "try again later, or spread out the workflows that share this token"
            )
        elif status == 403:
            cls = PermissionDenied
            text = (
                f"{what} was refused ({said}): the token needs `{permission}` (set it in the "
                "workflow's `permissions:`). Pull requests from forks get a read-only token "
                "whatever the workflow asks for: use the `pull_request` + `workflow_run` "
                "two-workflow pattern, or rely on the job summary for forks"
            )
        elif status == 404:
            cls = NotFound
            text = (
                f"{what} failed ({said}): no such repository or pull request at {self.api_url}, "
                "or the token cannot see it (a private repository needs `contents: read` and "
                f"`{permission}`; on GitHub Enterprise Server check GITHUB_API_URL)"
            )
        elif status == 422:
            cls = ValidationFailed
            text = f"GitHub refused {what} ({said})"
        elif status >= 500:
            text += f" on all {attempt + 1} attempts; it may be having an outage"
        return cls(self._redact(text), status=status)
