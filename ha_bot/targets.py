"""Hardware targets: the built-in database (``ha_bot/data/targets/*.yaml``) and user targets.

Data files use human units (TFLOP/s, GB/s, GB, W, us); :class:`Target` holds SI units.

Target file format (built-ins and custom targets alike)
--------------------------------------------------------
A YAML file holds one target mapping, or ``targets:`` with a list of them::

    id: nvidia_h100_sxm          # required: letters, digits, _ . -
    name: NVIDIA H100 SXM5 80GB  # default: the id (or the base's name)
    kind: gpu                    # required: gpu | cpu | mcu | npu | tpu
    peak_tflops:                 # required: DENSE matrix-engine peaks in TFLOP/s (int8: TOPS);
      fp32: 67.0                 #   precisions fp32 tf32 fp16 bf16 fp8 int8; absent/null = unsupported
      bf16: 989.5                #   (fp32 on tensor-core GPUs is the vector rate)
    vector_tflops: 67.0          # fp32 rate of non-matrix work; default: the fp32 peak
    mem_bw_gbps: 3350            # required: main-memory bandwidth, GB/s (1e9 B/s)
    mem_gb: 80                   # main memory, GB (1e9 B); MCUs: the SRAM (activations only)
    onchip_mb: 50                # on-chip SRAM / last-level cache, MB (1e6 B)
    flash_mb: null               # MCUs: flash that holds the weights, MB
    tdp_w: 700                   # full-load power, W; null: energy is not estimated
    idle_fraction: 0.3           # P = tdp_w * (idle_fraction + (1 - idle_fraction) * utilisation)
    kernel_overhead_us: 4.0      # per-kernel launch/dispatch cost, us (default by kind)
    fuses_elementwise: true      # the runtime folds elementwise ops into their producer: true, false,
                                 #   or the ops it folds, e.g. [relu, clamp, sigmoid, tanh, batch_norm]
    efficiency: {matmul: 0.8}    # max fraction of peak per op class (memory: of bandwidth), 0 < x <= 1;
                                 #   classes not given take DEFAULT_EFFICIENCY
    half_efficiency_gflop: 1.0   # op size (GFLOP) at which compute efficiency is half its max
                                 #   default: fp16/bf16 peak x 1 us (cpu: fp32 peak x 10 us, mcu: x 1 us)
    copies_views: []             # view ops the runtime executes as copies (onnxruntime: [permute, transpose])
    curves: {}                   # calibrated: op class -> [[op_flops, achieved_gflops_per_s], ...];
                                 #   bandwidth -> [[bytes_moved_by_the_op, achieved_gb_per_s], ...]
                                 #   copy -> the same for transposing copies (permute + contiguous)
                                 #   (working sets that fit in cache run faster than mem_bw_gbps)
    sources: {compute: [URL]}    # field group (compute, memory, cache, power, efficiency) -> URLs
    notes: free text
    assumptions: [judgement calls, stated honestly]   # shown with the notes (Target.notes)

Overriding a built-in: ``base: <id>`` inherits every field not given from that target (a built-in,
or one defined earlier in the same file). A target whose ``id`` equals a built-in id and has no
``base`` is merged onto that built-in the same way. Mappings (``peak_tflops``, ``efficiency``,
``curves``, ``sources``) merge key by key; ``null`` removes an inherited value (a peak, a figure,
a curve, a source group; an efficiency goes back to its DEFAULT_EFFICIENCY value).
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ha_bot.errors import ConfigError
from ha_bot.records import OP_CLASSES

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")
BYTES_PER_ELEMENT = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


_FUSION_ALIASES = {"batchnormalization": "batchnorm", "clip": "clamp", "hardtanh": "clamp", "relu6": "clamp",
                   "hardsigmoid": "hardsigmoid", "leakyrelu": "leakyrelu"}


def fusion_key(op: str) -> str:
    """'aten::relu_' / 'onnx::Relu' / 'relu' -> 'relu'; 'aten::batch_norm' / 'BatchNormalization' -> 'batchnorm'."""
    name = op.rsplit("::", 1)[-1].lower().rstrip("_").replace("_", "")
    return _FUSION_ALIASES.get(name, name)


class Target(NamedTuple):
    id: str
    name: str
    kind: str  # gpu | cpu | mcu | npu | tpu
    peak_flops: dict[str, float]  # precision -> dense matrix-engine FLOP/s (int8: ops/s); absent = unsupported
    vector_flops: float  # FLOP/s for non-matrix work (elementwise, reductions), fp32 vector rate
    mem_bw: float  # bytes/s of main memory
    mem_bytes: float | None  # main memory capacity (None: unknown)
    onchip_bytes: float | None  # on-chip SRAM / last-level cache
    flash_bytes: float | None  # where weights live on MCUs (None: weights share main memory)
    tdp_w: float | None  # board/chip power at full load (None: energy not estimated)
    idle_fraction: float  # share of tdp_w drawn at zero utilisation (power model)
    kernel_overhead_s: float  # per-kernel launch/dispatch overhead
    fuses_elementwise: bool | frozenset[str]  # fuses elementwise ops into their producer: all, none, or these (fusion_key names)
    efficiency: dict[str, float]  # op class -> max fraction of peak; "memory" -> bandwidth fraction
    half_flops: float  # op size (FLOPs) at which compute efficiency reaches half its max
    curves: dict[str, tuple[tuple[float, float], ...]]  # calibrated: op class -> ((op FLOPs, FLOP/s), ...)
    sources: dict[str, tuple[str, ...]]  # field group -> URLs
    notes: str
    origin: str  # "builtin" or the file it came from
    copies_views: frozenset[str] = frozenset()  # view ops the runtime runs as copies (onnxruntime: permute, transpose)


KINDS = ("gpu", "cpu", "mcu", "npu", "tpu")
FIELDS = (
    "id", "name", "kind", "base", "peak_tflops", "vector_tflops", "mem_bw_gbps", "mem_gb",
    "onchip_mb", "flash_mb", "tdp_w", "idle_fraction", "kernel_overhead_us", "fuses_elementwise",
    "efficiency", "half_efficiency_gflop", "curves", "sources", "notes", "assumptions", "copies_views",
)
EFFICIENCY_CLASSES = tuple(c for c in OP_CLASSES if c != "view")  # views launch nothing
DEFAULT_EFFICIENCY = {
    "matmul": 0.7, "conv": 0.6, "dwconv": 0.2, "attention": 0.5, "elementwise": 0.9,
    "reduction": 0.7, "norm": 0.7, "pool": 0.7, "embedding": 0.7, "memory": 0.7, "other": 0.5,
}
DEFAULT_OVERHEAD_US = {"gpu": 4.0, "npu": 1.0, "tpu": 1.0, "cpu": 3.0, "mcu": 1.0}
DEFAULT_IDLE_FRACTION = 0.3
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")

LineOf = Callable[[str], "int | None"]
_REQUIRED = object()  # a field with no default: it must be given, or inherited from a base


class _At:
    """Builds located ConfigErrors for one target document."""

    def __init__(self, origin: str, line_of: LineOf | None) -> None:
        self.origin, self.line_of = origin, line_of

    def error(self, key: str, message: str) -> ConfigError:
        line = self.line_of(key) if self.line_of else None
        return ConfigError(message, file=self.origin, line=line, key=key)

    def number(self, value: Any, key: str, *, low: float = 0.0, high: float = math.inf,
               low_ok: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(key, f"must be a number, got {value!r}")
        if value < low or (value == low and not low_ok) or value > high:
            lo = f">= {low:g}" if low_ok else f"> {low:g}"
            raise self.error(key, f"must be {lo}" + (f" and <= {high:g}" if high < math.inf else "")
                             + f", got {value!r}")
        return float(value)

    def mapping(self, value: Any, key: str) -> Mapping[Any, Any]:
        if not isinstance(value, Mapping):
            raise self.error(key, f"must be a mapping, got {type(value).__name__}")
        return value

    def text(self, value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {value!r}")
        return value

    def texts(self, value: Any, key: str) -> tuple[str, ...]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list):
            raise self.error(key, "must be a string or a list of strings")
        return tuple(self.text(v, f"{key}.{i}") for i, v in enumerate(items))

    def keys(self, given: Iterable[Any], allowed: Sequence[str], where: str, what: str) -> None:
        for k in given:
            if k not in allowed:
                key = f"{where}.{k}" if where else str(k)
                raise self.error(key, f"unknown {what} {k!r}; allowed: {', '.join(allowed)}")


def parse_target(doc: Mapping[str, Any], *, origin: str, line_of: LineOf | None = None,
                 bases: Mapping[str, Target] | None = None) -> Target:
    """One target document (human units) -> :class:`Target` (SI units).

    ``bases`` are the targets that ``base:`` (or a matching id) may inherit from; default: built-ins.
    """
    at = _At(origin, line_of)
    doc = at.mapping(doc, "")
    at.keys(doc, FIELDS, "", "key")
    if "id" not in doc:
        raise at.error("id", "missing: every target needs an id")
    tid = at.text(doc["id"], "id")
    if not _ID.match(tid):
        raise at.error("id", f"{tid!r} is not a valid id: use letters, digits, '_', '.', '-'")
    base = _base(doc, tid, at, load_builtin() if bases is None else bases)

    def inherit(key: str, field: str, default: Any = None) -> Any:
        if base is not None:
            return getattr(base, field)
        if default is _REQUIRED:
            raise at.error(key, f"missing: target {tid!r} needs {key} (or a base: to inherit from)")
        return default

    def number(key: str, field: str, scale: float, default: Any = None, **bounds: Any) -> Any:
        if key not in doc:
            return inherit(key, field, default)
        if doc[key] is None:
            if default is _REQUIRED:
                raise at.error(key, "must not be null")
            return None
        return at.number(doc[key], key, **bounds) * scale

    kind = at.text(doc["kind"], "kind") if "kind" in doc else inherit("kind", "kind", _REQUIRED)
    if kind not in KINDS:
        raise at.error("kind", f"unknown kind {kind!r}; allowed: {', '.join(KINDS)}")

    peaks = dict(base.peak_flops) if base else {}
    for p, v in at.mapping(doc.get("peak_tflops", {}), "peak_tflops").items():
        at.keys([p], PRECISIONS, "peak_tflops", "precision")
        if v is None:
            peaks.pop(p, None)
        else:
            peaks[p] = at.number(v, f"peak_tflops.{p}") * 1e12
    if not peaks:
        raise at.error("peak_tflops", f"target {tid!r} needs a dense peak (TFLOP/s) for at least one "
                                      f"precision of: {', '.join(PRECISIONS)}")
    peaks = {p: peaks[p] for p in PRECISIONS if p in peaks}

    vector = number("vector_tflops", "vector_flops", 1e12) or peaks.get("fp32")
    if vector is None:
        raise at.error("vector_tflops", f"missing: target {tid!r} has no fp32 peak, so give its fp32 "
                                        "vector rate (TFLOP/s)")

    efficiency = dict(base.efficiency) if base else dict(DEFAULT_EFFICIENCY)
    for c, v in at.mapping(doc.get("efficiency", {}), "efficiency").items():
        at.keys([c], EFFICIENCY_CLASSES, "efficiency", "op class")
        efficiency[c] = DEFAULT_EFFICIENCY[c] if v is None else at.number(v, f"efficiency.{c}", high=1.0)

    half = number("half_efficiency_gflop", "half_flops", 1e9, low_ok=True)
    if half is None:
        half = _default_half(kind, peaks)

    curves = dict(base.curves) if base else {}
    for c, v in at.mapping(doc.get("curves", {}), "curves").items():
        at.keys([c], (*EFFICIENCY_CLASSES, "bandwidth", "copy"), "curves", "op class")
        if v is None:
            curves.pop(c, None)
        else:
            curves[c] = _curve(v, f"curves.{c}", at)

    sources = dict(base.sources) if base else {}
    for g, v in at.mapping(doc.get("sources", {}), "sources").items():
        group = at.text(g, "sources")
        if v is None:
            sources.pop(group, None)
        else:
            sources[group] = at.texts(v, f"sources.{group}")

    fuses = doc.get("fuses_elementwise", base.fuses_elementwise if base else True)
    if isinstance(fuses, list) and all(isinstance(x, str) for x in fuses):
        fuses = frozenset(fusion_key(x) for x in fuses)
    elif not isinstance(fuses, (bool, frozenset)):
        raise at.error("fuses_elementwise", f"must be true, false or a list of op names like [relu, batch_norm], got {fuses!r}")
    idle = number("idle_fraction", "idle_fraction", 1.0, default=DEFAULT_IDLE_FRACTION,
                  low_ok=True, high=1.0)
    overhead = number("kernel_overhead_us", "kernel_overhead_s", 1e-6,
                      default=DEFAULT_OVERHEAD_US[kind] * 1e-6, low_ok=True)

    return Target(
        id=tid,
        name=at.text(doc["name"], "name") if doc.get("name") is not None else base.name if base else tid,
        kind=kind,
        peak_flops=peaks,
        vector_flops=vector,
        mem_bw=number("mem_bw_gbps", "mem_bw", 1e9, default=_REQUIRED),
        mem_bytes=number("mem_gb", "mem_bytes", 1e9),
        onchip_bytes=number("onchip_mb", "onchip_bytes", 1e6),
        flash_bytes=number("flash_mb", "flash_bytes", 1e6),
        tdp_w=number("tdp_w", "tdp_w", 1.0),
        idle_fraction=DEFAULT_IDLE_FRACTION if idle is None else idle,
        kernel_overhead_s=DEFAULT_OVERHEAD_US[kind] * 1e-6 if overhead is None else overhead,
        fuses_elementwise=fuses,
        copies_views=_copies_views(doc, at, base),
        efficiency={c: efficiency[c] for c in EFFICIENCY_CLASSES},
        half_flops=half,
        curves=curves,
        sources=sources,
        notes=_notes(doc, at, base),
        origin=origin,
    )



def _base(doc: Mapping[str, Any], tid: str, at: _At, bases: Mapping[str, Target]) -> Target | None:
    if doc.get("base") is None:
        return bases.get(tid)  # same id as a built-in: an override
    name = at.text(doc["base"], "base")
    if name not in bases:
        raise at.error("base", _unknown(name, bases))
    return bases[name]


def _default_half(kind: str, peaks: Mapping[str, float]) -> float:
    if kind in ("cpu", "mcu"):
        ref = peaks.get("fp32") or max(peaks.values())
        return ref * (10e-6 if kind == "cpu" else 1e-6)
    ref = peaks.get("bf16") or peaks.get("fp16") or max(peaks.values())
    return ref * 1e-6


def _curve(value: Any, key: str, at: _At) -> tuple[tuple[float, float], ...]:
    if not isinstance(value, list) or not value:
        raise at.error(key, "must be a non-empty list of [op_flops, achieved_gflops_per_s] pairs")
    points = []
    for i, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2:
            raise at.error(f"{key}.{i}", f"must be a pair [op_flops, achieved_gflops_per_s], got {pair!r}")
        points.append((at.number(pair[0], f"{key}.{i}"), at.number(pair[1], f"{key}.{i}") * 1e9))
    return tuple(sorted(points))


def _notes(doc: Mapping[str, Any], at: _At, base: Target | None) -> str:
    given = "notes" in doc or "assumptions" in doc
    if base is not None and not given:
        return base.notes
    parts = [at.text(doc["notes"], "notes").strip()] if doc.get("notes") is not None else []
    assumptions = at.texts(doc.get("assumptions") or [], "assumptions")
    if assumptions:
        parts.append("Assumptions:\n" + "\n".join(f"- {a.strip()}" for a in assumptions))
    if base is not None:
        parts.append(f"Fields not given are inherited from {base.id} ({base.origin}): {base.notes}")
    return "\n\n".join(p for p in parts if p)


def _unknown(name: str, available: Iterable[str]) -> str:
    ids = sorted(available)
    contains = [a for a in ids if name.lower() in a.lower()]
    close = list(dict.fromkeys(difflib.get_close_matches(name, ids, n=3) + contains))[:3]
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return f"unknown target {name!r}.{hint} `ha-bot targets` lists all targets."


# --- files -------------------------------------------------------------------------------------


def _line_of(node: Any) -> LineOf:
    """A ``line_of`` for a ruamel round-trip node: dotted key path -> 1-based line (nearest parent)."""

    def line_of(key: str) -> int | None:
        cur, line = node, getattr(getattr(node, "lc", None), "line", None)
        for part in key.split(".") if key else []:
            lc = getattr(cur, "lc", None)
            try:
                if isinstance(cur, list):
                    idx = int(part)
                    pos, cur = lc.item(idx), cur[idx]  # type: ignore[union-attr]
                elif isinstance(cur, Mapping) and part in cur:
                    pos, cur = lc.key(part), cur[part]  # type: ignore[union-attr]
                else:
                    break
            except (AttributeError, IndexError, KeyError, TypeError, ValueError):
                break
            line = pos[0]
        return None if line is None else line + 1

    return line_of


def _copies_views(doc: Mapping[str, Any], at: Any, base: Target | None) -> frozenset[str]:
    if "copies_views" not in doc:
        return base.copies_views if base else frozenset()
    value = doc["copies_views"] or []
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise at.error("copies_views", f"must be a list of view op names like [permute, transpose], got {value!r}")
    return frozenset(fusion_key(x) for x in value)


def _read_yaml(text: str, origin: str, *, fast: bool = False) -> Any:
    """Round-trip mode keeps line numbers for error messages; ``fast`` (the built-ins, which the
    tests validate) skips them: about 3x quicker, which keeps `ha-bot card`'s no-op run short."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        return YAML(typ="safe" if fast else "rt").load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"invalid YAML: {e.problem or e.context}", file=origin, line=line) from None
    except YAMLError as e:
        raise ConfigError(f"invalid YAML: {e}", file=origin) from None


