"""Rule-based optimisation advice for one analysed model. Pure and deterministic.

Each rule looks at a report entry (and, when given, the model's :class:`ModelCount` and its diff
entry) and says what to try, with the effect the cost model estimates for it. With a count, the
effect is recomputed with :func:`ha_bot.cost.estimate` / :func:`ha_bot.cost.training_step` at
another precision or batch ("what if"); with the report alone a rule uses the report's numbers
and says less. Advice is ordered by rule (``RULES``), then by the report's target order; effect
numbers are rounded to 4 significant digits. Names that come from the repository (modules) are
passed through :func:`safe_name` before they enter a message.

Rules (thresholds below):
    regression-module     a latency regression concentrated in one module (diff movers)
    does-not-fit          the model does not fit the target's memory: largest batch / a precision that fits
    lower-precision       memory-bound at a small batch: fewer bytes per element
    mixed-precision       compute-bound at fp32/tf32 on a target whose 16-bit matrix peak is far higher
    launch-overhead       overhead-bound on a GPU: larger batch, fusion, CUDA graphs, torch.compile
    depthwise-conv        depthwise convolutions take much of the time far below peak
    small-matmul          matrix ops too small to fill the matrix units take much of the time
    training-optimizer    training memory over capacity: SGD keeps no per-parameter state (Adam: 8 B)
    training-micro-batch  ... a smaller micro-batch with gradient accumulation
    training-checkpointing ... gradient checkpointing (rule of thumb: ~2/sqrt(n) of the activations)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from ha_bot import cost, memory
from ha_bot.records import ModelCount
from ha_bot.render import fmt_bytes, fmt_count, fmt_time
from ha_bot.report import sig
from ha_bot.targets import BYTES_PER_ELEMENT, Target

SMALL_BATCH = 8  # "small batch" for the precision rule
TENSOR_CORE_RATIO = 4.0  # 16-bit matrix peak at least this many times the fp32/tf32 one
DWCONV_SHARE = 0.15  # depthwise convs' share of estimated time worth a word
DWCONV_UTILISATION = 0.3  # ... when they run below this fraction of peak
SMALL_MATMUL_EFFICIENCY = 0.1  # a matrix op achieving less than this fraction of peak is "small"
SMALL_MATMUL_SHARE = 0.25  # ... and such ops take at least this share of the time
MOVER_SHARE = 0.5  # one module holds at least half of a regression
MIN_SPEEDUP = 1.05  # smaller estimated gains are not worth advice
MIN_SAVING = 0.1  # nor are memory savings under this fraction
LOWER = {
    "fp32": ("bf16", "fp16", "int8"),
    "tf32": ("bf16", "fp16", "int8"),
    "fp16": ("fp8", "int8"),
    "bf16": ("fp8", "int8"),
    "fp8": ("int8",),
    "int8": (),
}
MATRIX = ("matmul", "conv", "attention")
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-/]+")
NAME_LIMIT = 48


class Advice(NamedTuple):
    rule: str
    target: str  # target id ("" for model-wide advice)
    message: str  # plain text; names already safe
    effect: dict[str, float]  # numbers from the cost model (SI units; shares as fractions)


class _Ctx(NamedTuple):
    entry: Mapping[str, Any]
    targets: Mapping[str, Target]
    counted: ModelCount | None
    diff_entry: Mapping[str, Any] | None


def safe_name(name: object, limit: int = NAME_LIMIT) -> str:
    """A repository-controlled name reduced to ``[A-Za-z0-9._-/]`` (runs of anything else -> ``_``)."""
    return _UNSAFE.sub("_", str(name)).strip("_")[:limit] or "unnamed"


def _r(x: float) -> float:
    return float(sig(x, 4) or 0.0)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if x >= 0.1 else f"{100 * x:.2g}%"


def _ratio(x: float) -> str:
    return f"{x:.3g}x"


def _first_estimates(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Per target, its first estimate (the first configured batch), in report order."""
    seen: dict[str, Mapping[str, Any]] = {}
    for e in entry.get("estimates", []):
        seen.setdefault(e["target"], e)
    return list(seen.values())


