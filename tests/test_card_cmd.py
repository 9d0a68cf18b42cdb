"""`ha-bot card`: real files in a temporary repository, a real report, atomic writes, exit codes."""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import stat
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ha_bot import card_cmd, config, cost, report, targets
from ha_bot.card import MARK_END, MARK_START
from ha_bot.card_cmd import card_diffs, run_cards, select_models, unified_diff
from ha_bot.errors import HaBotError
from tests.helpers import count, op

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "models"
TARGETS = ("nvidia_h100_sxm", "rpi5_cortex_a76")

CONFIG = """\
models:
  - name: convnet
    python: models/convnet.py:build
    inputs: [{shape: [1, 3, 32, 32]}]
    card: cards/convnet.md
  - name: mlp
    onnx: models/mlp.onnx
    card: cards/mlp/README.md
    training_log: logs/train.jsonl
  - name: nocard
    onnx: models/other.onnx
targets: [nvidia_h100_sxm, rpi5_cortex_a76]
batch_sizes: [1, 8]
"""


def _entry(name: str, width: int) -> dict[str, Any]:
    """A report entry from a hand-built count and the real cost model on built-in targets."""
    ops = [
        op("aten::linear", "matmul", macs=64 * width, flops=2 * 64 * width, act_in=64, w_in=64 * width + width,
           out=width, inputs=(0,), outputs=(1,), scope="fc1"),
        op("aten::relu", "elementwise", flops=width, act_in=width, out=width, inputs=(1,), outputs=(2,), scope="act"),
        op("aten::linear", "matmul", macs=width * 10, flops=2 * width * 10, act_in=width, w_in=width * 10 + 10,
           out=10, inputs=(2,), outputs=(3,), scope="fc2"),
    ]
    c = count(ops, {0: 64, 1: width, 2: width, 3: 10}, params=64 * width + width + width * 10 + 10)
    pool = targets.load_builtin()
    chosen = [pool[t] for t in TARGETS]
    estimates = [cost.estimate(c, t, "fp16", b) for b in (1, 8) for t in chosen]
    training = [cost.training_step(c, t, e, "adamw", None) for t, e in zip(chosen, estimates, strict=False)]
    return report.model_entry(name, {"python": f"{name}.py:build"}, c, "fp16", estimates, training)


def make_report(entries: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    pool = targets.load_builtin()
    if entries is None:
        entries = [_entry("convnet", 128), _entry("mlp", 32), _entry("nocard", 16)]
    settings = {"precision": "fp16", "batch_sizes": [1, 8], "targets": list(TARGETS),
                "training": {"optimizer": "adamw", "dataset_size": None}}
    return report.build(entries, [pool[t] for t in TARGETS], settings)


REPORT = make_report()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "convnet.py").write_text("# stands in for the model source\n")
    (tmp_path / "models" / "mlp.onnx").write_bytes(b"onnx")
    (tmp_path / "logs").mkdir()
    shutil.copy(FIXTURES / "logs" / "good.jsonl", tmp_path / "logs" / "train.jsonl")
    (tmp_path / ".ha-bot.yml").write_text(CONFIG)
    (tmp_path / "report.json").write_text(report.dumps(REPORT))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cfg(repo: Path) -> config.Config:
    return config.load(str(repo / ".ha-bot.yml"))


def run(repo: Path, *, files: Sequence[str] = (), check: bool = False, doc: dict[str, Any] | None = None) -> tuple[int, str]:
    out = io.StringIO()
    rc = run_cards(cfg(repo), doc or REPORT, files=files, check=check, out=out)
    return rc, out.getvalue()


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="ha-bot")
    card_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["card", *argv])
    return int(args.func(args))


