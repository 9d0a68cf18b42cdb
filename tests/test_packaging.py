"""Contracts that keep the packaging and the docs honest."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_cli_subcommand_is_in_the_readme():
    from ha_bot.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    readme = (ROOT / "README.md").read_text()
    for name in sub.choices:
        assert f"ha-bot {name}" in readme, f"`ha-bot {name}` is not documented in the README"


def test_readme_starts_with_the_two_newcomer_commands():
    head = (ROOT / "README.md").read_text().split("```")[1]
    assert "pip install torch==2.13.0" in head and "ha-bot analyze" in head and "pytest" in head


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    test_cmd = next(line for line in readme.splitlines() if "pytest" in line and line.startswith("python3 -m venv"))
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def test_dockerfile_pins_cpu_torch_and_runs_the_action():
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"download\.pytorch\.org/whl/cpu torch==\d+\.\d+\.\d+", text)
    assert 'ENTRYPOINT ["ha-bot"]' in text and 'CMD ["action"]' in text
    for line in text.splitlines():
        if line.strip().startswith('"') and "==" not in line:
            pytest.fail(f"unpinned dependency in the Dockerfile: {line}")


def test_dockerfile_is_hadolint_clean():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install '.[lint]')")
    proc = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_torch_is_capped_so_pip_never_pulls_a_newer_cuda_build():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"torch>=[\d.]+,<[\d.]+"', text)
