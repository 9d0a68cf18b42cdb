"""`ha-bot action`: the container entrypoint of the GitHub Action, and `ha-bot publish`.

Order of work on a pull request: commit status `pending`; analyse head and merge-base; write the
JSON report, the job summary and the step outputs (before any API call, so nothing is lost when
GitHub fails); then the comment and the final status. Fork PRs and missing permissions degrade to
the summary and the report artifact with a clear log line, never a red check for that reason.
If ha-bot itself crashes, the status is set to `error` and the exit code is 3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ha_bot.errors import HaBotError

# action input -> (default, description); action.yml is checked against this table by a test
INPUTS: dict[str, tuple[str, str]] = {
    "config": (".ha-bot.yml", "Path of the ha-bot config, relative to the repository root."),
    "github-token": ("${{ github.token }}", "Token for the comment and the commit status (needs `pull-requests: write`, `statuses: write`)."),
    "comment": ("on-change", "When to comment: `always`, `on-change` (a model changed, a check is not ok, or a comment exists already) or `never`."),
    "fail-on": ("", "Override the config's `fail_on`: `fail` (fail on budget failures), `warn` (also on warnings) or `never` (informational)."),
    "requirements": ("", "A requirements file installed (pip) before analysis, for your models' own dependencies."),
    "anthropic-api-key": ("", "Anthropic API key for the narrative; without it a deterministic summary is used. Never available to fork PRs."),
    "audience": ("engineer", "Narrative audience: `engineer` (what changed, why, what to try) or `summary` (two sentences for a product owner)."),
    "card-mode": ("check", "Model cards: `check` (fail when a card is stale), `commit` (push refreshed cards to a same-repository PR branch) or `off`."),
    "base-ref": ("", "Compare with this ref instead of the pull request's base branch."),
    "status-context": ("ha-bot", "Name of the commit status (make it a required check under branch protection)."),
    "report-path": ("ha-bot-report.json", "Where the JSON report is written (upload it as an artifact; `publish` reads it)."),
}
OUTPUTS = {
    "verdict": "ok, warn or fail",
    "status": "success or failure (what the commit status says)",
    "regressions": "number of budget checks at warn or fail",
    "report-path": "path of the JSON report",
    "comment-url": "URL of the ha-bot comment, if one was written",
}
MARKER = "<!-- ha-bot:report -->"


class ActionInputs(NamedTuple):
    config: str
    github_token: str
    comment: str
    fail_on: str
    requirements: str
    anthropic_api_key: str
    audience: str
    card_mode: str
    base_ref: str
    status_context: str
    report_path: str

    def __repr__(self) -> str:  # secrets never appear in a repr
        return f"ActionInputs(config={self.config!r}, comment={self.comment!r}, card_mode={self.card_mode!r})"


def read_inputs(env: Mapping[str, str]) -> ActionInputs:
    """GitHub passes input `foo-bar` as INPUT_FOO-BAR; INPUT_FOO_BAR is accepted too."""
    values = {}
    for name, (default, _) in INPUTS.items():
        raw = env.get(f"INPUT_{name.upper()}", env.get(f"INPUT_{name.upper().replace('-', '_')}", ""))
        values[name.replace("-", "_")] = raw.strip() if raw.strip() else ("" if default.startswith("${{") else default)
    if not values["github_token"]:
        values["github_token"] = env.get("GITHUB_TOKEN", "")
    choices = {"comment": ("always", "on-change", "never"), "fail_on": ("", "fail", "warn", "never"),
               "card_mode": ("check", "commit", "off"), "audience": ("engineer", "summary")}
    for key, allowed in choices.items():
        if values[key] not in allowed:
            raise HaBotError(f"action input `{key.replace('_', '-')}`: {values[key]!r} is not one of {', '.join(a for a in allowed if a)}")
    return ActionInputs(**values)


class Env(NamedTuple):
    event_name: str
    event: dict[str, Any]
    repository: str
    workspace: str
    api_url: str
    summary_path: str | None
    output_path: str
    run_id: int | None
    run_attempt: int


def read_env(env: Mapping[str, str]) -> Env:
    missing = [k for k in ("GITHUB_EVENT_PATH", "GITHUB_EVENT_NAME", "GITHUB_REPOSITORY") if not env.get(k)]
    if missing:
        raise HaBotError(f"not running in GitHub Actions: {', '.join(missing)} not set (use `ha-bot diff` locally)")
    try:
        with open(env["GITHUB_EVENT_PATH"], encoding="utf-8") as f:
            event = json.load(f)
    except (OSError, ValueError) as e:
        raise HaBotError(f"cannot read the event payload {env['GITHUB_EVENT_PATH']}: {e}") from None
    run_id = env.get("GITHUB_RUN_ID", "")
    return Env(
        event_name=env["GITHUB_EVENT_NAME"],
        event=event,
        repository=env["GITHUB_REPOSITORY"],
        workspace=env.get("GITHUB_WORKSPACE") or os.getcwd(),
        api_url=env.get("GITHUB_API_URL") or "https://api.github.com",
        summary_path=env.get("GITHUB_STEP_SUMMARY") or None,
        output_path=env.get("GITHUB_OUTPUT", ""),
        run_id=int(run_id) if run_id.isdigit() else None,
        run_attempt=int(env.get("GITHUB_RUN_ATTEMPT", "1") or 1),
    )


def cache_root(env: Env) -> str:
    """Counts and narratives are cached in the workspace, so `actions/cache` can keep them between
    runs (`path: .ha-bot-cache`); the cache is content-addressed, so a stale entry is never used."""
    return os.path.join(env.workspace, ".ha-bot-cache")


def log(msg: str) -> None:
    print(f"ha-bot: {msg}", file=sys.stderr, flush=True)


def write_outputs(path: str, values: Mapping[str, object]) -> None:
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        for k, v in values.items():
            f.write(f"{k}={v}\n")


def write_summary(path: str | None, text: str) -> None:
    from ha_bot.comment import SUMMARY_LIMIT

    if not path:
        return
    data = text.encode("utf-8")[: SUMMARY_LIMIT - 1024].decode("utf-8", "ignore")
    with open(path, "a", encoding="utf-8") as f:
        f.write(data + "\n")


def install_requirements(workspace: str, requirements: str) -> None:
    """The user's model dependencies, installed without any secret in the environment."""
    from ha_bot.sandbox import scrubbed_env

    path = os.path.join(workspace, requirements)
    if not os.path.isfile(path):
        raise HaBotError(f"action input `requirements`: {requirements} not found in the repository")
    log(f"installing {requirements}")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-input", "-r", path], env=scrubbed_env(), cwd=workspace)
    if proc.returncode != 0:
        raise HaBotError(f"pip could not install {requirements} (exit {proc.returncode}); see the log above")