def _what_if(ctx: _Ctx, tid: str, precision: str, batch: int) -> cost.Estimate | None:
    """The cost model at another precision/batch; None without a count, a target, or that precision."""
    t = ctx.targets.get(tid)
    if ctx.counted is None or t is None or cost.resolve_precision(t, precision) != precision:
        return None
    return cost.estimate(ctx.counted, t, precision, batch)


def _lower_precisions(t: Target | None, precision: str) -> list[str]:
    cands = LOWER.get(precision, ())
    return [p for p in cands if t is None or t.peak_flops.get(p)]


# --- rules ---------------------------------------------------------------------------------------


def rule_regression(ctx: _Ctx) -> Iterator[Advice]:
    d = ctx.diff_entry
    if not d or d.get("state") != "changed" or not d.get("movers") or not ctx.entry.get("estimates"):
        return
    total = sum(m["delta_s"] for m in d["movers"])
    top = d["movers"][0]
    share = top.get("share")
    if share is None or total <= 0 or top["delta_s"] <= 0 or share < MOVER_SHARE:
        return
    tid = ctx.entry["estimates"][0]["target"]
    msg = (f"the estimated slowdown on {safe_name(tid)} is concentrated in module {safe_name(top['module'])}: "
           f"+{fmt_time(top['delta_s'])}, {_pct(share)} of the change in estimated time; start there")
    effect = {"delta_s": _r(top["delta_s"]), "share": _r(share)}
    if top.get("base_s") is not None:
        effect["base_s"] = _r(top["base_s"])
    if top.get("head_s") is not None:
        effect["head_s"] = _r(top["head_s"])
    yield Advice("regression-module", tid, msg, effect)


def rule_fit(ctx: _Ctx) -> Iterator[Advice]:
    done: set[str] = set()
    for e in ctx.entry.get("estimates", []):
        tid = e["target"]
        if e.get("fits") is not False or tid in done:
            continue
        done.add(tid)
        t = ctx.targets.get(tid)
        effect: dict[str, float] = {"memory_bytes": int(e["memory_bytes"])}
        msg = f"does not fit on {safe_name(tid)} at batch {e['batch']}: it needs {fmt_bytes(e['memory_bytes'])}"
        if t is not None and t.mem_bytes is not None:
            effect["capacity_bytes"] = int(t.mem_bytes)
            msg += f" of {fmt_bytes(t.mem_bytes)}"
        mb = e.get("max_batch")
        if mb:
            effect["max_batch"] = int(mb)
            msg += f"; the largest batch that fits is {mb}"
        for p in _lower_precisions(t, e["precision"]):
            alt = _what_if(ctx, tid, p, e["batch"])
            if alt is not None and alt.fits:
                effect["fit_memory_bytes"] = alt.memory_bytes
                msg += f"; at {p} it needs {fmt_bytes(alt.memory_bytes)} and fits"
                break
        else:
            if mb == 0:
                msg += "; not even one sample fits: it needs a larger target, or the weights streamed or sharded"
        yield Advice("does-not-fit", tid, msg, effect)


