"""``ha-bot card``: refresh, or ``--check``, the model cards named in the config. The card stage's file I/O.

Exit codes (pre-commit fixer convention): 0 nothing changed, 1 cards were written (or are stale under
``--check``, or a model failed), 2 a config, card or training-log error (raised as :class:`HaBotError`;
a bad card is left untouched and the error names its file and line). Writes are atomic and happen only
when the content changes, so a second run is a no-op.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TextIO

from ha_bot.card import CardError, update_card
from ha_bot.config import Config, ModelSpec
from ha_bot.errors import HaBotError


class CardResult(NamedTuple):
    model: str
    path: str  # the card as the config names it (relative to the config's folder, '/' separated)
    file: str  # absolute path
    old: str | None  # current text (None: no card yet)
    new: str | None  # refreshed text (None: not refreshed, see error)
    error: str | None  # why not
    bad_card: bool  # the error is a card/config/log problem (exit 2), not a failed model (exit 1)

    @property
    def stale(self) -> bool:
        return self.error is None and self.new is not None and self.new != self.old


class CardDiff(NamedTuple):
    model: str
    path: str
    diff: str  # unified diff of the refresh ("" when the card could not be refreshed)
    error: str | None


# ----------------------------------------------------------------------------- selection


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def _sources(spec: ModelSpec, root: str) -> set[str]:
    """Files whose change should refresh this model's card."""
    paths = [spec.card, spec.training_log, spec.onnx]
    if spec.python:
        ref = spec.python.rsplit(":", 1)[0]
        if ref.endswith(".py") or "/" in ref or os.sep in ref:
            paths.append(ref)
        else:
            mod = ref.replace(".", "/")
            paths += [f"{mod}.py", f"{mod}/__init__.py"]
    return {_real(os.path.join(root, p)) for p in paths if p}


def select_models(cfg: Config, files: Sequence[str] = ()) -> list[ModelSpec]:
    """Models with a ``card:``; with ``files``, only those a file concerns (the config or a target file: all)."""
    with_card = [m for m in cfg.models if m.card]
    if not files:
        return with_card
    given = {_real(f) for f in files}
    if given & {_real(p) for p in (cfg.path, *cfg.target_files) if p}:
        return with_card
    return [m for m in with_card if _sources(m, cfg.root) & given]


# ----------------------------------------------------------------------------- reading and writing


def _posix(path: str) -> str:
    return path.replace(os.sep, "/")


def _shown(file: str) -> str:
    """A path for messages: relative to the working directory when under it."""
    rel = os.path.relpath(file)
    return file if rel.startswith("..") else _posix(rel)