def trust_workspace(workspace: str) -> None:
    """The container's user differs from the checkout's owner: tell git the workspace is safe."""
    subprocess.run(["git", "config", "--global", "--add", "safe.directory", workspace], capture_output=True, check=False)
    subprocess.run(["git", "config", "--global", "--add", "safe.directory", "*"], capture_output=True, check=False)


class Publisher:
    """GitHub writes that degrade instead of failing: forks and missing permissions only log."""

    def __init__(self, client: Any, *, enabled: bool) -> None:
        self.client, self.enabled = client, enabled
        self.degraded: list[str] = []  # missing permissions: logged, never red for that reason
        self.failed: list[str] = []  # GitHub errors after retries (outage, validation): the job fails

    def _do(self, what: str, fn: Callable[[], Any]) -> Any:
        from ha_bot.github import GitHubError, NotFound, PermissionDenied, TokenRejected

        if not self.enabled:
            return None
        try:
            return fn()
        except (PermissionDenied, TokenRejected, NotFound) as e:
            self.degraded.append(f"{what}: {e}")
            log(f"could not {what}; the job summary and the report artifact have everything. {e}")
            self.enabled = False
        except GitHubError as e:
            self.failed.append(f"{what}: {e}")
            log(f"could not {what}: {e}")
        return None

    def status(self, sha: str, state: str, description: str, context: str) -> None:
        self._do("set the commit status", lambda: self.client.set_status(sha, state, description, context=context))

    def comment(self, pr: int, body: str, head_sha: str, run_id: int | None, attempt: int, create: bool) -> Any:
        return self._do("write the pull-request comment", lambda: self.client.upsert_comment(
            pr, body, marker=MARKER, head_sha=head_sha, run_id=run_id, attempt=attempt, create=create))


def status_description(d: Mapping[str, Any]) -> str:
    c = d["counts"]
    parts = [f"{c[s]} {s}" for s in ("changed", "added", "removed", "error") if c.get(s)]
    what = ", ".join(parts) or "no model changed"
    if (d.get("cards") or {}).get("stale"):
        what += f"; {d['cards']['stale']} model card(s) out of date"
    if d["verdict"] == "fail":
        return f"{d['regressions']} budget check(s) failed; {what}"
    if d["verdict"] == "warn":
        return f"{d['regressions']} budget warning(s); {what}"
    return f"within budget; {what}"