def rule_lower_precision(ctx: _Ctx) -> Iterator[Advice]:
    for e in _first_estimates(ctx.entry):
        if e["bound"] != "memory" or e["batch"] > SMALL_BATCH:
            continue
        tid, lat = e["target"], e["latency_s"]
        t = ctx.targets.get(tid)
        cands = _lower_precisions(t, e["precision"])
        if not cands:
            continue
        where = f"memory-bound on {safe_name(tid)} at batch {e['batch']} ({e['precision']})"
        if ctx.counted is None or t is None:
            msg = (f"{where}: {fmt_time(e['memory_s'])} of its {fmt_time(lat)} is memory traffic; "
                   f"a lower precision ({', '.join(cands)}) moves fewer bytes per element")
            yield Advice("lower-precision", tid, msg, {"from_latency_s": _r(lat), "memory_s": _r(e["memory_s"])})
            continue
        options = [(p, alt) for p in cands if (alt := _what_if(ctx, tid, p, e["batch"])) is not None]
        wide = [(p, a) for p, a in options if BYTES_PER_ELEMENT[p] >= 2] or options
        if not wide:
            continue
        p, alt = wide[0]
        speedup = lat / alt.latency_s if alt.latency_s else 0.0
        if speedup < MIN_SPEEDUP:
            continue
        effect = {"from_latency_s": _r(lat), "latency_s": _r(alt.latency_s), "speedup": _r(speedup)}
        msg = f"{where}: at {p} the estimate is {fmt_time(alt.latency_s)} instead of {fmt_time(lat)} ({_ratio(speedup)})"
        int8 = dict(options).get("int8")
        if int8 is not None and p != "int8":
            effect["int8_latency_s"] = _r(int8.latency_s)
            msg += f", and {fmt_time(int8.latency_s)} at int8 (needs quantisation: check accuracy)"
        yield Advice("lower-precision", tid, msg, effect)


def rule_mixed_precision(ctx: _Ctx) -> Iterator[Advice]:
    for e in _first_estimates(ctx.entry):
        tid, prec = e["target"], e["precision"]
        t = ctx.targets.get(tid)
        if t is None or prec not in ("fp32", "tf32") or e["bound"] != "compute":
            continue
        half = "bf16" if t.peak_flops.get("bf16") else "fp16"
        ratio = (t.peak_flops.get(half) or 0.0) / (t.peak_flops.get(prec) or math.inf)
        if ratio < TENSOR_CORE_RATIO:
            continue
        lat = e["latency_s"]
        where = f"{safe_name(tid)} has a {_ratio(ratio)} higher {half} matrix peak than {prec}, which this compute-bound model leaves idle"
        alt = _what_if(ctx, tid, half, e["batch"])
        if alt is None:
            msg = f"{where}: mixed precision ({half} autocast) speeds up the matrix work, by up to {_ratio(ratio)}"
            yield Advice("mixed-precision", tid, msg, {"peak_ratio": _r(ratio), "from_latency_s": _r(lat)})
            continue
        speedup = lat / alt.latency_s if alt.latency_s else 0.0
        if speedup < MIN_SPEEDUP:
            continue
        msg = (f"{where}: with mixed precision ({half} autocast) the estimate is {fmt_time(alt.latency_s)} "
               f"instead of {fmt_time(lat)} ({_ratio(speedup)})")
        effect = {"peak_ratio": _r(ratio), "from_latency_s": _r(lat), "latency_s": _r(alt.latency_s), "speedup": _r(speedup)}
        yield Advice("mixed-precision", tid, msg, effect)


def rule_overhead(ctx: _Ctx) -> Iterator[Advice]:
    for e in _first_estimates(ctx.entry):
        tid = e["target"]
        t = ctx.targets.get(tid)
        if t is None or t.kind != "gpu" or e["bound"] != "overhead":
            continue
        lat, ovh = e["latency_s"], e["overhead_s"]
        effect = {"from_latency_s": _r(lat), "latency_s": _r(lat - ovh), "overhead_s": _r(ovh), "kernels": int(e["kernels"])}
        msg = (f"overhead-bound on {safe_name(tid)} at batch {e['batch']}: {e['kernels']} kernel launches cost "
               f"{fmt_time(ovh)} of {fmt_time(lat)}; without launch overhead it would take about {fmt_time(lat - ovh)}; "
               "fewer, fused launches help: CUDA graphs, torch.compile, or a larger batch")
        bigger = e["batch"] * SMALL_BATCH
        if e.get("max_batch"):
            bigger = min(bigger, int(e["max_batch"]))
        alt = _what_if(ctx, tid, e["precision_requested"], bigger) if bigger > e["batch"] else None
        if alt is not None and alt.throughput_per_s > e["throughput_per_s"] * MIN_SPEEDUP:
            effect.update(batch=bigger, throughput_per_s=_r(alt.throughput_per_s), from_throughput_per_s=_r(e["throughput_per_s"]))
            msg += (f" (batch {bigger}: {fmt_count(alt.throughput_per_s)}/s instead of "
                    f"{fmt_count(e['throughput_per_s'])}/s)")
        yield Advice("launch-overhead", tid, msg, effect)


