"""`ha-bot action` end to end: the environment GitHub sets, a real git repository, the real PyGithub
client against a local fake GitHub, the real webhook payloads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fakegithub import FakeGitHub, load_event

from ha_bot.action import INPUTS, MARKER
from ha_bot.main import main
from tests.gitrepo import git, make_repo

ROOT = Path(__file__).resolve().parent.parent
REPO = "Codertocat/Hello-World"


@pytest.fixture
def gh():
    with FakeGitHub() as fake:
        yield fake


def setup_pr(tmp_path: Path, gh: FakeGitHub, *, fork: bool = False, width: int = 16, event: str = "pull_request.synchronize"):
    repo, base, head = make_repo(tmp_path, width_on_head=width)
    payload = load_event(event)
    pr = payload["pull_request"]
    pr["head"]["sha"], pr["base"]["sha"] = head, base
    payload["repository"]["full_name"] = REPO
    pr["base"]["repo"]["full_name"] = REPO
    pr["head"]["repo"]["full_name"] = "someone/Hello-World" if fork else REPO
    gh.add_pull(pr, REPO)
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(payload))
    return repo, base, head, int(pr["number"]), event_path


def action_env(tmp_path: Path, gh: FakeGitHub, repo: Path, event_path: Path, event_name: str = "pull_request", **inputs: str):
    env = {
        "GITHUB_ACTIONS": "true",
        "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_WORKSPACE": str(repo),
        "GITHUB_API_URL": gh.base_url,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_RUN_ID": inputs.pop("run_id", "1000"),
        "GITHUB_RUN_ATTEMPT": "1",
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
        "INPUT_GITHUB-TOKEN": "ghs_testtoken123",
    }
    for k, v in inputs.items():
        env[f"INPUT_{k.upper().replace('_', '-')}"] = v
    return env


def run(monkeypatch, env):
    for k in list(os.environ):
        if k.startswith(("INPUT_", "GITHUB_")):
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return main(["action"])


def statuses(gh, sha):
    return [s["state"] for s in gh.statuses.get((REPO, sha), [])]


def outputs(tmp_path):
    return dict(line.split("=", 1) for line in (tmp_path / "output.txt").read_text().splitlines())


def test_pull_request_end_to_end(tmp_path, gh, monkeypatch):
    repo, base, head, number, event = setup_pr(tmp_path, gh)
    env = action_env(tmp_path, gh, repo, event)
    code = run(monkeypatch, env)
    assert code == 1  # the MACs of `net` regressed past the fail threshold
    (c,) = gh.comments_on(REPO, number)
    assert MARKER in c["body"] and head in c["body"]
    assert "budget check failed" in c["body"] and base[:12] in c["body"] and head[:12] in c["body"]
    assert statuses(gh, head) == ["pending", "failure"]
    assert gh.statuses[(REPO, head)][-1]["context"] == "ha-bot"
    summary = (tmp_path / "summary.md").read_text()
    assert "ha-bot hardware impact" in summary
    out = outputs(tmp_path)
    assert out["verdict"] == "fail" and out["status"] == "failure" and int(out["regressions"]) >= 1
    report = json.loads(Path(out["report-path"]).read_text())
    assert report["diff"]["pull_request"] == {"number": number, "head_sha": head}
    # a second run (same head) edits the same comment in place: still one comment
    env["GITHUB_RUN_ID"] = "1001"
    assert run(monkeypatch, env) == 1
    assert len(gh.comments_on(REPO, number)) == 1
    assert not gh.requests("POST", "/repos/{owner}/{repo}/issues/{number}/comments")[1:]


def test_unchanged_pr_on_change_mode_posts_no_comment_but_sets_status(tmp_path, gh, monkeypatch):
    repo, _, head, number, event = setup_pr(tmp_path, gh, width=8)
    code = run(monkeypatch, action_env(tmp_path, gh, repo, event))
    assert code == 0
    assert gh.comments_on(REPO, number) == []
    assert statuses(gh, head) == ["pending", "success"]


def test_fork_pr_degrades_to_summary_never_red_for_that(tmp_path, gh, monkeypatch):
    repo, _, head, number, event = setup_pr(tmp_path, gh, fork=True, width=8)
    code = run(monkeypatch, action_env(tmp_path, gh, repo, event))
    assert code == 0
    assert gh.comments_on(REPO, number) == [] and statuses(gh, head) == []
    assert not [r for r in gh.log if r.method != "GET"]
    assert "Within budget" in (tmp_path / "summary.md").read_text()


def test_missing_permissions_degrade(tmp_path, gh, monkeypatch):
    repo, _, head, number, event = setup_pr(tmp_path, gh, width=8)
    gh.read_only = True
    code = run(monkeypatch, action_env(tmp_path, gh, repo, event, comment="always"))
    assert code == 0
    assert gh.comments_on(REPO, number) == []
    assert outputs(tmp_path)["verdict"] == "ok"


def test_github_outage_loses_nothing(tmp_path, gh, monkeypatch):
    repo, _, head, number, event = setup_pr(tmp_path, gh)
    gh.fail("*", "*", 502, times=10_000)
    env = action_env(tmp_path, gh, repo, event)
    import ha_bot.github as ghmod

    monkeypatch.setattr(ghmod.time, "sleep", lambda s: None)
    code = run(monkeypatch, env)
    assert code == 1
    report = repo / "ha-bot-report.json"
    assert report.exists() and json.loads(report.read_text())["diff"]["verdict"] == "fail"
    assert "ha-bot hardware impact" in (tmp_path / "summary.md").read_text()


def test_crash_sets_error_status(tmp_path, gh, monkeypatch):
    repo, _, head, number, event = setup_pr(tmp_path, gh)
    import ha_bot.compare

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(ha_bot.compare, "compare", boom)
    assert run(monkeypatch, action_env(tmp_path, gh, repo, event)) == 3
    assert statuses(gh, head) == ["pending", "error"]


def test_pull_request_target_is_refused(tmp_path, gh, monkeypatch):
    repo, _, head, number, event = setup_pr(tmp_path, gh)
    assert run(monkeypatch, action_env(tmp_path, gh, repo, event, event_name="pull_request_target")) == 2
    assert gh.log == []


def test_two_workflow_pattern_publish(tmp_path, gh, monkeypatch):
    # 1. the unprivileged pull_request run of a fork: writes the report, touches nothing
    repo, _, head, number, event = setup_pr(tmp_path, gh, fork=True)
    assert run(monkeypatch, action_env(tmp_path, gh, repo, event)) == 1
    report = repo / "ha-bot-report.json"
    assert gh.comments_on(REPO, number) == []
    # 2. the workflow_run run publishes it
    wr = load_event("workflow_run.completed")
    wr["workflow_run"]["head_sha"] = head
    wr_path = tmp_path / "wr.json"
    wr_path.write_text(json.dumps(wr))
    env = action_env(tmp_path, gh, repo, wr_path, event_name="workflow_run", report_path=str(report))
    assert run(monkeypatch, env) == 1
    (c,) = gh.comments_on(REPO, number)
    assert MARKER in c["body"]
    assert statuses(gh, head) == ["failure"]
    # a report for another head is refused
    wr["workflow_run"]["head_sha"] = "f" * 40
    wr_path.write_text(json.dumps(wr))
    assert run(monkeypatch, env) == 2


def test_every_input_is_documented_and_read():
    from ruamel.yaml import YAML

    action = YAML(typ="safe").load((ROOT / "action.yml").read_text())
    assert set(action["inputs"]) == set(INPUTS)
    for name, spec in action["inputs"].items():
        assert spec["description"] and "default" in spec
        assert spec["default"] == INPUTS[name][0]
    assert action["runs"] == {"using": "docker", "image": "Dockerfile", "args": ["action"]}
    source = (ROOT / "ha_bot" / "action.py").read_text()
    from ha_bot.action import ActionInputs

    for name in INPUTS:
        field = name.replace("-", "_")
        assert field in ActionInputs._fields
        assert f"inputs.{field}" in source, f"input {name} is never read"
    readme = (ROOT / "README.md").read_text()
    for name in INPUTS:
        assert f"`{name}`" in readme, f"input {name} is not in the README"


def add_card_config(repo, card_text=None):
    cfg = repo / ".ha-bot.yml"
    cfg.write_text(cfg.read_text().replace("    inputs: [{shape: [1, 64]}]\n", "    inputs: [{shape: [1, 64]}]\n    card: cards/mlp.md\n"))
    if card_text is not None:
        (repo / "cards").mkdir(exist_ok=True)
        (repo / "cards" / "mlp.md").write_text(card_text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "card")
    return git(repo, "rev-parse", "HEAD")


def test_card_mode_check_fails_on_stale_card_and_shows_diff(tmp_path, gh, monkeypatch):
    repo, base, head, number, event = setup_pr(tmp_path, gh, width=8)
    head = add_card_config(repo, "---\nlicense: mit\n---\n# mlp\n")
    payload = json.loads(event.read_text())
    payload["pull_request"]["head"]["sha"] = head
    event.write_text(json.dumps(payload))
    gh.pulls[(REPO, number)]["head"]["sha"] = head
    assert run(monkeypatch, action_env(tmp_path, gh, repo, event)) == 1
    (c,) = gh.comments_on(REPO, number)
    assert "Stale model cards" in c["body"] and "+hardware:" in c["body"]
    assert statuses(gh, head)[-1] == "failure"
    assert "card(s) out of date" in gh.statuses[(REPO, head)][-1]["description"]
    # the author refreshes the card (as the pre-commit hook would) and pushes: green
    monkeypatch.chdir(repo)
    assert main(["card", "-q"]) == 1
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "refresh card")
    head2 = git(repo, "rev-parse", "HEAD")
    payload["pull_request"]["head"]["sha"] = head2
    event.write_text(json.dumps(payload))
    gh.pulls[(REPO, number)]["head"]["sha"] = head2
    env = action_env(tmp_path, gh, repo, event, run_id="1001")
    assert run(monkeypatch, env) == 0
    assert statuses(gh, head2)[-1] == "success"
    (c,) = gh.comments_on(REPO, number)
    assert "Stale model cards" not in c["body"]  # the old comment is corrected in place


def test_card_mode_commit_pushes_to_the_branch(tmp_path, gh, monkeypatch):
    repo, base, head, number, event = setup_pr(tmp_path, gh, width=8)
    head = add_card_config(repo)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main", "feature")
    payload = json.loads(event.read_text())
    payload["pull_request"]["head"].update(sha=head, ref="feature")
    event.write_text(json.dumps(payload))
    gh.pulls[(REPO, number)]["head"]["sha"] = head
    assert run(monkeypatch, action_env(tmp_path, gh, repo, event, card_mode="commit")) == 0
    log = git(remote, "log", "--format=%s", "feature")
    assert log.splitlines()[0] == "Refresh model cards (ha-bot)"
    assert "hardware:" in git(remote, "show", "feature:cards/mlp.md")


def test_container_entrypoint_as_a_process(tmp_path, gh):
    """The Dockerfile's ENTRYPOINT/CMD: `ha-bot action` in a process of its own, with GitHub's environment only."""
    import subprocess
    import sys

    repo, _, head, number, event = setup_pr(tmp_path, gh)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "ANTHROPIC_"))}
    env.update(action_env(tmp_path, gh, repo, event))
    proc = subprocess.run([sys.executable, "-m", "ha_bot", "action"], env=env, cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert "LLM narrative skipped" in gh.comments_on(REPO, number)[0]["body"]
    assert "ghs_testtoken123" not in proc.stderr + proc.stdout
    assert statuses(gh, head) == ["pending", "failure"]