def should_comment(mode: str, d: Mapping[str, Any]) -> tuple[bool, bool]:
    """(write at all, may create a new comment). on-change edits an existing comment even when
    nothing changed, so a fixed regression never leaves a stale red comment behind."""
    if mode == "never":
        return False, False
    if mode == "always":
        return True, True
    interesting = (
        d["verdict"] != "ok" or any(m["state"] != "unchanged" for m in d["models"]) or bool((d.get("cards") or {}).get("stale"))
    )
    return True, interesting


def pr_facts(env: Env) -> tuple[int, str, str, bool]:
    """(number, head sha, base sha, is fork) from a pull_request payload."""
    pr = env.event.get("pull_request") or {}
    try:
        number = int(pr["number"])
        head, base = pr["head"]["sha"], pr["base"]["sha"]
    except (KeyError, TypeError, ValueError):
        raise HaBotError("the pull_request payload lacks number/head.sha/base.sha") from None
    head_repo = (pr.get("head") or {}).get("repo") or {}
    fork = head_repo.get("full_name", "").lower() != env.repository.lower()
    return number, head, base, fork


def run_action(environ: Mapping[str, str] | None = None, *, client_factory: Callable[..., Any] | None = None) -> int:
    environ = os.environ if environ is None else environ
    inputs = read_inputs(environ)
    env = read_env(environ)
    if env.event_name == "pull_request_target":
        raise HaBotError(
            "ha-bot refuses to analyse pull-request code under `pull_request_target` (it would run untrusted "
            "code with a write token). Use `pull_request` to analyse and `workflow_run` + `ha-bot publish` "
            "to comment (README: \"Pull requests from forks\")."
        )
    if env.event_name == "workflow_run":
        return publish(inputs.report_path, environ=environ, client_factory=client_factory)
    return analyse_pr(inputs, env, environ, client_factory)


def _client(inputs: ActionInputs, env: Env, client_factory: Callable[..., Any] | None) -> Any:
    from ha_bot import github

    factory = client_factory or github.Client
    return factory(inputs.github_token, api_url=env.api_url, repo=env.repository)


def analyse_pr(inputs: ActionInputs, env: Env, environ: Mapping[str, str], client_factory: Callable[..., Any] | None) -> int:
    from ha_bot import comment, compare, report

    is_pr = env.event_name == "pull_request"
    number, head_sha, base_sha, fork = pr_facts(env) if is_pr else (0, "", "", False)
    if fork:
        log("pull request from a fork: the token is read-only, so the report goes to the job summary and the artifact; "
            "use the two-workflow pattern to comment (README)")
    publisher = Publisher(None, enabled=False)
    if is_pr and inputs.github_token and not fork:
        publisher = Publisher(_client(inputs, env, client_factory), enabled=True)
    elif is_pr and not inputs.github_token:
        log("no github-token: skipping the comment and status")
    if head_sha:
        publisher.status(head_sha, "pending", "analysing models", inputs.status_context)
    try:
        if environ.get("GITHUB_ACTIONS") == "true":
            trust_workspace(env.workspace)
        if inputs.requirements:
            install_requirements(env.workspace, inputs.requirements)
        result = compare.compare(
            env.workspace,
            base_ref=inputs.base_ref or base_sha or None,
            head_ref=head_sha or None,
            config_path=inputs.config,
            cache_dir=cache_root(env),
            progress=log,
        )
    except HaBotError as e:
        if head_sha:
            publisher.status(head_sha, "error", f"ha-bot could not run: {e}"[:140], inputs.status_context)
        write_summary(env.summary_path, f"### ha-bot could not run\n\n```\n{e}\n```\n")
        raise
    except Exception:
        if head_sha:
            publisher.status(head_sha, "error", "ha-bot crashed; see the job log", inputs.status_context)
        raise
    d = result.diff
    if inputs.fail_on:
        failing = d["verdict"] == "fail" or (d["verdict"] == "warn" and inputs.fail_on == "warn")
        d["status"] = "failure" if failing and inputs.fail_on != "never" else "success"
        d["informational"] = inputs.fail_on == "never"
    d["pull_request"] = {"number": number, "head_sha": head_sha} if is_pr else None

    extra = _extras(inputs, env, result, d, fork=fork)
    body = comment.render(d, **extra)
    # 1. nothing is lost: the report file, the summary and the outputs come before any API call
    doc = {"schema_version": 1, "kind": "ha-bot-pr-report", "diff": d, "head_report": result.head_report,
           "base_report": result.base_report}
    report_path = os.path.join(env.workspace, inputs.report_path)
    with open(report_path, "w", encoding="utf-8") as f:
        f.write(report.dumps(doc))
    write_summary(env.summary_path, comment.summary(d, **extra))
    outputs = {"verdict": d["verdict"], "status": d["status"], "regressions": d["regressions"], "report-path": report_path}
    # 2. then GitHub
    url = ""
    if is_pr:
        write, create = should_comment(inputs.comment, d)
        if write:
            res = publisher.comment(number, body, head_sha, env.run_id, env.run_attempt, create)
            if res is not None:
                url = res.url
                log(f"comment {res.action}{': ' + res.url if res.url else ''}")
        publisher.status(head_sha, d["status"], status_description(d), inputs.status_context)
    outputs["comment-url"] = url
    write_outputs(env.output_path, outputs)
    log(f"verdict {d['verdict']}, status {d['status']} ({status_description(d)}); report {report_path}")
    if publisher.failed:
        log("GitHub could not be updated (see above); the job summary and the report artifact have the full report")
        return 1
    return 1 if d["status"] == "failure" else 0


