"""ha_bot.github: the real PyGithub client against a real (fake) GitHub HTTP server."""

from __future__ import annotations

import logging
import traceback
from typing import Any

import pytest

from ha_bot.errors import HaBotError
from ha_bot.github import (
    COMMENT_BODY_LIMIT,
    COMMENT_LIMIT,
    STATUS_DESCRIPTION_LIMIT,
    Client,
    CommentResult,
    GitHubError,
    NotFound,
    PermissionDenied,
    PRInfo,
    RateLimited,
    Stamp,
    TokenRejected,
    ValidationFailed,
    compose,
    fit,
    parse_stamp,
    shorten,
)
from tests.fakegithub import (
    ACTIONS_BOT,
    NOT_ACCESSIBLE,
    SECONDARY_RATE_LIMIT,
    FakeGitHub,
    fake_github_fixture,  # noqa: F401  (registers the fake_github fixture)
    load_event,
)

OPENED = load_event("pull_request.opened")
SYNCHRONIZE = load_event("pull_request.synchronize")
RUN = load_event("workflow_run.completed")["workflow_run"]
REPO = OPENED["repository"]["full_name"]
PR = OPENED["number"]
HEAD = OPENED["pull_request"]["head"]["sha"]
BASE = OPENED["pull_request"]["base"]["sha"]
RUN_ID = RUN["id"]
MARKER = "<!-- ha-bot:report -->"
TOKEN = "ghs_s3cr3tT0kenValue0123456789abcdefXYZ"
COMMENTS = "/repos/{owner}/{repo}/issues/{number}/comments"
STATUSES = "/repos/{owner}/{repo}/statuses/{sha}"
PULL = "/repos/{owner}/{repo}/pulls/{number}"


@pytest.fixture
def sleeps() -> list[float]:
    return []


def make_client(fake: FakeGitHub, sleeps: list[float], **kwargs: Any) -> Client:
    return Client(TOKEN, api_url=fake.base_url, repo=REPO, sleep=sleeps.append, **kwargs)


@pytest.fixture
def client(fake_github: FakeGitHub, sleeps: list[float]) -> Client:
    return make_client(fake_github, sleeps)


def upsert(
    client: Client, body: str, run: int = RUN_ID, attempt: int = 1, head: str = HEAD
) -> CommentResult:
    return client.upsert_comment(
        PR, body, marker=MARKER, head_sha=head, run_id=run, attempt=attempt
    )


def ours(fake: FakeGitHub) -> list[dict[str, Any]]:
    return [
        c
        for c in fake.comments_on(REPO, PR)
        if MARKER in c["body"] and c["user"]["login"] == ACTIONS_BOT
    ]


# --- pull request facts ------------------------------------------------------------------------


def test_pr_info_from_the_real_payload(client: Client) -> None:
    pr = OPENED["pull_request"]
    assert client.pr_info(PR) == PRInfo(BASE, HEAD, pr["base"]["ref"], pr["head"]["ref"], False)


@pytest.mark.parametrize("head_repo", [{"full_name": "forker/Hello-World"}, None])
def test_pr_info_says_fork(sleeps: list[float], head_repo: dict[str, Any] | None) -> None:
    event = load_event("pull_request.synchronize")
    if head_repo is None:
        event["pull_request"]["head"]["repo"] = None  # a deleted fork
    else:
        event["pull_request"]["head"]["repo"].update(head_repo)
    with FakeGitHub() as fake:
        fake.add_pull_from_event(event)
        assert make_client(fake, sleeps).pr_info(SYNCHRONIZE["number"]).is_fork


# --- the sticky comment ------------------------------------------------------------------------


def test_create_then_update_in_place_one_comment_after_three_runs(
    client: Client,
    fake_github: FakeGitHub,
) -> None:
    results = [upsert(client, f"report {n}", run=RUN_ID + n) for n in range(3)]
    assert [r.action for r in results] == ["created", "updated", "updated"]
    assert len({r.url for r in results}) == 1
    (comment,) = fake_github.comments_on(REPO, PR)
    assert comment["body"] == compose("report 2", marker=MARKER, stamp=Stamp(HEAD, RUN_ID + 2))
    assert comment["html_url"] == results[0].url
    assert len(fake_github.requests("POST", COMMENTS)) == 1
    assert len(fake_github.requests("PATCH")) == 2
    assert len(fake_github.requests("GET", "/user")) == 1  # the identity is looked up once


