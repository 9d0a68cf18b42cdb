"""Run untrusted model code in a child process: secrets removed from its environment, a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from ha_bot.errors import ModelError

_SECRET_MARKERS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "CREDENTIAL")
_SECRET_PREFIXES = ("ACTIONS_", "GITHUB_TOKEN", "ANTHROPIC_", "INPUT_")


def scrubbed_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment minus every variable that could carry a secret."""
    src = os.environ if env is None else env
    out = {}
    for name, value in src.items():
        upper = name.upper()
        if upper.startswith(_SECRET_PREFIXES) or any(m in upper for m in _SECRET_MARKERS):
            continue
        out[name] = value
    return out


def run_worker(job: Mapping[str, Any], *, timeout_s: float, cwd: str) -> dict[str, Any]:
    """Run ``python -m ha_bot.worker`` on a JSON job; return its JSON answer."""
    env = scrubbed_env()
    # the child must import this ha_bot even when it is not installed (a checkout run in place)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ha_bot.worker"],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=cwd,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise ModelError(f"model code did not finish within {timeout_s:g} s (set `timeout:` on the model to allow more)") from None
    prefix = "@@ha-bot-result@@ "
    lines = [ln[len(prefix) :] for ln in proc.stdout.splitlines() if ln.startswith(prefix)]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ModelError(f"the analysis process exited with code {proc.returncode}: {tail}")
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer
