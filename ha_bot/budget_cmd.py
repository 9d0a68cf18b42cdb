"""`ha-bot budget`: check the configured budgets on the working tree (the pre-commit hook).

Absolute budgets are checked against the working tree. Relative budgets (`regression_pct`) need a
baseline: with `--base REF` the merge-base is analysed too (`ha-bot diff`); without it they are
skipped and the output says so. Counts come from the cache, so a run where no model changed
imports neither torch nor onnx.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

EXIT_OK, EXIT_FAILED = 0, 1


def check_budgets(config_path: str, *, base: str | None = None, quiet: bool = False) -> tuple[int, str]:
    from ha_bot import analyze, comment, compare, config, diff
    from ha_bot.cache import Cache

    cfg = config.load(config_path)
    if base:
        result = compare.compare(os.path.dirname(os.path.abspath(config_path)), base_ref=base, config_path=os.path.basename(config_path))
        d = result.diff
    else:
        cache = Cache(os.path.join(cfg.root, ".ha-bot-cache"))
        head = analyze.analyze(cfg, analyze.select_targets(cfg), counter=analyze.cached_counter(cache))
        d = diff.diff_reports(
            None, head, budgets=cfg.budgets, model_budgets={m.name: m.budgets for m in cfg.models},
            epsilon_pct=cfg.epsilon_pct, fail_on=cfg.fail_on, informational=cfg.informational,
        )
    lines = []
    for m in d["models"]:
        if m["state"] == "error":
            lines.append(f"{m['name']}: failed to analyse: {m['error']}")
        for c in comment._checks(m):
            lines.append(f"{m['name']}: {c}")
    relative = [b for b in (*cfg.budgets, *(b for s in cfg.models for b in s.budgets)) if b.relative]
    if relative and not base:
        lines.append(f"{len(relative)} relative budget(s) skipped: pass --base REF to compare with a baseline")
    text = "\n".join(lines) if lines else "all budgets hold"
    return (EXIT_FAILED if d["status"] == "failure" else EXIT_OK), text


def cmd_budget(args: argparse.Namespace) -> int:
    code, text = check_budgets(args.config, base=args.base)
    print(text, file=sys.stderr if code else sys.stdout)
    return code


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("budget", help="fail when a configured budget is broken (the pre-commit hook)")
    p.add_argument("files", nargs="*", help="changed files (from pre-commit; every model is checked from the cache)")
    p.add_argument("--config", default=".ha-bot.yml", help="config file (default: .ha-bot.yml)")
    p.add_argument("--base", metavar="REF", help="also check relative budgets against the merge-base with REF")
    p.set_defaults(func=cmd_budget)