@pytest.mark.parametrize("per_page", [30, 100])
def test_marker_found_on_page_three_of_250_comments(
    fake_github: FakeGitHub,
    sleeps: list[float],
    per_page: int,
) -> None:
    position = 2 * per_page + 5  # on page 3
    for i in range(250):
        if i == position:
            fake_github.add_comment(REPO, PR, compose("old", marker=MARKER, stamp=Stamp(HEAD, 1)))
        else:
            fake_github.add_comment(REPO, PR, f"comment {i}", login=f"user{i % 7}")
    result = upsert(make_client(fake_github, sleeps, per_page=per_page), "new")
    assert result.action == "updated"
    assert not fake_github.requests("POST")
    pages = fake_github.requests("GET", COMMENTS)
    assert len(pages) == -(-250 // per_page)  # the whole list is read, to find duplicates
    assert pages[1].path.startswith("/repositories/")  # the Link header's form was followed
    assert [c["body"].endswith("new") for c in ours(fake_github)] == [True]


def test_ignores_a_users_comment_quoting_the_marker(
    client: Client,
    fake_github: FakeGitHub,
) -> None:
    quote = f"> {MARKER}\n> why does ha-bot say this?"
    users = fake_github.add_comment(REPO, PR, quote, login="Codertocat")
    fake_github.add_comment(REPO, PR, "no marker here", login=ACTIONS_BOT)
    assert upsert(client, "report").action == "created"
    assert fake_github.comments[users["id"]]["body"] == quote
    assert len(fake_github.comments_on(REPO, PR)) == 3
    assert not fake_github.requests("PATCH")


def test_same_body_same_head_is_unchanged_and_not_patched(
    client: Client,
    fake_github: FakeGitHub,
) -> None:
    first = upsert(client, "same", run=RUN_ID)
    again = upsert(client, "same", run=RUN_ID + 1, attempt=1)
    assert (first.action, again.action) == ("created", "unchanged")
    assert again.url == first.url
    assert not fake_github.requests("PATCH")


def test_same_body_new_head_is_updated(client: Client, fake_github: FakeGitHub) -> None:
    upsert(client, "same", run=RUN_ID)
    assert upsert(client, "same", run=RUN_ID + 1, head="f" * 40).action == "updated"
    assert parse_stamp(ours(fake_github)[0]["body"]) == Stamp("f" * 40, RUN_ID + 1, 1)


def test_a_comment_edited_in_the_web_ui_with_crlf_is_still_unchanged(
    client: Client,
    fake_github: FakeGitHub,
) -> None:
    text = compose("a\nb", marker=MARKER, stamp=Stamp(HEAD, RUN_ID))
    fake_github.add_comment(REPO, PR, text.replace("\n", "\r\n"))
    assert upsert(client, "a\nb", run=RUN_ID + 1).action == "unchanged"


@pytest.mark.parametrize(
    ("newer", "older"),
    [((RUN_ID + 5, 1), (RUN_ID, 1)), ((RUN_ID, 2), (RUN_ID, 1))],
    ids=["run-id", "attempt"],
)
def test_a_stale_run_does_not_overwrite_a_newer_one(
    client: Client,
    fake_github: FakeGitHub,
    newer: tuple[int, int],
    older: tuple[int, int],
) -> None:
    upsert(client, "from the newer run", *newer)
    result = upsert(client, "from the older run", *older)
    assert result.action == "skipped-stale"
    assert ours(fake_github)[0]["body"].endswith("from the newer run")
    assert not fake_github.requests("PATCH")


def test_without_run_ids_the_last_writer_wins(client: Client, fake_github: FakeGitHub) -> None:
    client.upsert_comment(PR, "one", marker=MARKER, head_sha=HEAD)
    assert client.upsert_comment(PR, "two", marker=MARKER, head_sha=HEAD).action == "updated"


def test_create_false_only_edits(client: Client, fake_github: FakeGitHub) -> None:
    skipped = client.upsert_comment(PR, "x", marker=MARKER, head_sha=HEAD, create=False)
    assert skipped == CommentResult("skipped", "")
    assert not fake_github.requests("POST")
    upsert(client, "first", run=1)
    edited = client.upsert_comment(PR, "y", marker=MARKER, head_sha=HEAD, run_id=2, create=False)
    assert edited.action == "updated"


def test_duplicates_the_newest_is_edited_the_older_of_ours_deleted(
    client: Client,
    fake_github: FakeGitHub,
) -> None:
    old = fake_github.add_comment(REPO, PR, compose("dup 1", marker=MARKER, stamp=Stamp(HEAD, 1)))
    user = fake_github.add_comment(REPO, PR, f"{MARKER} mine", login="Codertocat")
    newest = fake_github.add_comment(
        REPO, PR, compose("dup 2", marker=MARKER, stamp=Stamp(HEAD, 2))
    )
    result = upsert(client, "report", run=3)
    assert result == CommentResult("updated", newest["html_url"], (old["html_url"],))
    assert sorted(fake_github.comments) == sorted([user["id"], newest["id"]])


def test_a_post_that_landed_behind_a_502_is_not_duplicated(
    client: Client,
    fake_github: FakeGitHub,
    sleeps: list[float],
) -> None:
    fake_github.fail("POST", COMMENTS, 502, perform=True)
    assert upsert(client, "report").action == "unchanged"
    assert len(fake_github.comments_on(REPO, PR)) == 1
    assert sleeps == [1.0]


def test_an_oversized_body_is_cut_to_the_comment_limit(
    client: Client,
    fake_github: FakeGitHub,
) -> None:
    body = "| row | 1 |\n" * 10_000  # 120,000 characters; the fake answers 422 above 65,536
    assert upsert(client, body).action == "created"
    (comment,) = fake_github.comments_on(REPO, PR)
    assert len(comment["body"]) <= COMMENT_LIMIT
    assert "job summary" in comment["body"]


def test_a_body_within_the_body_limit_is_never_cut() -> None:
    body = "x" * COMMENT_BODY_LIMIT
    stamp = Stamp("f" * 40, 2**63, 99)
    assert compose(body, marker=MARKER + " " * 80, stamp=stamp).endswith("\n\n" + body)


# --- the commit status -------------------------------------------------------------------------


def test_status_pending_then_success(client: Client, fake_github: FakeGitHub) -> None:
    client.set_status(HEAD, "pending", "analysing 3 models")
    client.set_status(HEAD, "success", "x" * 300, target_url="https://example.com/run/1")
    pending, success = fake_github.statuses[(REPO, HEAD)]
    assert (pending["state"], pending["context"], pending["target_url"]) == (
        "pending",
        "ha-bot",
        None,
    )
    assert success["state"] == "success"
    assert success["target_url"] == "https://example.com/run/1"
    assert len(success["description"]) == STATUS_DESCRIPTION_LIMIT
    assert success["description"].endswith("…")


def test_status_rejects_an_unknown_state(client: Client) -> None:
    with pytest.raises(ValueError, match="neutral"):
        client.set_status(HEAD, "neutral", "no such state")


# --- retries -----------------------------------------------------------------------------------


def test_retries_502_and_503_with_exponential_backoff(
    client: Client,
    fake_github: FakeGitHub,
    sleeps: list[float],
) -> None:
    fake_github.fail("GET", COMMENTS, 502)
    fake_github.fail("GET", COMMENTS, 503)
    fake_github.fail("POST", STATUSES, 500, times=2)
    assert upsert(client, "report").action == "created"
    client.set_status(HEAD, "success", "ok")
    assert sleeps == [1.0, 2.0, 1.0, 2.0]
    assert len(fake_github.statuses[(REPO, HEAD)]) == 1


def test_gives_up_after_the_retries(fake_github: FakeGitHub, sleeps: list[float]) -> None:
    fake_github.fail("GET", PULL, 502, times=10)
    client = make_client(fake_github, sleeps, retries=4, backoff_s=0.5)
    with pytest.raises(GitHubError, match="502") as caught:
        client.pr_info(PR)
    assert type(caught.value) is GitHubError
    assert caught.value.status == 502
    assert sleeps == [0.5, 1.0, 2.0, 4.0]
    assert len(fake_github.requests("GET", PULL)) == 5


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (403, {"Retry-After": "1"}, [1.0]),
        (429, {"retry-after": "3"}, [3.0]),
        (403, {}, [60.0]),  # no retry-after: GitHub says wait at least a minute
    ],
)
def test_secondary_rate_limit_waits_and_retries(
    client: Client,
    fake_github: FakeGitHub,
    sleeps: list[float],
    status: int,
    headers: dict[str, str],
    expected: list[float],
) -> None:
    fake_github.fail("POST", COMMENTS, status, message=SECONDARY_RATE_LIMIT, headers=headers)
    assert upsert(client, "report").action == "created"
    assert sleeps == expected


