"""Model code runs in a child process without secrets, under a timeout."""

from __future__ import annotations

import textwrap

import pytest

from ha_bot import sandbox
from ha_bot.config import InputSpec, ModelSpec
from ha_bot.errors import ModelError

SPY = """
import os, json
import torch
SEEN = {k: v for k, v in os.environ.items()}

def build():
    with open(os.path.join(os.path.dirname(__file__), "env.json"), "w") as f:
        json.dump(SEEN, f)
    return torch.nn.Linear(2, 2)
"""


def test_secrets_are_removed_from_model_code_environment(tmp_path, monkeypatch):
    import json

    from ha_bot.analyze import count_model

    (tmp_path / "spy.py").write_text(textwrap.dedent(SPY))
    secrets = {
        "GITHUB_TOKEN": "ghs_x",
        "ANTHROPIC_API_KEY": "sk-ant",
        "ACTIONS_RUNTIME_TOKEN": "a",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "http://x",
        "MY_SECRET": "s",
        "DB_PASSWORD": "p",
        "AWS_ACCESS_KEY_ID": "k",
        "INPUT_GITHUB-TOKEN": "t",
        "npm_token": "n",
    }
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HOME_SWEET_HOME", "kept")
    spec = ModelSpec(name="spy", python="spy.py:build", inputs=(InputSpec((1, 2)),))
    count_model(spec, str(tmp_path))
    seen = json.loads((tmp_path / "env.json").read_text())
    assert not set(secrets) & set(seen)
    assert seen["HOME_SWEET_HOME"] == "kept"


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "ANTHROPIC_API_KEY",
        "ACTIONS_CACHE_URL",
        "X_SECRET_Y",
        "PGPASSWORD",
        "SSH_KEY_PATH",
    ],
)
def test_scrubbed_env_drops(name):
    assert name not in sandbox.scrubbed_env({name: "v", "PATH": "/bin"})


def test_timeout(tmp_path):
    from ha_bot.analyze import count_model

    (tmp_path / "slow.py").write_text("import time\ndef build():\n    time.sleep(30)\n")
    spec = ModelSpec(name="slow", python="slow.py:build", inputs=(InputSpec((1,)),), timeout_s=3)
    with pytest.raises(ModelError, match="within 3 s"):
        count_model(spec, str(tmp_path))
