"""Analyse the head and the merge-base of a change, each in its own tree, and diff them.

Each side's Python model code runs in child processes of its own (see :mod:`ha_bot.sandbox`), so
two trees' model code never share an interpreter. Both sides are estimated with the head's
settings (targets, precision, batch sizes) so the comparison is like for like.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from ha_bot import analyze, config, diff, gitutil
from ha_bot.cache import Cache
from ha_bot.errors import ConfigError


class Comparison(NamedTuple):
    diff: dict[str, Any]
    base_report: dict[str, Any] | None
    head_report: dict[str, Any]
    config: config.Config  # the head's
    cache_hits: int
    cache_misses: int


@contextlib.contextmanager
def _tree(repo: str, sha: str | None) -> Iterator[str]:
    if sha is None:
        yield repo
    else:
        with gitutil.worktree(repo, sha) as path:
            yield path


def compare(
    repo: str,
    *,
    base_ref: str | None = None,
    head_ref: str | None = None,
    config_path: str = config.DEFAULT_CONFIG,
    cache_dir: str | None = None,
    use_cache: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Comparison:
    """``head_ref`` None: the working tree as it is (uncommitted changes included)."""
    top = gitutil.toplevel(repo)
    rel_config = os.path.relpath(os.path.abspath(os.path.join(repo, config_path)), top)
    head_sha = gitutil.rev_parse(top, head_ref or "HEAD")
    base = gitutil.merge_base(top, base_ref or gitutil.default_base(top), head_sha)
    say = progress or (lambda _msg: None)
    say(f"base {base.ref} at {base.sha[:12]}{' (' + base.note + ')' if base.note else ' (merge-base)'}; head {head_ref or 'working tree'} at {head_sha[:12]}")
    cache = Cache(cache_dir or os.path.join(top, ".ha-bot-cache")) if use_cache else Cache(tempfile.mkdtemp(prefix="ha-bot-nocache-"))
    counter = analyze.cached_counter(cache)

    with _tree(top, head_sha if head_ref else None) as head_tree:
        head_cfg = config.load(os.path.join(head_tree, rel_config))
        chosen = analyze.select_targets(head_cfg)
        say("analysing head")
        head_report = analyze.analyze(head_cfg, chosen, counter=counter, progress=say)

    base_report = None
    base_note = base.note
    with _tree(top, base.sha) as base_tree:
        path = os.path.join(base_tree, rel_config)
        if os.path.exists(path):
            try:
                base_cfg = config.load(path)
            except ConfigError as e:
                base_note = (base_note + "; " if base_note else "") + f"the base's config is invalid ({e}); every model counts as new"
            else:
                both = dataclasses.replace(head_cfg, path=base_cfg.path, root=base_cfg.root, models=base_cfg.models)
                say("analysing base")
                base_report = analyze.analyze(both, chosen, counter=counter, progress=say)
        else:
            base_note = (base_note + "; " if base_note else "") + f"the base has no {rel_config}; every model counts as new"

    doc = diff.diff_reports(
        base_report,
        head_report,
        budgets=head_cfg.budgets,
        model_budgets={m.name: m.budgets for m in head_cfg.models},
        epsilon_pct=head_cfg.epsilon_pct,
        fail_on=head_cfg.fail_on,
        informational=head_cfg.informational,
        base_info={"sha": base.sha, "ref": base.ref, "note": base_note, "merge_base": not base.note},
        head_info={"sha": head_sha, "ref": head_ref or "working tree"},
    )
    return Comparison(doc, base_report, head_report, head_cfg, cache.hits, cache.misses)