def snapshot(repo: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file's bytes, inode and mtime: proof that nothing was rewritten."""
    out = {}
    for p in sorted(repo.rglob("*")):
        if p.is_file():
            st_ = p.stat()
            out[str(p.relative_to(repo))] = (p.read_bytes(), st_.st_ino, st_.st_mtime_ns)
    return out


# ----------------------------------------------------------------------------- refresh and check


def test_creates_cards_then_is_a_no_op(repo: Path) -> None:
    rc, out = run(repo)
    assert rc == 1
    assert "created cards/convnet.md" in out and "created cards/mlp/README.md" in out
    assert not (repo / "cards" / "nocard.md").exists()
    text = (repo / "cards" / "mlp" / "README.md").read_text()
    assert text.startswith("---\nhardware:\n") and "### Training run (measured)" in text
    assert "From logs/train.jsonl:" in text  # the log named relative to the config, whatever the cwd
    before = snapshot(repo)
    assert run(repo) == (0, "")
    assert snapshot(repo) == before


def test_check_prints_diff_and_writes_nothing(repo: Path) -> None:
    before = snapshot(repo)
    rc, out = run(repo, check=True)
    assert rc == 1
    assert "--- /dev/null\n+++ b/cards/convnet.md\n" in out
    assert "cards/convnet.md is out of date" in out
    assert snapshot(repo) == before
    run(repo)
    assert run(repo, check=True) == (0, "")


def test_stale_card_diff_shows_only_the_change(repo: Path) -> None:
    run(repo)
    card = repo / "cards" / "convnet.md"
    card.write_text(card.read_text().replace("# convnet\n", "# ConvNet, by hand\n"))
    assert run(repo, check=True) == (0, "")  # text outside ha-bot's parts is the author's
    doc = make_report([_entry("convnet", 256), _entry("mlp", 32)])
    rc, out = run(repo, check=True, doc=doc)
    assert rc == 1
    assert "--- a/cards/convnet.md\n+++ b/cards/convnet.md\n" in out
    changed = [ln for ln in out.splitlines() if ln[:1] in "+-" and not ln.startswith(("---", "+++"))]
    assert changed and all("ConvNet, by hand" not in ln for ln in changed)
    assert "cards/mlp" not in out


def test_files_select_models(repo: Path) -> None:
    c = cfg(repo)
    names = lambda files: [m.name for m in select_models(c, files)]  # noqa: E731
    assert names([]) == ["convnet", "mlp"]
    assert names(["models/convnet.py"]) == ["convnet"]
    assert names(["cards/mlp/README.md"]) == ["mlp"]
    assert names(["logs/train.jsonl"]) == ["mlp"]
    assert names([".ha-bot.yml"]) == ["convnet", "mlp"]
    assert names(["README.md", "models/other.onnx"]) == []
    rc, out = run(repo, files=["models/convnet.py"])
    assert rc == 1 and "convnet.md" in out and "mlp" not in out


def test_unrelated_files_do_nothing_fast(repo: Path) -> None:
    before = snapshot(repo)
    assert cli("README.md", "--report", "no-such-report.json") == 0  # not even the report is read
    assert snapshot(repo) == before


def test_cli_with_report(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("--report", "report.json") == 1
    assert cli("--report", "report.json") == 0
    assert cli("--report", "report.json", "--check") == 0
    assert "created" in capsys.readouterr().out


def test_cli_training_log_needs_one_model(repo: Path) -> None:
    with pytest.raises(HaBotError, match="--training-log needs exactly one model, but 2"):
        cli("--report", "report.json", "--training-log", "logs/train.jsonl")
    shutil.copy(FIXTURES / "logs" / "good.csv", repo / "orin.csv")
    assert cli("models/convnet.py", "--report", "report.json", "--training-log", "orin.csv") == 1
    text = (repo / "cards" / "convnet.md").read_text()
    assert "From orin.csv:" in text and "Jetson Orin Nano" in text


# ----------------------------------------------------------------------------- preservation on disk


@pytest.mark.parametrize("fixture", ["crlf_card.md", "bom_card.md", "unicode_card.md", "hf_card.md"])
def test_real_cards_on_disk_keep_their_bytes(repo: Path, fixture: str) -> None:
    (repo / "cards").mkdir()
    data = (FIXTURES / "cards" / fixture).read_bytes()
    (repo / "cards" / "convnet.md").write_bytes(data)
    run(repo)
    new = (repo / "cards" / "convnet.md").read_bytes()
    assert new.startswith(b"\xef\xbb\xbf") == data.startswith(b"\xef\xbb\xbf")
    assert (b"\r\n" in new) == (b"\r\n" in data)
    assert new.endswith(b"\n") == data.endswith(b"\n")
    last = data.rstrip(b"\r\n").rsplit(b"\n", 1)[-1]
    if MARK_START.encode() in data or not data.endswith(b"\n"):
        assert last in new
    assert run(repo, files=["cards/convnet.md"]) == (0, "")


def test_mode_kept_symlink_followed_no_temp_files(repo: Path) -> None:
    (repo / "cards" / "mlp").mkdir(parents=True)
    real = repo / "docs" / "mlp.md"
    real.parent.mkdir()
    real.write_text("# mlp\n")
    real.chmod(0o640)
    (repo / "cards" / "mlp" / "README.md").symlink_to(real)
    (repo / "cards" / "convnet.md").write_text("# convnet\n")
    os.chmod(repo / "cards" / "convnet.md", 0o600)
    run(repo)
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert stat.S_IMODE((repo / "cards" / "convnet.md").stat().st_mode) == 0o600
    assert (repo / "cards" / "mlp" / "README.md").is_symlink()
    assert MARK_START in real.read_text()
    leftovers = [p.name for d in (repo / "cards", repo / "docs") for p in d.iterdir() if p.name.startswith(".")]
    assert leftovers == []


# ----------------------------------------------------------------------------- errors


BAD_CARDS = [
    ("---\nlicense: mit\ntags: [a, b\n---\n# x\n", 4),
    ("---\nlicense: mit\n# x\n", 1),
    (f"# x\n{MARK_START}\n{MARK_START}\n{MARK_END}\n", 3),
    (f"# x\n{MARK_END}\n{MARK_START}\n", 2),
    (b"# caf\xe9\n".decode("latin-1"), None),  # written below as latin-1 bytes: not UTF-8
]


@pytest.mark.parametrize(("text", "line"), BAD_CARDS)
def test_bad_card_left_untouched_others_refreshed(repo: Path, text: str, line: int | None) -> None:
    (repo / "cards").mkdir()
    bad = repo / "cards" / "convnet.md"
    bad.write_bytes(text.encode("latin-1" if line is None else "utf-8"))
    before = bad.read_bytes(), bad.stat().st_mtime_ns
    with pytest.raises(HaBotError) as err:
        run(repo)
    where = f"cards/convnet.md:{line if line is not None else 1}: "
    assert str(err.value).startswith(where)
    assert (bad.read_bytes(), bad.stat().st_mtime_ns) == before
    assert (repo / "cards" / "mlp" / "README.md").exists()  # the good card was still refreshed
    assert cli("--report", "report.json", "--check", "models/mlp.onnx") == 0


def test_two_bad_cards_reported_together(repo: Path) -> None:
    (repo / "cards" / "mlp").mkdir(parents=True)
    (repo / "cards" / "convnet.md").write_text("---\na: [\n---\n")
    (repo / "cards" / "mlp" / "README.md").write_text(f"{MARK_END}\n")
    with pytest.raises(HaBotError, match="2 cards could not be refreshed") as err:
        run(repo)
    assert "cards/convnet.md:3:" in str(err.value) and "cards/mlp/README.md:1:" in str(err.value)


def test_bad_training_log_is_an_error_for_that_card(repo: Path) -> None:
    shutil.copy(FIXTURES / "logs" / "malformed.jsonl", repo / "logs" / "train.jsonl")
    with pytest.raises(HaBotError, match=r"logs/train.jsonl:3: not valid JSON"):
        run(repo)
    assert not (repo / "cards" / "mlp" / "README.md").exists()
    assert (repo / "cards" / "convnet.md").exists()


def test_failed_or_missing_model_exits_1_and_leaves_card(repo: Path) -> None:
    (repo / "cards").mkdir()
    (repo / "cards" / "convnet.md").write_text("# convnet\n")
    failed = report.error_entry("convnet", {"python": "models/convnet.py:build"}, "ModelError: boom")
    doc = make_report([failed])  # and mlp is missing altogether
    rc, out = run(repo, doc=doc)
    assert rc == 1
    assert "convnet: analysis failed, card cards/convnet.md not refreshed: ModelError: boom" in out
    assert "mlp: not in the report" in out
    assert (repo / "cards" / "convnet.md").read_text() == "# convnet\n"
    diffs = card_diffs(cfg(repo), doc)
    assert [(d.model, d.diff, bool(d.error)) for d in diffs] == [("convnet", "", True), ("mlp", "", True)]


def test_card_diffs_for_the_pr_comment(repo: Path) -> None:
    diffs = card_diffs(cfg(repo), REPORT)
    assert [(d.model, d.path) for d in diffs] == [("convnet", "cards/convnet.md"), ("mlp", "cards/mlp/README.md")]
    assert all(d.diff.startswith("--- /dev/null\n+++ b/") and d.error is None for d in diffs)
    run(repo)
    assert card_diffs(cfg(repo), REPORT) == []


def test_unified_diff_marks_missing_final_newline() -> None:
    d = unified_diff("a\nb", "a\nc", "x.md")
    assert d.endswith("-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n")


def test_report_json_round_trip_gives_same_cards(repo: Path) -> None:
    doc = json.loads((repo / "report.json").read_text())
    run(repo, doc=doc)
    assert run(repo) == (0, "")


# ----------------------------------------------------------------------------- end to end


def test_end_to_end_real_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    (tmp_path / "models").mkdir()
    shutil.copy(EXAMPLES / "convnet.py", tmp_path / "models" / "convnet.py")
    (tmp_path / ".ha-bot.yml").write_text(textwrap.dedent("""\
        models:
          - name: convnet
            python: models/convnet.py:build
            inputs: [{shape: [1, 3, 64, 64]}]
            card: MODEL_CARD.md
        targets: [nvidia_jetson_orin_nano_8gb]
    """))
    (tmp_path / "MODEL_CARD.md").write_bytes((FIXTURES / "cards" / "hf_card.md").read_bytes())
    monkeypatch.chdir(tmp_path)
    assert cli("-q") == 1
    text = (tmp_path / "MODEL_CARD.md").read_text()
    assert "nvidia\\_jetson\\_orin\\_nano\\_8gb" in text and "license: apache-2.0   # SPDX id" in text
    assert cli("-q", "--check", "models/convnet.py") == 0
