"""A real git repository in tmp_path with a base commit and a head commit that changes a model."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

NET = """
from torch import nn


def build(width=8):
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, width, 3, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))
"""

MLP = """
from torch import nn


def build():
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
"""

CONFIG = """
models:
  - name: net
    python: models/net.py:build
    kwargs: {width: 8}
    inputs: [{shape: [1, 3, 32, 32]}]
  - name: mlp
    python: models/mlp.py:build
    inputs: [{shape: [1, 64]}]
  - name: onnx-mlp
    onnx: models/mlp.onnx
targets: [nvidia_h100_sxm, rpi5_cortex_a76]
precision: fp16
batch_sizes: [1, 8]
budgets:
  - {metric: macs, regression_pct: {warn: 10, fail: 50}}
"""

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                         env={**os.environ, **ENV})
    return out.stdout.strip()


def make_repo(root: Path, *, width_on_head: int = 16) -> tuple[Path, str, str]:
    """(repo, base sha, head sha): main has the base commit, branch `feature` widens `net`."""
    repo = root / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "net.py").write_text(textwrap.dedent(NET))
    (repo / "models" / "mlp.py").write_text(textwrap.dedent(MLP))
    shutil.copy(EXAMPLES / "models" / "mlp.onnx", repo / "models" / "mlp.onnx")
    (repo / ".ha-bot.yml").write_text(textwrap.dedent(CONFIG))
    (repo / ".gitignore").write_text(".ha-bot-cache/\nha-bot-report.json\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    cfg = (repo / ".ha-bot.yml").read_text().replace("{width: 8}", f"{{width: {width_on_head}}}")
    (repo / ".ha-bot.yml").write_text(cfg)
    (repo / "NOTES.md").write_text("a change on the branch\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "wider net")
    head = git(repo, "rev-parse", "HEAD")
    return repo, base, head