def load_targets_file(path: str, *, bases: Mapping[str, Target] | None = None) -> dict[str, Target]:
    """Targets from a YAML file holding one target mapping or ``targets: [...]``, in file order."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError("target file not found", file=path) from None
    except OSError as e:
        raise ConfigError(f"cannot read target file: {e.strerror}", file=path) from None
    doc = _read_yaml(text, path)
    where = _line_of(doc)
    if not isinstance(doc, Mapping):
        raise ConfigError("expected a target mapping, or `targets:` with a list of them",
                          file=path, line=where(""))
    if "targets" in doc:
        extra = [k for k in doc if k != "targets"]
        if extra:
            raise ConfigError("a file with `targets:` holds only that key", file=path,
                              line=where(str(extra[0])), key=str(extra[0]))
        items = doc["targets"]
        if not isinstance(items, list) or not items:
            raise ConfigError("must be a non-empty list of target mappings", file=path,
                              line=where("targets"), key="targets")
    else:
        items = [doc]
    available = dict(load_builtin() if bases is None else bases)
    out: dict[str, Target] = {}
    for item in items:
        target = parse_target(item, origin=path, line_of=_line_of(item), bases=available)
        if target.id in out:
            raise ConfigError(f"target {target.id!r} is defined twice", file=path,
                              line=_line_of(item)("id"), key="id")
        out[target.id] = available[target.id] = target
    return out


@functools.cache
def _builtin() -> tuple[Target, ...]:
    from importlib.resources import files

    found = []
    folder = files("ha_bot") / "data" / "targets"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        origin = f"ha_bot/data/targets/{entry.name}"
        doc = _read_yaml(entry.read_text(encoding="utf-8"), origin, fast=True)
        target = parse_target(doc, origin=origin, line_of=_line_of(doc), bases={})
        if f"{target.id}.yaml" != entry.name:
            raise ConfigError(f"built-in file name must be {target.id}.yaml", file=origin, key="id")
        found.append(target._replace(origin="builtin"))
    return tuple(sorted(found, key=lambda t: t.id))


def load_builtin() -> dict[str, Target]:
    """The built-in targets by id, sorted by id (parsed once per process)."""
    return {t.id: t for t in _builtin()}


def resolve(ids: Sequence[str], available: Mapping[str, Target]) -> list[Target]:
    """Targets for ``ids`` in order (duplicates dropped); unknown ids raise with suggestions."""
    out: list[Target] = []
    for tid in dict.fromkeys(ids):
        if tid not in available:
            raise ConfigError(_unknown(tid, available))
        out.append(available[tid])
    return out


# --- rendering ---------------------------------------------------------------------------------


def _fmt(x: float | None, scale: float = 1.0) -> str:
    if x is None:
        return "-"
    v = x / scale
    return f"{v:.0f}" if v >= 1000 else f"{v:.4g}"


def targets_table(targets: Iterable[Target]) -> str:
    """Plain-text table for ``ha-bot targets`` (peaks dense, TFLOP/s; int8 in TOPS)."""
    head = ("id", "kind", "fp32", "fp16", "bf16", "int8", "mem GB/s", "mem GB", "TDP W")
    rows = [head] + [
        (t.id, t.kind, *(_fmt(t.peak_flops.get(p), 1e12) for p in ("fp32", "fp16", "bf16", "int8")),
         _fmt(t.mem_bw, 1e9), _fmt(t.mem_bytes, 1e9), _fmt(t.tdp_w))
        for t in targets
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("Dense peaks in TFLOP/s (int8: TOPS); '-' = unsupported or unknown. "
                 "`ha-bot targets ID` shows sources and assumptions.")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def target_details(t: Target) -> str:
    """Every figure of one target, with its notes, assumptions and sources (``ha-bot targets ID``)."""
    peaks = ", ".join(f"{p} {_fmt(v, 1e12)}" for p, v in t.peak_flops.items())
    unsupported = [p for p in PRECISIONS if p not in t.peak_flops]
    power = "unknown (energy not estimated)" if t.tdp_w is None else \
        f"{_fmt(t.tdp_w)} W at full load, idle fraction {t.idle_fraction:g}"
    lines = [
        f"{t.id}: {t.name}",
        f"  kind: {t.kind}    origin: {t.origin}",
        f"  dense peaks (TFLOP/s; int8 TOPS): {peaks}",
        f"  unsupported precisions: {', '.join(unsupported) or 'none'}",
        f"  vector (non-matrix) rate: {_fmt(t.vector_flops, 1e12)} TFLOP/s",
        f"  memory: {_fmt(t.mem_bytes, 1e9)} GB at {_fmt(t.mem_bw, 1e9)} GB/s",
        f"  on-chip: {_fmt(t.onchip_bytes, 1e6)} MB    flash: {_fmt(t.flash_bytes, 1e6)} MB",
        f"  power: {power}",
        f"  kernel overhead: {t.kernel_overhead_s * 1e6:g} us    "
        "fuses elementwise: " + (", ".join(sorted(t.fuses_elementwise)) if isinstance(t.fuses_elementwise, frozenset)
                                 else ("yes" if t.fuses_elementwise else "no")),
        "  efficiency (max fraction of peak; memory: of bandwidth): "
        + ", ".join(f"{c} {v:g}" for c, v in t.efficiency.items()),
        f"  half efficiency at: {t.half_flops / 1e9:.3g} GFLOP",
        "  calibrated curves: " + (", ".join(
            f"{c} ({len(pts)} points)" for c, pts in t.curves.items()) or "none"),
        "  notes:",
    ]
    for para in t.notes.splitlines() or ["-"]:
        indent = "      " if para.startswith("- ") else "    "
        lines.append(textwrap.fill(para, 100, initial_indent="    ", subsequent_indent=indent)
                     if para.strip() else "")
    lines.append("  sources:")
    for group, urls in t.sources.items():
        lines.append(f"    {group}:")
        lines.extend(f"      - {u}" for u in urls)
    if not t.sources:
        lines.append("    none given")
    return "\n".join(lines) + "\n"