class _Share(NamedTuple):
    share: float  # of the estimated time
    utilisation: float  # achieved FLOP/s over peak, within those ops
    ops: int


def _class_share(ctx: _Ctx, e: Mapping[str, Any], keep: Callable[[str, float], bool]) -> _Share | None:
    """Share of ``e``'s time in ops that ``keep(op_class, efficiency)`` selects (needs a count)."""
    t = ctx.targets.get(e["target"])
    if ctx.counted is None or t is None:
        return None
    est = cost.estimate(ctx.counted, t, e["precision_requested"], e["batch"])
    peak = t.peak_flops.get(est.precision, t.vector_flops)
    scale = e["batch"] / ctx.counted.batch
    time = flops = 0.0
    n = 0
    for op, ot in zip(ctx.counted.ops, est.op_times):
        if ot.time_s <= 0:
            continue
        eff = op.flops * scale / (ot.time_s * peak) if peak else 0.0
        if keep(op.op_class, eff):
            time += ot.time_s
            flops += op.flops * scale
            n += 1
    if not est.latency_s or not time:
        return None
    return _Share(time / est.latency_s, flops / (time * peak) if peak else 0.0, n)


def _report_share(ctx: _Ctx, classes: Sequence[str]) -> tuple[str, _Share] | None:
    """From the report alone: the ops table's time share on its reference target, model-wide utilisation."""
    ests = ctx.entry.get("estimates", [])
    if not ests:
        return None
    share = sum(o["time_share"] or 0.0 for o in ctx.entry.get("ops", []) if o["op_class"] in classes)
    n = sum(int(o["count"]) for o in ctx.entry.get("ops", []) if o["op_class"] in classes)
    return ests[0]["target"], _Share(share, ests[0]["utilisation"], n)


def rule_dwconv(ctx: _Ctx) -> Iterator[Advice]:
    found: list[tuple[str, float, _Share]] = []
    if ctx.counted is not None:
        for e in _first_estimates(ctx.entry):
            s = _class_share(ctx, e, lambda cls, _eff: cls == "dwconv")
            if s is not None:
                found.append((e["target"], e["latency_s"], s))
    else:
        got = _report_share(ctx, ("dwconv",))
        if got is not None:
            found.append((got[0], ctx.entry["estimates"][0]["latency_s"], got[1]))
    for tid, lat, s in found:
        if s.share < DWCONV_SHARE or s.utilisation >= DWCONV_UTILISATION:
            continue
        msg = (f"depthwise convolutions take {_pct(s.share)} of the estimated time on {safe_name(tid)}, at "
               f"{_pct(s.utilisation)} of peak: they move many bytes for few FLOPs and launch many kernels; "
               "try a channels-last layout with fused depthwise+pointwise kernels (torch.compile, TensorRT), "
               "or fewer, wider dense convolutions where accuracy allows")
        yield Advice("depthwise-conv", tid, msg,
                     {"time_share": _r(s.share), "time_s": _r(s.share * lat), "utilisation": _r(s.utilisation)})


