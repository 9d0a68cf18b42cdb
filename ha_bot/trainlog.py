"""Structured training logs -> a :class:`TrainingSummary`, compared with ha-bot's training-step estimate.

Reads JSON Lines (one object per line; nested objects are flattened with ``/``), a JSON array of
objects, a Hugging Face ``trainer_state.json`` (its ``log_history``) and CSV/TSV with a header row.
TensorBoard event files are not read (that needs tensorboard's protobufs): export the scalars to CSV.

Liberal in key names (``step``/``global_step``/``_step``, ``samples_per_sec``/``throughput``,
``max_memory_allocated``/``gpu_mem_gb``, ``device``/``gpu_name``, ...), precise in what is reported:
units come from the key name or the value ("3.2G"), a quantity whose unit cannot be told is left out
with a note, and every derived number says how it was derived. Only :func:`load_log` reads a file.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from itertools import pairwise
from typing import Any, NamedTuple

from ha_bot.errors import HaBotError

DIVERGENCE_FACTOR = 3.0  # smoothed loss this many times above its running minimum ...
DIVERGENCE_RECORDS = 3  # ... for this many records in a row
STEP_GAP_FACTOR = 5.0  # a step jump this many times the usual logging interval
TIME_GAP_FACTOR = 10.0  # a pause between records this many times the usual one ...
TIME_GAP_MIN_S = 60.0  # ... and at least this long

OOM = re.compile(r"out of memory|\boom\b|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|RESOURCE_EXHAUSTED|"
                 r"failed to allocate", re.IGNORECASE)


class Failure(NamedTuple):
    kind: str  # oom | nan | divergence | gap | restart
    line: int | None  # line of the log where it shows
    step: float | None  # training step (the last one logged at or before that line)
    message: str


class TrainingSummary(NamedTuple):
    path: str  # the log, as named to the user
    format: str  # jsonl | json | csv
    rows: int  # records read
    steps: int | None  # last training step logged
    epochs: float | None  # last epoch logged
    final: dict[str, float]  # metric -> last logged value (NaN stays NaN)
    best: dict[str, float]  # metric -> best finite value (min for loss-like names, max for accuracy-like)
    step_time_s: float | None  # median seconds per training step
    samples_per_s: float | None  # median samples (examples, images) per second
    tokens_per_s: float | None  # median tokens per second
    peak_memory_bytes: float | None
    hardware: str | None  # device name as logged
    batch_size: int | None  # as logged
    wall_time_s: float | None  # first to last record (or the largest elapsed time logged)
    failures: tuple[Failure, ...]
    notes: tuple[str, ...]


class _Record(NamedTuple):
    line: int
    num: dict[str, float]
    text: dict[str, str]


# ----------------------------------------------------------------------------- key names

_STEP = re.compile(r"(global_step|_?step|steps|iteration|iter|iters|it|num_updates|updates)")
_EPOCH = re.compile(r"_?epochs?")
_STEP_TIME = re.compile(r".*(step_time|time_per_step|time_per_iter|iter_time|iteration_time|batch_time|sec_per_step|"
                        r"s_per_step|secs?_per_iter|s_per_iter|step_s|step_duration|s/it)(_ms|_s|\(ms\)|\(s\))?")
_STEPS_PER_S = re.compile(r".*(steps_per_s(ec(ond)?)?|it/s|iters?_per_s(ec(ond)?)?|its_per_s(ec)?).*")
_TOKENS_PER_S = re.compile(r".*(tok(en)?s?_per_s(ec(ond)?)?|tok(en)?s?/s(ec)?|\btps\b).*")
_SAMPLES_PER_S = re.compile(r".*((samples?|examples?|images?|imgs?|seqs?|sequences?)(_per_s(ec(ond)?)?|/s(ec)?)|"
                            r"throughput|\bsps\b).*")
_CLOCK = re.compile(r"(time|elapsed|elapsed_s|elapsed_sec|elapsed_time|time_elapsed|wall_time|walltime|wall|"
                    r"timestamp|_timestamp|_runtime|runtime|train_runtime|time_s)(_ms)?")
_EVAL = re.compile(r"(^|[^a-z])(eval|evaluation|val|valid|validation|test)([^a-z]|$)")
_MEMORY = re.compile(r".*(mem|memory).*")
_NOT_MEMORY = re.compile(r"(pct|percent|util|frac|ratio|%)")
_LR = re.compile(r"(.*[_/])?(lr|learning_rate)([_/].*)?")
_BATCH = re.compile(r"(.*[_/])?(batch_size|batchsize|bs)")
_HARDWARE = re.compile(r"(device|device_name|gpu|gpu_name|gpu_type|gpus|hardware|accelerator)")
_GENERIC_DEVICE = re.compile(r"(cuda|cpu|mps|gpu|xla|tpu|npu|hpu)(:\d+)?", re.IGNORECASE)

_MIN_WORDS = ("loss", "perplexity", "ppl", "error")
_MIN_TOKENS = frozenset("err mse mae rmse wer cer nll bpd fid bpb".split())
_MAX_WORDS = ("acc",)
_MAX_TOKENS = frozenset("f1 auc auroc map iou miou dice bleu rouge top1 top5 r2 psnr ssim precision recall score".split())


def _leaf(key: str) -> str:
    return re.split(r"[/.]", key.lower())[-1].strip()


def kind_of(key: str) -> str:
    """What a log key holds: step, epoch, step_time, steps_per_s, tokens_per_s, samples_per_s, clock,
    memory, lr, batch, hardware, or metric."""
    k, leaf = key.lower().strip(), _leaf(key)
    evaluation = bool(_EVAL.search(k))  # eval throughput and runtime are not the training run's
    for name, rx in (("step_time", _STEP_TIME), ("steps_per_s", _STEPS_PER_S), ("tokens_per_s", _TOKENS_PER_S),
                     ("samples_per_s", _SAMPLES_PER_S)):
        if rx.fullmatch(k):  # before the leaf tests: "s/it" is not an `it` counter
            return "metric" if evaluation else name
    if _STEP.fullmatch(leaf):
        return "step"
    if _EPOCH.fullmatch(leaf):
        return "epoch"
    if _CLOCK.fullmatch(leaf):
        return "clock"
    if _LR.fullmatch(k):
        return "lr"
    if _MEMORY.fullmatch(k) and not _NOT_MEMORY.search(k):
        return "memory"
    if _BATCH.fullmatch(k):
        return "batch"
    if _HARDWARE.fullmatch(leaf):
        return "hardware"
    return "metric"


def direction(key: str) -> str | None:
    """'min' for loss-like metric names, 'max' for accuracy-like ones, None when it cannot be told."""
    k = key.lower()
    tokens = set(re.split(r"[^a-z0-9]+", k))
    if any(w in k for w in _MIN_WORDS) or tokens & _MIN_TOKENS:
        return "min"
    if any(w in k for w in _MAX_WORDS) or tokens & _MAX_TOKENS:
        return "max"
    return None


def _is_loss(key: str) -> bool:
    k = key.lower()
    return "loss" in k or "perplexity" in k or "ppl" in set(re.split(r"[^a-z0-9]+", k))


def _time_scale(key: str) -> float:
    return 1e-3 if re.search(r"(^|[_\s(/])ms\)?$", key.lower()) else 1.0


_MEM_UNITS = {"b": 1, "bytes": 1, "k": 1e3, "kb": 1e3, "kib": 2**10, "m": 1e6, "mb": 1e6, "mib": 2**20,
              "g": 1e9, "gb": 1e9, "gib": 2**30, "t": 1e12, "tb": 1e12, "tib": 2**40}


def _mem_key_scale(key: str) -> float | None:
    m = re.search(r"[_\s(\[/](bytes|b|kib|kb|mib|mb|gib|gb|tib|tb)[)\]]?$", key.lower())
    return float(_MEM_UNITS[m.group(1)]) if m else None


def _mem_text(value: str) -> float | None:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(bytes|b|kib|kb|k|mib|mb|m|gib|gb|g|tib|tb|t)\s*", value.lower())
    return float(m.group(1)) * _MEM_UNITS[m.group(2)] if m else None


# ----------------------------------------------------------------------------- reading


def _flatten(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}/{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


def _record(line: int, obj: Mapping[str, Any]) -> _Record:
    num: dict[str, float] = {}
    text: dict[str, str] = {}
    for k, v in _flatten(obj).items():
        if isinstance(v, bool):
            if v and OOM.search(k):
                text[k] = f"{k}: true"
        elif isinstance(v, (int, float)):
            num[k] = float(v)
        elif isinstance(v, str) and v.strip():
            try:
                num[k] = float(v)
            except ValueError:
                text[k] = v
    return _Record(line, num, text)


def _bad(name: str, line: int, why: str) -> HaBotError:
    return HaBotError(f"{name}:{line}: {why}")


def _read_jsonl(text: str, name: str) -> tuple[list[_Record], list[str]]:
    records: list[_Record] = []
    notes: list[str] = []
    bad: list[tuple[int, str, bool]] = []  # line, why, could be a truncated write
    numbered = [(i + 1, ln) for i, ln in enumerate(text.split("\n")) if ln.strip()]
    for n, ln in numbered:
        try:
            obj = json.loads(ln)
        except ValueError as e:
            if OOM.search(ln):  # a plain-text crash message mixed into the log
                records.append(_Record(n, {}, {"message": ln.strip()}))
            else:
                bad.append((n, f"not valid JSON ({e})", True))
            continue
        if not isinstance(obj, Mapping):
            bad.append((n, f"expected a JSON object, got {type(obj).__name__}", False))
            continue
        records.append(_record(n, obj))
    if bad and bad[-1][0] == numbered[-1][0] and bad[-1][2]:
        n = bad.pop()[0]
        notes.append(f"line {n}: truncated last record ignored (was the run killed?)")
    if bad:
        n, why, _ = bad[0]
        raise _bad(name, n, f"{why}; ha-bot reads JSON Lines: one JSON object per line")
    return records, notes


def _read_json(doc: Any, name: str) -> list[_Record]:
    items = doc.get("log_history") if isinstance(doc, Mapping) else doc
    if not isinstance(items, list):
        raise HaBotError(f"{name}: expected JSON Lines, a JSON array of objects or a trainer_state.json")
    out = []
    for i, obj in enumerate(items):
        if not isinstance(obj, Mapping):
            raise HaBotError(f"{name}: record {i + 1} is a {type(obj).__name__}, expected an object")
        out.append(_record(0, obj))  # a JSON document: records have no line of their own
    return out


def _read_csv(text: str, name: str, delimiter: str) -> tuple[list[_Record], list[str]]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows: list[tuple[int, list[str]]] = []
    try:
        for row in reader:
            if any(c.strip() for c in row):
                rows.append((reader.line_num, row))
    except csv.Error as e:
        raise _bad(name, reader.line_num, f"unreadable CSV ({e})") from None
    if not rows:
        return [], ["the log is empty"]
    header = [h.strip() for h in rows[0][1]]
    records, notes = [], []
    for k, (n, row) in enumerate(rows[1:], start=1):
        if len(row) != len(header):
            if k == len(rows) - 1 and len(row) < len(header):
                notes.append(f"line {n}: truncated last row ignored (was the run killed?)")
                continue
            raise _bad(name, n, f"{len(row)} fields where the header (line {rows[0][0]}) has {len(header)}")
        records.append(_record(n, {h: c for h, c in zip(header, row, strict=True) if h}))
    return records, notes


def parse_log(text: str, *, name: str = "<log>") -> TrainingSummary:
    """Summarise a training log given as text (``name`` is used in messages and the card)."""
    low = name.lower()
    if "tfevents" in os.path.basename(low):
        raise HaBotError(f"{name}: TensorBoard event files are not read (that needs tensorboard); export the "
                         "scalars as CSV or log JSON Lines")
    text = text.removeprefix("\ufeff")
    head = text.lstrip()
    notes: list[str] = []
    if low.endswith((".csv", ".tsv")) or (head and head[0] not in "{[" and not low.endswith((".jsonl", ".ndjson", ".json"))):
        first = head.split("\n", 1)[0]
        delimiter = "\t" if low.endswith(".tsv") or ("\t" in first and "," not in first) else ","
        records, notes = _read_csv(text, name, delimiter)
        fmt = "csv"
    elif head.startswith("[") or (head.startswith("{") and '"log_history"' in text[:2_000_000] and _whole_json(text)):
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise HaBotError(f"{name}: not valid JSON ({e})") from None
        records, fmt = _read_json(doc, name), "json"
    else:
        records, notes = _read_jsonl(text, name)
        fmt = "jsonl"
    return summarize(records, name=name, fmt=fmt, notes=notes)


def _whole_json(text: str) -> bool:
    try:
        return isinstance(json.loads(text), Mapping)
    except ValueError:
        return False


def load_log(path: str, *, name: str | None = None) -> TrainingSummary:
    """Read and summarise the training log at ``path``."""
    shown = name or path
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except FileNotFoundError:
        raise HaBotError(f"{shown}: training log not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise HaBotError(f"{shown}: cannot read the training log ({e})") from None
    return parse_log(text, name=shown)


# ----------------------------------------------------------------------------- summarising


def _median(xs: Iterable[float]) -> float | None:
    vals = [x for x in xs if math.isfinite(x) and x > 0]
    return statistics.median(vals) if vals else None


def _steps(records: Sequence[_Record]) -> list[float | None]:
    """The step each record belongs to: its own, else the last one logged before it."""
    out, last = [], None
    for r in records:
        for k, v in r.num.items():
            if kind_of(k) == "step" and math.isfinite(v):
                last = v
                break
        out.append(last)
    return out


def _series(records: Sequence[_Record], kind: str) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for i, r in enumerate(records):
        for k, v in r.num.items():
            if kind_of(k) == kind:
                out.setdefault(k, []).append((i, v))
    return out


def _fmt_step(step: float | None) -> str:
    return "" if step is None or not math.isfinite(step) else f"step {_n(step)}"


def _where(records: Sequence[_Record], steps: Sequence[float | None], i: int) -> str:
    s = _fmt_step(steps[i])
    at = f"line {records[i].line}" if records[i].line else f"record {i + 1}"
    return f"{s} ({at})" if s else at


def _metrics(records: Sequence[_Record]) -> tuple[dict[str, float], dict[str, float]]:
    final: dict[str, float] = {}
    best: dict[str, float] = {}
    for key, vals in sorted(_series(records, "metric").items()):
        final[key] = vals[-1][1]
        finite = [v for _, v in vals if math.isfinite(v)]
        d = direction(key)
        if finite and d:
            best[key] = min(finite) if d == "min" else max(finite)
    return final, best


def _nan_failures(records: Sequence[_Record], steps: Sequence[float | None]) -> list[Failure]:
    out = []
    for key, vals in sorted(_series(records, "metric").items()):
        if not _is_loss(key):
            continue
        for i, v in vals:
            if not math.isfinite(v):
                out.append(Failure("nan", records[i].line or None, steps[i],
                                   f"{key} is {v} at {_where(records, steps, i)}: the first non-finite value"))
                break
    return out


def _divergence(records: Sequence[_Record], steps: Sequence[float | None]) -> list[Failure]:
    out = []
    for key, vals in sorted(_series(records, "metric").items()):
        if not _is_loss(key):
            continue
        window: list[float] = []
        low, streak, first = math.inf, 0, 0
        for i, v in vals:
            if not math.isfinite(v):
                continue
            window = [*window[-4:], v]
            smooth = statistics.median(window)
            if 0 < low < math.inf and smooth > DIVERGENCE_FACTOR * low:
                streak += 1
                first = i if streak == 1 else first
                if streak >= DIVERGENCE_RECORDS:
                    out.append(Failure("divergence", records[first].line or None, steps[first],
                                       f"{key} rose above {DIVERGENCE_FACTOR:g}x its running minimum ({low:.4g}) from "
                                       f"{_where(records, steps, first)} on: the run diverged"))
                    break
            else:
                streak = 0
            low = min(low, smooth)
    return out


def _oom(records: Sequence[_Record], steps: Sequence[float | None]) -> list[Failure]:
    hits = [(i, msg) for i, r in enumerate(records) for msg in r.text.values() if OOM.search(msg)]
    if not hits:
        return []
    i, msg = hits[0]
    more = f" ({len(hits)} records mention it)" if len(hits) > 1 else ""
    snippet = " ".join(msg.split())[:160]
    return [Failure("oom", records[i].line or None, steps[i], f"out of memory at {_where(records, steps, i)}{more}: {snippet}")]


def _step_gaps(records: Sequence[_Record]) -> list[Failure]:
    own = [(i, v) for i, r in enumerate(records) for k, v in r.num.items() if kind_of(k) == "step" and math.isfinite(v)]
    pairs = list(pairwise(own))
    usual = _median(b[1] - a[1] for a, b in pairs)
    out = []
    for (_, sa), (ib, sb) in pairs:
        line = records[ib].line or None
        if sb < sa:
            out.append(Failure("restart", line, sb, f"step went back from {_n(sa)} to {_n(sb)} at "
                                                    f"{_where(records, [None] * len(records), ib)} "
                                                    "(restarted or resumed run?)"))
        elif usual and sb - sa > STEP_GAP_FACTOR * usual:
            out.append(Failure("gap", line, sb, f"no record from step {_n(sa)} to {_n(sb)} at "
                                                f"{_where(records, [None] * len(records), ib)} "
                                                f"(the log usually has one every {_n(usual)} steps)"))
    return out


def _n(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:.6g}"


def _clock(records: Sequence[_Record]) -> tuple[str, list[tuple[int, float]]] | None:
    """The first monotonic clock series (seconds): timestamps, or time elapsed since the start."""
    series = _series(records, "clock")
    for i, r in enumerate(records):
        for k, v in r.text.items():
            if kind_of(k) == "clock":
                try:
                    series.setdefault(k, []).append((i, datetime.fromisoformat(v.strip()).timestamp()))
                except ValueError:
                    pass
    for key, vals in series.items():
        vals = [(i, v * _time_scale(key)) for i, v in vals if math.isfinite(v)]
        if vals and all(b[1] >= a[1] for a, b in pairwise(vals)):
            return key, vals
    return None


def _time_gaps(records: Sequence[_Record], steps: Sequence[float | None], clock: Sequence[tuple[int, float]]) -> list[Failure]:
    dts = [(b[0], b[1] - a[1]) for a, b in pairwise(clock)]
    usual = _median(dt for _, dt in dts)
    out = []
    for i, dt in dts:
        if usual and dt > TIME_GAP_FACTOR * usual and dt >= TIME_GAP_MIN_S:
            out.append(Failure("gap", records[i].line or None, steps[i],
                               f"{dt:.0f} s without a record before {_where(records, steps, i)} "
                               f"(records usually come every {usual:.3g} s): a stall, pause or resume"))
    return out


def _memory(records: Sequence[_Record], notes: list[str]) -> float | None:
    peak: float | None = None
    unitless: set[str] = set()
    for r in records:
        values: list[tuple[str, float | None]] = []
        for k, v in r.num.items():
            if kind_of(k) == "memory" and math.isfinite(v):
                scale = _mem_key_scale(k)
                values.append((k, v * scale if scale else (v if v >= 2**20 else None)))
        values += [(k, _mem_text(v)) for k, v in r.text.items() if kind_of(k) == "memory"]
        for k, b in values:
            if b is None:
                unitless.add(k)
            elif peak is None or b > peak:
                peak = b
    for k in sorted(unitless):
        notes.append(f"`{k}` has values without a unit (name it like `{k}_gb` or log bytes); not used for peak memory")
    return peak


def _hardware(records: Sequence[_Record], notes: list[str]) -> str | None:
    names: list[str] = []
    for r in records:
        for k, v in r.text.items():
            if kind_of(k) == "hardware" and v.strip() not in names:
                names.append(v.strip())
    specific = [n for n in names if not _GENERIC_DEVICE.fullmatch(n)] or names
    if len(specific) > 1:
        notes.append(f"several devices logged ({', '.join(specific)}); using the first")
    return specific[0] if specific else None


def _last(records: Sequence[_Record], kind: str) -> float | None:
    vals = [v for vs in _series(records, kind).values() for _, v in vs if math.isfinite(v)]
    return vals[-1] if vals else None


def _step_time(records: Sequence[_Record], steps: Sequence[float | None], clock: tuple[str, list[tuple[int, float]]] | None,
               notes: list[str]) -> float | None:
    explicit = [v * _time_scale(k) for k, vs in _series(records, "step_time").items() for _, v in vs]
    if _median(explicit):
        return _median(explicit)
    rates = _median(v for vs in _series(records, "steps_per_s").values() for _, v in vs)
    if rates:
        return 1.0 / rates
    if clock is None:
        return None
    key, vals = clock
    per_step = []
    for (ia, ta), (ib, tb) in pairwise(vals):
        sa, sb = steps[ia], steps[ib]
        if sa is not None and sb is not None and sb > sa and tb > ta:
            per_step.append((tb - ta) / (sb - sa))
    if per_step:
        notes.append(f"step time derived from `{key}` and the logged steps")
    return _median(per_step)


def summarize(records: Sequence[_Record], *, name: str, fmt: str, notes: Sequence[str] = ()) -> TrainingSummary:
    notes_out = list(notes)
    steps = _steps(records)
    times = [v for _, v in _series(records, "clock").get("time", [])]
    if any(b < a for a, b in pairwise(times)):  # mmdetection-style `time`: seconds per iteration
        notes_out.append("`time` is not monotonic: read as seconds per step")
        records = [r._replace(num={("time_per_step" if k == "time" else k): v for k, v in r.num.items()}) for r in records]
    clock = _clock(records)
    final, best = _metrics(records)
    step_time = _step_time(records, steps, clock, notes_out)
    samples = _median(v for vs in _series(records, "samples_per_s").values() for _, v in vs)
    batch = _last(records, "batch")
    if samples is None and batch and step_time:
        samples = batch / step_time
        notes_out.append("samples/s derived from the logged batch size and step time")
    wall = None
    if clock is not None:
        vals = [v for _, v in clock[1]]
        if vals[0] <= 1e8:  # time elapsed since the start
            wall = vals[-1]
        elif len(vals) > 1:  # timestamps
            wall = vals[-1] - vals[0]
    failures = (_oom(records, steps) + _nan_failures(records, steps) + _divergence(records, steps)
                + _step_gaps(records) + (_time_gaps(records, steps, clock[1]) if clock else []))
    failures.sort(key=lambda f: (f.line or 0, -math.inf if f.step is None else f.step, f.kind))
    step_vals = [s for s in steps if s is not None]
    epochs = _series(records, "epoch")
    return TrainingSummary(
        path=name,
        format=fmt,
        rows=len(records),
        steps=int(max(step_vals)) if step_vals else None,
        epochs=max((v for vs in epochs.values() for _, v in vs if math.isfinite(v)), default=None),
        final=final,
        best=best,
        step_time_s=step_time,
        samples_per_s=samples,
        tokens_per_s=_median(v for vs in _series(records, "tokens_per_s").values() for _, v in vs),
        peak_memory_bytes=_memory(records, notes_out),
        hardware=_hardware(records, notes_out),
        batch_size=int(batch) if batch else None,
        wall_time_s=wall,
        failures=tuple(failures),
        notes=tuple(notes_out),
    )


# ----------------------------------------------------------------------------- against the estimate


def _sig(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else float(f"{x:.{digits}g}")


def _ratio(measured: float | None, estimated: float | None) -> float | None:
    return _sig(measured / estimated) if measured and estimated else None


def compare_with_estimate(summary: TrainingSummary, training_estimate: Mapping[str, Any] | None) -> dict[str, Any]:
    """Measured vs estimated step time, throughput and memory; ratios are measured / estimated."""
    est = training_estimate
    out: dict[str, Any] = {
        "target": None, "batch": None, "precision": None, "optimizer": None,
        "measured_step_s": summary.step_time_s, "estimated_step_s": None, "step_ratio": None,
        "measured_samples_per_s": summary.samples_per_s, "estimated_samples_per_s": None, "throughput_ratio": None,
        "measured_memory_bytes": summary.peak_memory_bytes, "estimated_memory_bytes": None, "memory_ratio": None,
        "notes": [],
    }
    if not est:
        out["notes"].append("no training estimate to compare with")
        return out
    batch, step = est.get("batch"), est.get("step_s")
    out.update(target=est.get("target"), batch=batch, precision=est.get("precision"), optimizer=est.get("optimizer"),
               estimated_step_s=step, estimated_memory_bytes=est.get("memory_bytes"),
               estimated_samples_per_s=batch / step if batch and step else None)
    same_batch = summary.batch_size in (None, batch)
    if summary.batch_size is None:
        out["notes"].append(f"batch size not logged: assumed to be the estimate's batch {batch}")
    elif not same_batch:
        out["notes"].append(f"logged batch size {summary.batch_size} differs from the estimate's batch {batch}: "
                            "step time and memory are not compared; throughput is (it also grows with batch)")
    if same_batch:
        out["step_ratio"] = _ratio(summary.step_time_s, step)
        out["memory_ratio"] = _ratio(summary.peak_memory_bytes, est.get("memory_bytes"))
    out["throughput_ratio"] = _ratio(summary.samples_per_s, out["estimated_samples_per_s"])
    return out


_VENDOR_WORDS = frozenset("nvidia amd intel google arm apple qualcomm gpu cpu tpu npu cuda sxm pcie the".split())


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", name.lower()) if t and t not in _VENDOR_WORDS}


def _model_number(token: str) -> bool:
    """'h100', 'a76', 't4', '4090': a token that names a part (a bare '0' from 'cuda:0' does not)."""
    return bool(re.search(r"[0-9]", token)) and (bool(re.search(r"[a-z]", token)) or len(token) >= 3)


def pick_estimate(hardware: str | None, items: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any] | None, str]:
    """The training estimate whose target matches the logged hardware name, and a note saying how it was picked."""
    if not items:
        return None, "the report has no training estimate for this model"
    if not hardware:
        if len(items) == 1:
            return items[0], f"hardware not logged; compared with the only target, {items[0]['target']}"
        return None, "hardware not logged, so the run is not compared with a target (log `gpu_name` or `device`)"
    hw = _tokens(hardware)
    scored: list[tuple[int, int, Mapping[str, Any]]] = []
    for t in items:
        shared = hw & _tokens(str(t["target"]))
        numbers = [s for s in shared if _model_number(s)]
        if numbers or len(shared) >= 2:
            scored.append((-(10 * len(numbers) + len(shared)), len(scored), t))
    if not scored:
        return None, f"logged hardware {hardware!r} matches no configured target"
    scored.sort(key=lambda s: (s[0], s[1]))
    best = scored[0][2]
    return best, f"logged hardware {hardware!r} compared with target {best['target']}"


def training_for(summary: TrainingSummary, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``training`` argument of :func:`ha_bot.card.update_card` for a summary and a report's training items."""
    est, how = pick_estimate(summary.hardware, items)
    comparison = compare_with_estimate(summary, est)
    comparison["notes"].insert(0, how)
    return {"summary": summary, "comparison": comparison}


