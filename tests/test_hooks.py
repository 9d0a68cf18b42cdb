"""The pre-commit hooks, run by the real `pre-commit try-repo` against a sample repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gitrepo import git

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def precommit(repo: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pc-home"), "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=repo, capture_output=True, text=True, env=env)


@pytest.fixture
def sample(tmp_path):
    repo = tmp_path / "sample"
    (repo / "models").mkdir(parents=True)
    shutil.copy(EXAMPLES / "models" / "mlp.onnx", repo / "models" / "mlp.onnx")
    (repo / ".ha-bot.yml").write_text(
        "models:\n  - name: mlp\n    onnx: models/mlp.onnx\n    card: cards/mlp.md\n"
        "targets: [rpi5_cortex_a76]\nbudgets:\n  - {metric: params, fail: 1000000}\n"
    )
    (repo / ".gitignore").write_text(".ha-bot-cache/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    return repo


def test_hook_definitions_are_valid(tmp_path):
    assert precommit(ROOT, tmp_path, "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")).returncode == 0
    for cfg in (ROOT / "hooks").glob("*.pre-commit-config.yaml"):
        r = precommit(ROOT, tmp_path, "validate-config", str(cfg))
        assert r.returncode == 0, (cfg, r.stdout, r.stderr)


def test_card_hook_creates_then_is_idempotent(sample, tmp_path):
    r = precommit(sample, tmp_path, "try-repo", str(ROOT), "ha-bot-card", "--all-files")
    assert r.returncode == 1, r.stdout + r.stderr  # modified files: the pre-commit convention
    assert "created cards/mlp.md" in r.stdout
    card = (sample / "cards" / "mlp.md").read_text()
    assert "hardware:" in card and "<!-- ha-bot:start -->" in card
    r = precommit(sample, tmp_path, "try-repo", str(ROOT), "ha-bot-card", "--all-files")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (sample / "cards" / "mlp.md").read_text() == card


def test_budget_hook_fails_on_broken_budget(sample, tmp_path):
    r = precommit(sample, tmp_path, "try-repo", str(ROOT), "ha-bot-budget", "--all-files")
    assert r.returncode == 0, r.stdout + r.stderr
    cfg = sample / ".ha-bot.yml"
    cfg.write_text(cfg.read_text().replace("fail: 1000000", "fail: 1000"))
    r = precommit(sample, tmp_path, "try-repo", str(ROOT), "ha-bot-budget", "--all-files")
    assert r.returncode == 1
    assert "params" in r.stdout and "budget" in r.stdout