def read_card(file: str, shown: str) -> str | None:
    try:
        with open(file, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CardError(f"cannot read ({e.strerror})", file=shown) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CardError(f"not UTF-8 text ({e.reason} at byte {e.start})", file=shown,
                        line=data[: e.start].count(b"\n") + 1) from None


def write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8, bytes as given) in one step, keeping its permission bits."""
    path = os.path.realpath(path)  # a symlinked card: update its target, keep the link
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename durable where the platform allows it
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def unified_diff(old: str | None, new: str, path: str) -> str:
    """A git-style unified diff of one card ('\\ No newline at end of file' included)."""
    def lines(text: str) -> list[str]:
        parts = text.split("\n")
        return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])

    out = []
    for ln in difflib.unified_diff(lines(old or ""), lines(new), fromfile="/dev/null" if old is None else f"a/{path}",
                                   tofile=f"b/{path}"):
        out.append(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n")
    return "".join(out)


# ----------------------------------------------------------------------------- planning


def _training(spec: ModelSpec, cfg: Config, entry: Mapping[str, Any], logs: Mapping[str, str]) -> dict[str, Any] | None:
    from ha_bot import trainlog

    if spec.name in logs:
        file = os.path.abspath(logs[spec.name])
    elif spec.training_log:
        file = os.path.join(cfg.root, spec.training_log)
    else:
        return None
    summary = trainlog.load_log(file, name=_posix(os.path.relpath(file, cfg.root)))
    return trainlog.training_for(summary, entry.get("training") or [])


def _plan_one(spec: ModelSpec, cfg: Config, entry: Mapping[str, Any] | None, version: str,
              logs: Mapping[str, str]) -> CardResult:
    assert spec.card is not None
    path = _posix(os.path.normpath(spec.card))
    file = os.path.abspath(os.path.join(cfg.root, spec.card))
    shown = _shown(file)
    result = CardResult(spec.name, path, file, None, None, None, False)
    if entry is None:
        return result._replace(error=f"{spec.name}: not in the report, so its card {shown} was not refreshed")
    if entry.get("status") != "ok":
        return result._replace(error=f"{spec.name}: analysis failed, card {shown} not refreshed: {entry.get('error')}")
    try:
        old = read_card(file, shown)
        training = _training(spec, cfg, entry, logs)
        new = update_card(old, entry, version=version, training=training, path=shown)
    except HaBotError as e:
        return result._replace(error=str(e), bad_card=True)
    return result._replace(old=old, new=new)


def plan_cards(cfg: Config, report_doc: Mapping[str, Any], *, files: Sequence[str] = (),
               training_logs: Mapping[str, str] | None = None) -> list[CardResult]:
    """What refreshing each selected card from ``report_doc`` would give; reads, never writes."""
    entries = {m["name"]: m for m in report_doc.get("models", [])}
    version = str((report_doc.get("tool") or {}).get("version", ""))
    return [_plan_one(spec, cfg, entries.get(spec.name), version, training_logs or {})
            for spec in select_models(cfg, files)]


def card_diffs(cfg: Config, report_doc: Mapping[str, Any], *, files: Sequence[str] = (),
               training_logs: Mapping[str, str] | None = None) -> list[CardDiff]:
    """The unified diff of every stale card, and every card that could not be refreshed (for the PR comment)."""
    out = []
    for r in plan_cards(cfg, report_doc, files=files, training_logs=training_logs):
        if r.stale:
            assert r.new is not None
            out.append(CardDiff(r.model, r.path, unified_diff(r.old, r.new, r.path), None))
        elif r.error:
            out.append(CardDiff(r.model, r.path, "", r.error))
    return out


def run_cards(cfg: Config, report_doc: Mapping[str, Any], *, files: Sequence[str] = (), check: bool = False,
              out: TextIO = sys.stdout, training_logs: Mapping[str, str] | None = None) -> int:
    """Refresh (or with ``check``, diff) the cards from an existing report. Returns the exit code;
    raises :class:`CardError` after the other cards are done when a card, config or log is bad."""
    results = plan_cards(cfg, report_doc, files=files, training_logs=training_logs)
    rc = 0
    for r in results:
        shown = _shown(r.file)
        if r.error and not r.bad_card:
            out.write(f"ha-bot: {r.error}\n")
            rc = 1
        elif r.stale and check:
            assert r.new is not None
            out.write(unified_diff(r.old, r.new, r.path))
            out.write(f"ha-bot: {shown} is out of date; run `ha-bot card` (or the pre-commit hook) and commit it\n")
            rc = 1
        elif r.stale:
            assert r.new is not None
            write_atomic(r.file, r.new)
            out.write(f"ha-bot: {'created' if r.old is None else 'updated'} {shown}\n")
            rc = 1
    bad = [r.error for r in results if r.bad_card and r.error]
    if bad:
        raise HaBotError(bad[0] if len(bad) == 1 else "\n".join(_lines(bad)))
    return rc


def _lines(errors: Iterable[str]) -> list[str]:
    items = list(errors)
    return [f"{len(items)} cards could not be refreshed (left untouched):", *[f"  {e}" for e in items]]


# ----------------------------------------------------------------------------- the command


def cmd_card(args: argparse.Namespace) -> int:
    import dataclasses

    from ha_bot import analyze, config, report

    cfg = config.load(args.config)
    specs = select_models(cfg, args.files)
    if not specs:
        return 0  # nothing the given files concern: the hook stays fast
    logs: dict[str, str] = {}
    if args.training_log:
        if len(specs) != 1:
            raise HaBotError(f"--training-log needs exactly one model, but {len(specs)} have cards "
                             f"({', '.join(s.name for s in specs)}); pass that model's card or source file too")
        logs[specs[0].name] = args.training_log
    if args.report:
        doc = report.load_report(args.report)
    else:
        from ha_bot.cache import Cache

        sub = dataclasses.replace(cfg, models=tuple(specs))
        progress = None if args.quiet else (lambda msg: print(f"ha-bot: {msg}", file=sys.stderr))
        counter = analyze.cached_counter(Cache(os.path.join(cfg.root, ".ha-bot-cache")))
        doc = analyze.analyze(sub, analyze.select_targets(sub), progress=progress, counter=counter)
    return run_cards(cfg, doc, files=args.files, check=args.check, out=sys.stdout, training_logs=logs)


def register(subparsers: Any) -> None:
    """Add the ``card`` subcommand to ``ha-bot``'s subparsers."""
    p = subparsers.add_parser(
        "card", help="refresh the model cards of the configured models (or --check them)",
        description="Refresh the `hardware:` front-matter key and the ha-bot section of each configured model card. "
                    "Exit 0: nothing changed; 1: cards written, stale (--check) or a model failed; 2: a config, "
                    "card or training-log error.",
    )
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="only models these files concern (a card, a model source, a training log, or the config); "
                        "default: every model with `card:`")
    p.add_argument("--config", default=".ha-bot.yml", help="config file (default: .ha-bot.yml)")
    p.add_argument("--check", action="store_true", help="write nothing; print the diff and exit 1 if a card is stale")
    p.add_argument("--training-log", metavar="FILE",
                   help="a training log (JSON Lines or CSV) for the one selected model (overrides `training_log:`)")
    p.add_argument("--report", metavar="REPORT.json", help="use this ha-bot JSON report instead of analysing the models")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_card)