def training_data(summary: TrainingSummary, comparison: Mapping[str, Any] | None) -> dict[str, Any]:
    """Machine-readable facts of the run for the card's ``hardware:`` key (3 significant digits)."""
    data: dict[str, Any] = {
        "log": summary.path,
        "hardware": summary.hardware,
        "steps": summary.steps,
        "step_s": _sig(summary.step_time_s),
        "samples_per_s": _sig(summary.samples_per_s),
        "tokens_per_s": _sig(summary.tokens_per_s),
        "peak_memory_bytes": None if summary.peak_memory_bytes is None else int(_sig(summary.peak_memory_bytes) or 0),
        "wall_time_s": _sig(summary.wall_time_s),
        "failures": sorted({f.kind for f in summary.failures}),
    }
    if comparison and comparison.get("target"):
        data["vs_estimate"] = {k: comparison.get(k) for k in
                               ("target", "batch", "step_ratio", "throughput_ratio", "memory_ratio")}
    return data


def render_training(summary: TrainingSummary, comparison: Mapping[str, Any] | None) -> str:
    """The card's "Training run" subsection (Markdown, LF line endings)."""
    from ha_bot.render import esc, fmt_bytes, fmt_count, fmt_time, md_table

    facts = [f"{summary.rows} records"]
    if summary.steps is not None:
        facts.append(f"{summary.steps} steps")
    if summary.epochs is not None:
        facts.append(f"{summary.epochs:.3g} epochs")
    if summary.wall_time_s is not None:
        facts.append(f"wall time {fmt_time(summary.wall_time_s)}")
    on = f" on {esc(summary.hardware)}" if summary.hardware else " (hardware not logged)"
    parts = ["### Training run (measured)", "", f"From {esc(summary.path)}: {', '.join(facts)}{on}."]
    if summary.final:
        rows = [[esc(k), _fmt_metric(v), _fmt_metric(summary.best.get(k))] for k, v in summary.final.items()]
        more = len(rows) - 20
        parts += ["", md_table(["metric", "final", "best"], rows[:20])]
        if more > 0:
            parts.append(f"\n... and {more} more metrics.")
    c = comparison or {}
    rows = [
        ["step time", fmt_time(summary.step_time_s), fmt_time(c.get("estimated_step_s")), _fmt_ratio(c.get("step_ratio"))],
        ["throughput", _per_s(summary.samples_per_s, fmt_count), _per_s(c.get("estimated_samples_per_s"), fmt_count),
         _fmt_ratio(c.get("throughput_ratio"))],
        ["peak memory", fmt_bytes(summary.peak_memory_bytes), fmt_bytes(c.get("estimated_memory_bytes")),
         _fmt_ratio(c.get("memory_ratio"))],
    ]
    if c.get("target"):
        est = f"estimate ({esc(c['target'])}, batch {c['batch']}, {esc(c.get('precision'))}, {esc(c.get('optimizer'))})"
    else:
        est = "estimate"
    parts += ["", md_table(["", "measured", est, "measured / estimate"], rows)]
    if summary.tokens_per_s is not None:
        parts += ["", f"Logged token throughput: {fmt_count(summary.tokens_per_s)} tokens/s."]
    notes = [*c.get("notes", []), *summary.notes]
    if notes:
        parts += ["", *[f"- {esc(n)}" for n in notes]]
    if summary.failures:
        parts += ["", "**Problems in the log:**", "", *[f"- {f.kind}: {esc(f.message)}" for f in summary.failures]]
    return "\n".join(parts) + "\n"


def _fmt_metric(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def _fmt_ratio(r: float | None) -> str:
    return "n/a" if r is None else f"{r:.3g}x"


def _per_s(v: float | None, fmt: Callable[[float], str]) -> str:
    return "n/a" if v is None else f"{fmt(v)}/s"
