"""The `ha-bot` command line. Exit codes: 0 ok, 1 a model or check failed (or files were modified),
2 usage or configuration error, 3 unexpected bug, 130 interrupted."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ha_bot import __version__
from ha_bot.errors import HaBotError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _zero_config(model: str, inputs: Sequence[str], device: str) -> object:
    from ha_bot.config import Config, InputSpec, ModelSpec, parse_shape

    specs = tuple(InputSpec(parse_shape(s.split(":")[0]), s.split(":")[1] if ":" in s else "float32") for s in inputs)
    name = os.path.splitext(os.path.basename(model.split(":")[0]))[0] or "model"
    if model.endswith(".onnx"):
        spec = ModelSpec(name=name, onnx=os.path.abspath(model), inputs=specs)
    else:
        if ":" not in model:
            raise HaBotError(f"{model}: expected a model file `model.onnx`, or `path/to/file.py:function` / `package.module:function`")
        if not specs:
            raise HaBotError(f"{model}: a Python model needs its input shape, e.g. --input 1x3x224x224 (repeat for several inputs; add :int64 for token ids)")
        spec = ModelSpec(name=name, python=model, inputs=specs, device=device)
    return Config(path="", root=os.getcwd(), models=(spec,))


def cmd_analyze(args: argparse.Namespace) -> int:
    from ha_bot import analyze, config, render, report

    if args.model:
        cfg = _zero_config(args.model, args.input, args.device)
    else:
        cfg = config.load(args.config)
    chosen = analyze.select_targets(cfg, args.target, args.targets_file, calibration=args.calibration)  # type: ignore[arg-type]
    batches = args.batch or None
    progress = (lambda msg: print(f"ha-bot: {msg}", file=sys.stderr)) if not args.quiet else None
    doc = analyze.analyze(cfg, chosen, precision=args.precision, batches=batches, progress=progress, measure=args.measure)  # type: ignore[arg-type]
    if args.json:
        sys.stdout.write(report.dumps(doc))
    elif args.markdown:
        sys.stdout.write(render.report_markdown(doc))
    else:
        sys.stdout.write(render.report_text(doc))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(report.dumps(doc))
    return EXIT_FAILED if any(m["status"] != "ok" for m in doc["models"]) else EXIT_OK


def cmd_targets(args: argparse.Namespace) -> int:
    from ha_bot import targets

    pool = dict(targets.load_builtin())
    for path in args.targets_file:
        pool.update(targets.load_targets_file(path))
    if args.id:
        for t in targets.resolve(args.id, pool):
            print(targets.target_details(t))
        return EXIT_OK
    print(targets.targets_table(pool.values()))
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    import json

    from ha_bot import comment, compare

    progress = (lambda msg: print(f"ha-bot: {msg}", file=sys.stderr)) if not args.quiet else None
    result = compare.compare(
        os.getcwd(), base_ref=args.base, head_ref=args.head, config_path=args.config,
        cache_dir=args.cache_dir, use_cache=not args.no_cache, progress=progress,
    )
    d = result.diff
    if args.json:
        sys.stdout.write(json.dumps(d, sort_keys=True, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(comment.summary(d))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(json.dumps(d, sort_keys=True, indent=2, ensure_ascii=False) + "\n")
    if progress:
        progress(f"cache: {result.cache_hits} hit(s), {result.cache_misses} miss(es)")
    return EXIT_FAILED if d["status"] == "failure" else EXIT_OK


def cmd_action(args: argparse.Namespace) -> int:
    from ha_bot import action

    return action.run_action()


def cmd_publish(args: argparse.Namespace) -> int:
    from ha_bot import action

    return action.publish(args.report)


def _register(module: str, sub: argparse._SubParsersAction) -> None:
    """Subcommands that live in their own module add themselves (imported lazily, run only when used)."""
    import importlib

    try:
        mod = importlib.import_module(f"ha_bot.{module}")
    except ModuleNotFoundError as e:
        if e.name != f"ha_bot.{module}":
            raise
        return
    mod.register(sub)


def build_parser() -> argparse.ArgumentParser:
    from ha_bot.targets import PRECISIONS

    p = argparse.ArgumentParser(prog="ha-bot", description="What a model change costs on the hardware you ship to.")
    p.add_argument("--version", action="version", version=f"ha-bot {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser("analyze", help="count and estimate one model (zero config) or every configured model")
    a.add_argument("model", nargs="?", help="model.onnx, path/to/file.py:build or package.module:build (omit to use --config)")
    a.add_argument("--config", default=".ha-bot.yml", help="config file (default: .ha-bot.yml)")
    a.add_argument("--input", action="append", default=[], metavar="SHAPE[:DTYPE]", help="input shape for a Python model, e.g. 1x3x224x224 or 1x128:int64 (repeatable)")
    a.add_argument("--device", choices=("cpu", "meta"), default="cpu", help="build and trace on cpu, or on meta (no weight memory)")
    a.add_argument("--target", action="append", default=[], metavar="ID", help="hardware target id (repeatable; see `ha-bot targets`)")
    a.add_argument("--targets-file", action="append", default=[], metavar="FILE", help="YAML file with custom targets (repeatable)")
    a.add_argument("--precision", choices=PRECISIONS, help="override the configured precision")
    a.add_argument("--batch", action="append", type=int, default=[], metavar="N", help="batch size (repeatable)")
    fmt = a.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the versioned JSON report")
    fmt.add_argument("--markdown", action="store_true", help="print Markdown")
    a.add_argument("--calibration", metavar="FILE", help="a `ha-bot calibrate` file: targets without measured curves get curves derived from it")
    a.add_argument("--measure", choices=("onnxruntime", "torch"), help="also run each model on this machine and report the median latency and spread")
    a.add_argument("--output", "-o", metavar="FILE", help="also write the JSON report to FILE")
    a.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    a.set_defaults(func=cmd_analyze)

    d = sub.add_parser("diff", help="compare the merge-base of --base with --head (default: the working tree)")
    d.add_argument("--base", metavar="REF", help="base branch or commit (default: the PR base on Actions, else origin/HEAD, origin/main, main)")
    d.add_argument("--head", metavar="REF", help="head commit (default: the working tree, uncommitted changes included)")
    d.add_argument("--config", default=".ha-bot.yml", help="config file, relative to the repository (default: .ha-bot.yml)")
    dfmt = d.add_mutually_exclusive_group()
    dfmt.add_argument("--json", action="store_true", help="print the JSON diff")
    dfmt.add_argument("--markdown", action="store_true", help="print Markdown (the default)")
    d.add_argument("--output", "-o", metavar="FILE", help="also write the JSON diff to FILE")
    d.add_argument("--cache-dir", metavar="DIR", help="count cache (default: .ha-bot-cache in the repository)")
    d.add_argument("--no-cache", action="store_true", help="analyse everything again")
    d.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    d.set_defaults(func=cmd_diff)

    ac = sub.add_parser("action", help="the GitHub Action entrypoint (reads GITHUB_* and INPUT_* variables)")
    ac.set_defaults(func=cmd_action)
    pu = sub.add_parser("publish", help="post the comment and status from a report (the workflow_run half of the fork pattern)")
    pu.add_argument("--report", required=True, metavar="FILE", help="the report written by `ha-bot action` in the pull_request workflow")
    pu.set_defaults(func=cmd_publish)

    for module in ("card_cmd", "budget_cmd", "explain_cmd", "calibrate"):
        _register(module, sub)

    t = sub.add_parser("targets", help="list the built-in hardware targets, or show one with its sources")
    t.add_argument("id", nargs="*", help="show these targets in full")
    t.add_argument("--targets-file", action="append", default=[], metavar="FILE", help="include custom targets from FILE")
    t.set_defaults(func=cmd_targets)

    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except HaBotError as e:
        print(f"ha-bot: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("ha-bot: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `ha-bot targets | head`: the reader left; not an error
        sys.stderr.close()
        return EXIT_OK
    except Exception:  # a bug in ha-bot: the traceback helps us fix it
        import traceback

        traceback.print_exc()
        print(f"ha-bot: unexpected error (a bug; please report it with the traceback above), ha-bot {__version__}", file=sys.stderr)
        return EXIT_BUG


def entry() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    entry()
