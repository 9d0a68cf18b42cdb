"""`ha-bot diff` on a real git repository: merge-base, worktrees, cache, states, exit codes."""

from __future__ import annotations

import json

from ha_bot import compare
from ha_bot.main import main
from tests.gitrepo import git, make_repo


def test_diff_head_vs_merge_base(tmp_path):
    repo, base, head = make_repo(tmp_path)
    # main moves on after the branch point: the merge-base, not main's tip, is the baseline
    git(repo, "checkout", "-q", "main")
    (repo / "models" / "mlp.py").write_text((repo / "models" / "mlp.py").read_text().replace("64, 64", "64, 128").replace("(64, 10)", "(128, 10)"))
    git(repo, "commit", "-qam", "main moves")
    git(repo, "checkout", "-q", "feature")
    result = compare.compare(str(repo), base_ref="main", head_ref="feature", cache_dir=str(tmp_path / "cache"))
    d = result.diff
    assert d["base"]["sha"] == base and d["base"]["merge_base"] and d["head"]["sha"] == head
    states = {m["name"]: m["state"] for m in d["models"]}
    assert states == {"net": "changed", "mlp": "unchanged", "onnx-mlp": "unchanged"}
    net = next(m for m in d["models"] if m["name"] == "net")
    assert net["metrics"]["macs"]["pct"] > 50
    assert d["verdict"] == "fail" and d["status"] == "failure"  # macs regression > 50% fail threshold
    assert result.cache_misses == 4 and result.cache_hits == 2  # mlp and onnx-mlp reused across sides
    # a re-run where the cache holds both sides analyses nothing
    again = compare.compare(str(repo), base_ref="main", head_ref="feature", cache_dir=str(tmp_path / "cache"))
    assert again.cache_misses == 0 and again.diff == d
    assert git(repo, "worktree", "list").count("\n") == 0  # worktrees cleaned up


def test_new_model_and_missing_base_config(tmp_path):
    repo, _, _ = make_repo(tmp_path)
    git(repo, "checkout", "-q", "main")
    git(repo, "rm", "-q", ".ha-bot.yml")
    git(repo, "commit", "-qm", "no config on main")
    git(repo, "checkout", "-q", "-b", "topic")
    git(repo, "checkout", "-q", "feature", "--", ".ha-bot.yml")
    git(repo, "commit", "-qm", "add config")
    d = compare.compare(str(repo), base_ref="main", head_ref="topic", cache_dir=str(tmp_path / "c")).diff
    assert {m["state"] for m in d["models"]} == {"added"}
    assert "no .ha-bot.yml" in d["base"]["note"]
    assert d["status"] == "success"


def test_cli_diff_working_tree_json_and_exit_code(tmp_path, monkeypatch, capsys):
    repo, _, _ = make_repo(tmp_path)
    monkeypatch.chdir(repo)
    code = main(["diff", "--base", "main", "--json", "-q", "--cache-dir", str(tmp_path / "c")])
    d = json.loads(capsys.readouterr().out)
    assert code == 1 and d["head"]["ref"] == "working tree"
    # the engineer's uncommitted fix shows up without a commit
    cfg = repo / ".ha-bot.yml"
    cfg.write_text(cfg.read_text().replace("{width: 16}", "{width: 8}"))
    code = main(["diff", "--base", "main", "-q", "--cache-dir", str(tmp_path / "c")])
    out = capsys.readouterr().out
    assert code == 0 and "Within budget" in out


def test_shallow_or_unrelated_history_falls_back_with_a_note(tmp_path):
    repo, _, _ = make_repo(tmp_path)
    git(repo, "checkout", "-q", "--orphan", "other")
    git(repo, "commit", "-qm", "unrelated root")
    d = compare.compare(str(repo), base_ref="other", head_ref="feature", cache_dir=str(tmp_path / "c")).diff
    assert not d["base"]["merge_base"] and "share no commit" in d["base"]["note"]