def rule_small_matmul(ctx: _Ctx, skip: set[str]) -> Iterator[Advice]:
    found: list[tuple[str, _Share]] = []
    if ctx.counted is not None:
        for e in _first_estimates(ctx.entry):
            s = _class_share(ctx, e, lambda cls, eff: cls in MATRIX and eff < SMALL_MATMUL_EFFICIENCY)
            if s is not None:
                found.append((e["target"], s))
    else:
        got = _report_share(ctx, MATRIX)
        if got is not None and got[1].utilisation < SMALL_MATMUL_EFFICIENCY:
            found.append(got)
    for tid, s in found:
        if tid in skip or s.share < SMALL_MATMUL_SHARE:
            continue
        msg = (f"{s.ops} matrix ops running below {_pct(SMALL_MATMUL_EFFICIENCY)} of peak take {_pct(s.share)} "
               f"of the estimated time on {safe_name(tid)}: they are too small to fill the matrix units; "
               "batch them (a larger batch, merged projections or heads) or fuse them")
        yield Advice("small-matmul", tid, msg, {"time_share": _r(s.share), "utilisation": _r(s.utilisation), "ops": s.ops})


def _training_rows(ctx: _Ctx) -> Iterator[tuple[Mapping[str, Any], Target | None]]:
    for row in ctx.entry.get("training", []):
        if row.get("fits") is False:
            yield row, ctx.targets.get(row["target"])


def _train(ctx: _Ctx, t: Target, precision: str, batch: int, optimizer: str) -> cost.TrainingEstimate:
    assert ctx.counted is not None
    forward = cost.estimate(ctx.counted, t, precision, batch)
    return cost.training_step(ctx.counted, t, forward, optimizer, None)


def rule_training(ctx: _Ctx) -> Iterator[Advice]:
    for row, t in _training_rows(ctx):
        tid, opt, mem = row["target"], row["optimizer"], row["memory_bytes"]
        where = f"a training step on {safe_name(tid)} (batch {row['batch']}, {opt}) needs {fmt_bytes(mem)}"
        if t is not None and t.mem_bytes is not None:
            where += f" of {fmt_bytes(t.mem_bytes)}"
        state = cost.OPTIMIZER_STATE_BYTES.get(opt, 0)
        if state and ctx.entry.get("params"):
            saved = state * int(ctx.entry["params"])
            if ctx.counted is not None and t is not None:
                saved = mem - _train(ctx, t, row["precision"], row["batch"], "sgd").memory_bytes
            msg = f"{where}; plain SGD keeps no optimizer state: {fmt_bytes(mem - saved)}, {fmt_bytes(saved)} less"
            yield Advice("training-optimizer", tid, msg, {"memory_bytes": mem - saved, "from_memory_bytes": mem, "saved_bytes": saved})
        yield from _micro_batch(ctx, row, t, where)
        yield from _checkpointing(ctx, row, t, where)


def _micro_batch(ctx: _Ctx, row: Mapping[str, Any], t: Target | None, where: str) -> Iterator[Advice]:
    if row["batch"] <= 1:
        return
    if ctx.counted is None or t is None:
        msg = f"{where}; a smaller micro-batch with gradient accumulation keeps the effective batch and saves activation memory"
        yield Advice("training-micro-batch", row["target"], msg, {"from_memory_bytes": row["memory_bytes"]})
        return
    b = row["batch"] // 2
    while b >= 1:
        tr = _train(ctx, t, row["precision"], b, row["optimizer"])
        if tr.fits:
            steps = math.ceil(row["batch"] / b)
            msg = (f"{where}; micro-batch {b} with {steps} accumulation steps keeps the effective batch "
                   f"and needs {fmt_bytes(tr.memory_bytes)}")
            yield Advice("training-micro-batch", row["target"], msg,
                         {"micro_batch": b, "accumulation_steps": steps, "memory_bytes": tr.memory_bytes,
                          "from_memory_bytes": row["memory_bytes"]})
            return
        b //= 2