def test_an_unreachable_host_is_retried_then_reported(sleeps: list[float]) -> None:
    with FakeGitHub() as fake:
        dead = fake.base_url  # the port is closed once the server stops
    client = Client(TOKEN, api_url=dead, repo=REPO, sleep=sleeps.append, retries=2)
    with pytest.raises(GitHubError, match="could not reach GitHub") as caught:
        client.pr_info(PR)
    assert sleeps == [1.0, 2.0]
    assert TOKEN not in str(caught.value)


def test_a_rate_limit_longer_than_the_cap_fails_at_once(
    client: Client,
    fake_github: FakeGitHub,
    sleeps: list[float],
) -> None:
    fake_github.fail(
        "POST", STATUSES, 403, message=SECONDARY_RATE_LIMIT, headers={"Retry-After": "3600"}
    )
    with pytest.raises(RateLimited, match="rate limit"):
        client.set_status(HEAD, "success", "ok")
    assert sleeps == []


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "route", "status", "message", "call", "error", "phrases"),
    [
        (
            "GET",
            COMMENTS,
            401,
            None,
            "comment",
            TokenRejected,
            ["rejected the token", "Bad credentials"],
        ),
        (
            "POST",
            COMMENTS,
            403,
            None,
            "comment",
            PermissionDenied,
            ["pull-requests: write", "fork"],
        ),
        (
            "PATCH",
            "*",
            403,
            None,
            "update",
            PermissionDenied,
            ["pull-requests: write", NOT_ACCESSIBLE],
        ),
        (
            "POST",
            STATUSES,
            403,
            None,
            "status",
            PermissionDenied,
            ["statuses: write", "fork", "workflow_run"],
        ),
        ("GET", PULL, 404, None, "pr", NotFound, ["#2", "cannot see it"]),
        ("GET", COMMENTS, 404, None, "comment", NotFound, ["Hello-World"]),
        (
            "POST",
            STATUSES,
            422,
            "No commit found for SHA: x",
            "status",
            ValidationFailed,
            ["No commit found"],
        ),
    ],
)
def test_errors_are_not_retried_and_say_what_to_change(
    client: Client,
    fake_github: FakeGitHub,
    sleeps: list[float],
    method: str,
    route: str,
    status: int,
    message: str | None,
    call: str,
    error: type[GitHubError],
    phrases: list[str],
) -> None:
    if call == "update":
        upsert(client, "first")
    fake_github.fail(method, route, status, message=message)
    calls = {
        "comment": lambda: upsert(client, "report"),
        "update": lambda: upsert(client, "second", run=RUN_ID + 1),
        "status": lambda: client.set_status(HEAD, "failure", "budget exceeded"),
        "pr": lambda: client.pr_info(PR),
    }
    with pytest.raises(error) as caught:
        calls[call]()
    assert isinstance(caught.value, HaBotError)
    assert caught.value.status == status
    for phrase in phrases:
        assert phrase in str(caught.value)
    assert sleeps == []
    assert TOKEN not in str(caught.value)


