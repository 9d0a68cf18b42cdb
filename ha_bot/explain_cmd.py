"""`ha-bot explain`: the pull-request narrative and the optimisation advice, at a terminal.

Input is a local diff (``--base``/``--head``, as ``ha-bot diff``) or a file (``--report``): a report
from ``ha-bot analyze --json`` (every model counts as new), a diff from ``ha-bot diff --json``, or
the pull-request report ``ha-bot action`` writes. Without an API key (``--api-key``, default
``$ANTHROPIC_API_KEY``) the narrative is the deterministic one. Exit codes as ``ha-bot``: 0 fine,
2 usage error (an unreadable file).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ha_bot.errors import HaBotError

if TYPE_CHECKING:  # narrate and advice load only when `explain` runs: `ha-bot card` stays fast
    from ha_bot.advice import Advice

AUDIENCES = ("engineer", "summary")

NARRATIVE_CACHE = os.path.join(".ha-bot-cache", "narratives")


class Loaded(NamedTuple):
    diff: dict[str, Any]
    head_report: dict[str, Any] | None
    counts: dict[str, Any]  # model name -> ModelCount, where the count cache has it
    targets: dict[str, Any] | None  # target id -> Target, when the real profiles are known
    narrative: dict[str, Any] = {}  # the config's `narrative:` settings (local diffs only)  # noqa: RUF012


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("explain", help="the narrative and optimisation advice for a local diff or a report")
    p.add_argument("--report", metavar="FILE", help="a report (`ha-bot analyze --json`), a diff (`ha-bot diff --json`) "
                                                    "or a pull-request report, instead of --base/--head")
    p.add_argument("--base", metavar="REF", help="base branch or commit, as `ha-bot diff`")
    p.add_argument("--head", metavar="REF", help="head commit (default: the working tree)")
    p.add_argument("--config", default=".ha-bot.yml", help="config file, relative to the repository (default: .ha-bot.yml)")
    p.add_argument("--cache-dir", metavar="DIR", help="count cache (default: .ha-bot-cache in the repository)")
    p.add_argument("--no-cache", action="store_true", help="analyse everything again; do not reuse a cached narrative")
    p.add_argument("--audience", choices=AUDIENCES, default="engineer", help="engineer (default) or summary (two plain sentences)")
    p.add_argument("--api-key", metavar="KEY", help="Anthropic API key (default: $ANTHROPIC_API_KEY; none: the deterministic narrative)")
    p.add_argument("--model", metavar="NAME", help="LLM model (default: $HA_BOT_LLM_MODEL or ha-bot's default)")
    p.add_argument("--advice-only", action="store_true", help="print the advice only: no narrative, no API call")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_explain)


def load_file(path: str) -> Loaded:
    from ha_bot import diff, report

    doc = report.load_report(path)
    kind = doc.get("kind")
    try:
        if kind == "ha-bot-diff":
            return Loaded(doc, None, {}, None)
        if kind == "ha-bot-pr-report":
            return Loaded(doc["diff"], doc.get("head_report"), {}, None)
        if kind is None and isinstance(doc.get("models"), list):
            return Loaded(diff.diff_reports(None, doc), doc, {}, None)
    except (KeyError, TypeError, ValueError) as e:
        raise HaBotError(f"{path}: not a ha-bot report or diff ({type(e).__name__}: {e})") from None
    raise HaBotError(f"{path}: not a ha-bot report or diff (kind {kind!r})")


def load_local(args: argparse.Namespace, say: Any) -> Loaded:
    from ha_bot import analyze, compare, gitutil
    from ha_bot.cache import DEFAULT_DIR, Cache

    result = compare.compare(os.getcwd(), base_ref=args.base, head_ref=args.head, config_path=args.config,
                             cache_dir=args.cache_dir, use_cache=not args.no_cache, progress=say)
    counts: dict[str, Any] = {}
    pool: dict[str, Any] | None = None
    if args.head is None and not args.no_cache:  # the head is the working tree: its counts are cached
        top = gitutil.toplevel(os.getcwd())
        cache = Cache(args.cache_dir or os.path.join(top, DEFAULT_DIR))
        for spec in result.config.models:
            c = cache.get(spec, top)
            if c is not None:
                counts[spec.name] = c
        try:
            pool = {t.id: t for t in analyze.select_targets(result.config)}
        except HaBotError:
            pool = None
    return Loaded(result.diff, result.head_report, counts, pool, dict(result.config.narrative))


def format_advice(advice: Mapping[str, Sequence[Advice]]) -> str:
    from ha_bot.advice import safe_name

    lines = []
    for name, items in sorted(advice.items()):
        if not items:
            continue
        lines.append(f"{safe_name(name)}:")
        lines += [f"  - [{a.rule}{' on ' + a.target if a.target else ''}] {a.message}" for a in items]
    return "\n".join(lines) if lines else "No advice: no rule applies."


def cmd_explain(args: argparse.Namespace) -> int:
    from ha_bot import narrate

    say = (lambda msg: print(f"ha-bot: {msg}", file=sys.stderr)) if not args.quiet else (lambda _msg: None)
    loaded = load_file(args.report) if args.report else load_local(args, say)
    advice = narrate.advice_for(loaded.diff, loaded.head_report, loaded.counts, loaded.targets)
    out = ["Advice (rule-based; effects estimated by the cost model):", format_advice(advice)]
    if not args.advice_only:
        key = args.api_key if args.api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        settings = dict(loaded.narrative)
        settings["model"] = args.model or os.environ.get("HA_BOT_LLM_MODEL") or settings.get("model") or narrate.DEFAULT_MODEL
        n = narrate.narrate(
            loaded.diff, api_key=key, audience=args.audience, **settings,
            cache_dir=None if args.no_cache else NARRATIVE_CACHE, advice_by_model=advice, log=say,
        )
        out = [f"Narrative ({n.source}):", n.text, *([f"({n.note})"] if n.note else []), "", *out]
    sys.stdout.write("\n".join(out) + "\n")
    return 0
