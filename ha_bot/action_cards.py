"""Model cards in the action: `card-mode: check` (stale cards fail the status and show their diff in
the comment), `commit` (push refreshed cards to a same-repository PR branch) or `off`.

Pushes made with the workflow's GITHUB_TOKEN do not trigger new workflow runs, and fork branches
cannot be pushed to: refreshing cards is best done by the pre-commit hook, and checked here.
"""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ha_bot import gitutil
from ha_bot.config import Config
from ha_bot.errors import HaBotError


class CardOutcome(NamedTuple):
    diffs: list[str]  # for the comment: unified diffs, or "path: error"
    stale: int  # cards out of date after this stage (commit mode: 0 when pushed)
    note: str  # one line for the log


def _rooted(cfg: Config, tree: str, config_rel: str) -> Config:
    return dataclasses.replace(cfg, root=os.path.dirname(os.path.join(tree, config_rel)))


def check(cfg: Config, head_report: Mapping[str, Any], tree: str, config_rel: str) -> CardOutcome:
    from ha_bot import card_cmd

    diffs = card_cmd.card_diffs(_rooted(cfg, tree, config_rel), head_report)
    texts = [d.diff if d.diff else f"{d.path}: {d.error}" for d in diffs]
    stale = sum(1 for d in diffs if d.diff)
    note = f"{stale} model card(s) out of date" if stale else "model cards are current"
    return CardOutcome(texts, len(diffs), note)


def commit(
    cfg: Config, head_report: Mapping[str, Any], repo: str, config_rel: str, head_sha: str, head_ref: str,
    *, log: Callable[[str], None],
) -> CardOutcome:
    """Refresh the cards on a worktree of the PR head and push a commit to its branch."""
    from ha_bot import card_cmd

    with gitutil.worktree(repo, head_sha) as tree:
        out = io.StringIO()
        try:
            card_cmd.run_cards(_rooted(cfg, tree, config_rel), head_report, out=out)
        except HaBotError as e:
            return CardOutcome([str(e)], 1, f"model cards could not be refreshed: {e}")
        if not gitutil.git(tree, "status", "--porcelain"):
            return CardOutcome([], 0, "model cards are current")
        gitutil.git(tree, "add", "-A")
        gitutil.git(
            tree, "-c", "user.name=github-actions[bot]",
            "-c", "user.email=41898282+github-actions[bot]@users.noreply.github.com",
            "commit", "-q", "-m", "Refresh model cards (ha-bot)",
        )
        try:
            gitutil.git(tree, "push", "origin", f"HEAD:refs/heads/{head_ref}")
        except HaBotError as e:
            log(f"could not push refreshed cards to {head_ref}: {e}")
            return CardOutcome([], 1, "model cards are out of date and could not be pushed (needs `contents: write`)")
        log(f"pushed refreshed model cards to {head_ref}:\n{out.getvalue().strip()}")
        return CardOutcome([], 0, f"refreshed model cards pushed to {head_ref}")