def _extras(inputs: ActionInputs, env: Env, result: Any, d: dict[str, Any], *, fork: bool) -> dict[str, Any]:
    """Card diffs and the narrative for the comment (each optional: the report is complete without them).
    Stale cards under `card-mode: check` fail the status."""
    from ha_bot import action_cards, narrate

    extra: dict[str, Any] = {}
    pr = env.event.get("pull_request") or {}
    if inputs.card_mode != "off" and any(m.card for m in result.config.models):
        if inputs.card_mode == "commit" and not fork and pr:
            outcome = action_cards.commit(result.config, result.head_report, env.workspace, inputs.config,
                                          pr["head"]["sha"], pr["head"]["ref"], log=log)
        else:
            if inputs.card_mode == "commit":
                log("card-mode commit: cannot push to a fork's branch; checking the cards instead")
            outcome = action_cards.check(result.config, result.head_report, env.workspace, inputs.config)
        log(outcome.note)
        d["cards"] = {"stale": outcome.stale, "note": outcome.note}
        if outcome.stale:
            extra["card_diffs"] = outcome.diffs
            d["status"] = "success" if d.get("informational") else "failure"
    key = "" if fork else inputs.anthropic_api_key
    cache_dir = os.path.join(cache_root(env), "narratives")
    extra.update(narrate.comment_kwargs(d, api_key=key, audience=inputs.audience, cache_dir=cache_dir,
                                        head_report=result.head_report, log=log, **result.config.narrative))
    return extra


def publish(report_path: str, *, environ: Mapping[str, str] | None = None, client_factory: Callable[..., Any] | None = None) -> int:
    """Second half of the fork pattern: post the comment and status from a report made by an
    unprivileged `pull_request` run. The report is untrusted data: it is re-rendered (escaped), and
    its pull request must have the head SHA that the `workflow_run` event names."""
    from ha_bot import comment

    environ = os.environ if environ is None else environ
    inputs = read_inputs(environ)
    env = read_env(environ)
    try:
        with open(report_path, encoding="utf-8") as f:
            doc = json.load(f)
        d = doc["diff"]
        pr = d["pull_request"]
        number, head_sha = int(pr["number"]), str(pr["head_sha"])
        if d["status"] not in ("success", "failure") or d["verdict"] not in ("ok", "warn", "fail"):
            raise ValueError("bad status or verdict")
        body = comment.render(d)
    except FileNotFoundError:
        raise HaBotError(f"{report_path}: report not found (download the artifact first)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise HaBotError(f"{report_path}: not a ha-bot pull-request report ({type(e).__name__}: {e})") from None
    run = env.event.get("workflow_run") or {}
    expected = run.get("head_sha")
    if env.event_name == "workflow_run" and expected and expected != head_sha:
        raise HaBotError(f"{report_path} is for head {head_sha[:12]} but the workflow run is for {str(expected)[:12]}: refusing to publish")
    client = _client(inputs, env, client_factory)
    info = client.pr_info(number)
    if info.head_sha != head_sha:
        log(f"pull request #{number} has moved on to {info.head_sha[:12]}; this report is for {head_sha[:12]}: not publishing")
        return 0
    write, create = should_comment(inputs.comment, d)
    publisher = Publisher(client, enabled=True)
    if write:
        run_id = run.get("id") if isinstance(run.get("id"), int) else env.run_id
        res = publisher.comment(number, body, head_sha, run_id, int(run.get("run_attempt") or 1), create)
        if res is not None:
            log(f"comment {res.action}: {res.url}")
    publisher.status(head_sha, d["status"], status_description(d), inputs.status_context)
    write_summary(env.summary_path, comment.summary(d))
    return 1 if d["status"] == "failure" or publisher.failed else 0