def test_a_fork_token_is_read_only(sleeps: list[float]) -> None:
    with FakeGitHub(read_only=True) as fake:
        fake.add_pull_from_event(OPENED)
        client = make_client(fake, sleeps)
        assert client.pr_info(PR).head_sha == HEAD  # reading still works
        with pytest.raises(PermissionDenied, match="pull-requests: write"):
            upsert(client, "report")
        with pytest.raises(PermissionDenied, match="statuses: write"):
            client.set_status(HEAD, "success", "ok")


def test_a_wrong_token_is_rejected(sleeps: list[float]) -> None:
    with FakeGitHub(token="the-right-one") as fake:
        fake.add_pull_from_event(OPENED)
        with pytest.raises(TokenRejected, match="Bad credentials"):
            make_client(fake, sleeps).pr_info(PR)


def test_an_empty_token_is_rejected_before_any_request() -> None:
    with pytest.raises(TokenRejected, match="github-token"):
        Client("", repo=REPO)


# --- the token never shows ---------------------------------------------------------------------


def test_the_token_never_appears_in_errors_reprs_or_logs(
    fake_github: FakeGitHub,
    sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    client = make_client(fake_github, sleeps)
    fake_github.fail("GET", COMMENTS, 502)
    fake_github.fail("POST", COMMENTS, 403, message=f"proxy says: bad header token {TOKEN}")
    with pytest.raises(PermissionDenied) as caught:
        upsert(client, "report")
    texts = [
        str(caught.value),
        repr(caught.value),
        "".join(traceback.format_exception(caught.value)),
        repr(client),
        str(client),
        caplog.text,
    ]
    assert "***" in str(caught.value)  # what GitHub (here: a proxy) echoed is redacted
    for text in texts:
        assert TOKEN not in text


# --- hosts and identities ----------------------------------------------------------------------


def test_github_enterprise_server_base_url_with_api_v3_prefix(sleeps: list[float]) -> None:
    with FakeGitHub(prefix="/api/v3") as fake:
        fake.add_pull_from_event(OPENED)
        for i in range(150):
            fake.add_comment(REPO, PR, f"comment {i}", login="someone")
        assert fake.base_url.endswith("/api/v3")
        client = make_client(fake, sleeps)
        assert client.pr_info(PR).head_sha == HEAD
        assert [upsert(client, body, run=r).action for r, body in [(1, "a"), (2, "b")]] == [
            "created",
            "updated",
        ]
        client.set_status(HEAD, "success", "ok")
        assert all(r.route for r in fake.log)  # nothing went to an unprefixed path
        assert len(fake.requests("GET", COMMENTS)) == 4  # 2 pages, twice


def test_a_personal_token_finds_its_login_via_get_user(sleeps: list[float]) -> None:
    with FakeGitHub(app_token=False, login="octocat") as fake:
        fake.add_pull_from_event(OPENED)
        bots = fake.add_comment(REPO, PR, f"{MARKER}\nby the bot", login=ACTIONS_BOT)
        client = make_client(fake, sleeps)
        assert client.own_login() == "octocat"
        assert upsert(client, "report").action == "created"
        assert fake.comments[bots["id"]]["body"].endswith("by the bot")


def test_an_app_token_uses_the_configured_bot_login(sleeps: list[float]) -> None:
    with FakeGitHub(login="ha-bot-app[bot]") as fake:
        fake.add_pull_from_event(OPENED)
        client = make_client(fake, sleeps, bot_login="ha-bot-app[bot]")
        assert [upsert(client, b, run=r).action for r, b in [(1, "a"), (2, "b")]] == [
            "created",
            "updated",
        ]
        assert len(fake.comments_on(REPO, PR)) == 1


# --- pure helpers ------------------------------------------------------------------------------


def test_stamp_round_trip_and_ordering() -> None:
    stamp = Stamp(HEAD, RUN_ID, 2)
    assert parse_stamp(compose("body", marker=MARKER, stamp=stamp)) == stamp
    assert parse_stamp(compose("body", marker=MARKER, stamp=Stamp(HEAD))) == Stamp(HEAD, None, 1)
    assert parse_stamp("no stamp") is None
    assert Stamp(HEAD, 2, 1).newer_than(Stamp(HEAD, 1, 9))
    assert not Stamp(HEAD, None).newer_than(Stamp(HEAD, 1))


@pytest.mark.parametrize(
    ("limit", "text"), [(50, "short"), (30, "line one\nline two\nline three\n" * 3)]
)
def test_fit_and_shorten(limit: int, text: str) -> None:
    out = fit(text, limit, note="…cut")
    assert len(out) <= limit
    assert out == text or out.endswith("…cut")
    assert shorten("a  b\nc") == "a b c"
    assert len(shorten("y" * 500)) == STATUS_DESCRIPTION_LIMIT


def test_bad_arguments_are_programming_errors(client: Client) -> None:
    with pytest.raises(ValueError, match="hidden HTML comment"):
        client.upsert_comment(PR, "x", marker="ha-bot", head_sha=HEAD)
    with pytest.raises(ValueError, match="SHA"):
        client.upsert_comment(PR, "x", marker=MARKER, head_sha="main")