def _checkpointing(ctx: _Ctx, row: Mapping[str, Any], t: Target | None, where: str) -> Iterator[Advice]:
    if ctx.counted is None or t is None:
        msg = (f"{where}; gradient checkpointing recomputes activations in the backward pass instead of "
               "keeping them (rule of thumb: activation memory grows with the square root of the depth)")
        yield Advice("training-checkpointing", row["target"], msg, {"from_memory_bytes": row["memory_bytes"]})
        return
    layers = len({op.scope for op in ctx.counted.ops if op.op_class != "view"})
    if layers < 4:
        return
    scale = row["batch"] / ctx.counted.batch
    saved = memory.saved_activation_bytes(ctx.counted, row["precision"]) * scale
    kept = saved * 2 / math.sqrt(layers)  # sqrt(n) checkpoints + one segment of sqrt(n) layers
    mem = int(row["memory_bytes"] - saved + kept)
    if mem > row["memory_bytes"] * (1 - MIN_SAVING):
        return
    fwd = cost.estimate(ctx.counted, t, row["precision"], row["batch"]).latency_s
    step = row["step_s"] + fwd  # one extra forward pass
    fits = t.mem_bytes is None or mem <= t.mem_bytes
    msg = (f"{where}; gradient checkpointing over {layers} modules keeps about {fmt_bytes(mem)} "
           f"({'fits' if fits else 'still too much'}; a rule of thumb: ~2/sqrt(n) of the activations) "
           f"for one extra forward pass per step ({fmt_time(step)} instead of {fmt_time(row['step_s'])})")
    yield Advice("training-checkpointing", row["target"], msg,
                 {"memory_bytes": mem, "from_memory_bytes": row["memory_bytes"], "modules": layers,
                  "step_s": _r(step), "from_step_s": _r(row["step_s"])})


RULES = (
    "regression-module", "does-not-fit", "lower-precision", "mixed-precision", "launch-overhead",
    "depthwise-conv", "small-matmul", "training-optimizer", "training-micro-batch", "training-checkpointing",
)


def advise(
    model_entry: Mapping[str, Any],
    *,
    targets: Mapping[str, Target],
    count: ModelCount | None = None,
    diff_entry: Mapping[str, Any] | None = None,
) -> list[Advice]:
    """What to try for one model (a report entry with status ok), most relevant rules first."""
    if model_entry.get("status") != "ok":
        return []
    ctx = _Ctx(model_entry, targets, count, diff_entry)
    out = [*rule_regression(ctx), *rule_fit(ctx), *rule_lower_precision(ctx), *rule_mixed_precision(ctx)]
    overhead = list(rule_overhead(ctx))
    out += overhead + list(rule_dwconv(ctx)) + list(rule_small_matmul(ctx, {a.target for a in overhead}))
    out += list(rule_training(ctx))
    order = {tid: i for i, tid in enumerate(dict.fromkeys(e["target"] for e in model_entry.get("estimates", [])))}
    return sorted(out, key=lambda a: (RULES.index(a.rule), order.get(a.target, len(order)), a.target))


def targets_from_doc(doc_targets: Mapping[str, Mapping[str, Any]]) -> dict[str, Target]:
    """Targets rebuilt from a report's ``targets`` section: enough for report-only advice (kind,
    peaks, capacity), not for the cost model (no efficiencies or curves)."""
    out = {}
    for tid, t in sorted(doc_targets.items()):
        peaks = {str(p): float(v) for p, v in (t.get("peak_flops") or {}).items() if isinstance(v, (int, float))}
        out[str(tid)] = Target(
            id=str(tid), name=str(t.get("name", tid)), kind=str(t.get("kind", "gpu")), peak_flops=peaks,
            vector_flops=peaks.get("fp32", max(peaks.values(), default=0.0)), mem_bw=float(t.get("mem_bw") or 0.0),
            mem_bytes=t.get("mem_bytes"), onchip_bytes=None, flash_bytes=None, tdp_w=t.get("tdp_w"),
            idle_fraction=0.3, kernel_overhead_s=0.0, fuses_elementwise=True, efficiency={}, half_flops=0.0,
            curves={}, sources={}, notes="rebuilt from a report", origin="report",
        )
    return out
