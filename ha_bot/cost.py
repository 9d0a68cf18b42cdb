"""The roofline cost model: per op, target, precision and batch. Pure arithmetic, no I/O.

Per op (README "Cost model"):
    compute = FLOPs / (peak(precision, op class) x efficiency(op class, size))
    memory  = bytes / (bandwidth x memory efficiency)
    time    = max(compute, memory) + per-kernel overhead
Elementwise ops that directly consume the previous kernel's output are fused into it where the
target's runtime fuses (no launch, no round trip of the intermediate). Energy per op is
    time x TDP x (idle_fraction + (1 - idle_fraction) x activity),
activity being the busier resource's achieved share of its peak during the op.
"""

from __future__ import annotations

import bisect
import math
from typing import NamedTuple

from ha_bot import memory
from ha_bot.records import FUSIBLE_CLASSES, ModelCount, OpRecord
from ha_bot.targets import BYTES_PER_ELEMENT, Target, fusion_key

MATRIX_CLASSES = frozenset({"matmul", "conv", "dwconv", "attention"})
# inference batch norm is an affine per-channel scale: runtimes that fuse fold it into the conv
FUSIBLE_NORMS = ("batch_norm", "BatchNormalization")
SERIAL_KINDS = frozenset({"cpu", "mcu"})
TRANSPOSING_COPIES = frozenset({"contiguous", "reshape", "flatten", "transpose", "permute"})  # strided -> dense
FALLBACK = {
    "fp32": ("fp32", "tf32", "bf16", "fp16", "int8"),
    "tf32": ("tf32", "fp32", "bf16", "fp16"),
    "fp16": ("fp16", "bf16", "fp32", "int8"),
    "bf16": ("bf16", "fp16", "fp32", "int8"),
    "fp8": ("fp8", "fp16", "bf16", "int8", "fp32"),
    "int8": ("int8", "fp8", "fp16", "bf16", "fp32"),
}
OPTIMIZER_STATE_BYTES = {"sgd": 0, "sgd_momentum": 4, "adam": 8, "adamw": 8}  # fp32 state per parameter
BACKWARD_FACTOR = 2.0  # backward costs about twice the forward (grads for inputs and weights)


class OpTime(NamedTuple):
    time_s: float
    compute_s: float
    memory_s: float
    overhead_s: float
    bound: str  # compute | memory | overhead | fused | none
    energy_j: float


class Estimate(NamedTuple):
    target: str
    precision: str  # precision the estimate uses
    precision_requested: str
    batch: int
    latency_s: float
    throughput_per_s: float
    bound: str
    compute_s: float
    memory_s: float
    overhead_s: float
    utilisation: float  # achieved FLOP/s over peak at this precision
    weights_bytes: int
    activation_bytes: int
    memory_bytes: int
    fits: bool | None
    max_batch: int | None
    energy_j: float | None
    kernels: int
    notes: tuple[str, ...]
    op_times: tuple[OpTime, ...]


class TrainingEstimate(NamedTuple):
    target: str
    precision: str
    batch: int
    optimizer: str
    step_s: float
    epoch_s: float | None
    memory_bytes: int
    fits: bool | None


def resolve_precision(target: Target, requested: str) -> str:
    for p in FALLBACK[requested]:
        if target.peak_flops.get(p):
            return p
    return "fp32"


def _interp(curve: tuple[tuple[float, float], ...], flops: float) -> float:
    """Achieved FLOP/s at an op size, log-log interpolated on a calibrated curve, clamped at the ends."""
    xs = [c[0] for c in curve]
    if flops <= xs[0]:
        return curve[0][1] * flops / xs[0]  # below the smallest size: fixed time, rate falls linearly
    if flops >= xs[-1]:
        return curve[-1][1]
    i = bisect.bisect_left(xs, flops)
    (x0, y0), (x1, y1) = curve[i - 1], curve[i]
    if x1 <= x0:  # repeated sizes in a hand-written curve
        return max(y0, y1)
    t = (math.log(flops) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))


def compute_rate(target: Target, precision: str, op_class: str, flops: float) -> float:
    """Achieved FLOP/s for one op of this class and size."""
    matrix = op_class in MATRIX_CLASSES
    peak = target.peak_flops.get(precision, target.vector_flops) if matrix else target.vector_flops
    curve = target.curves.get(op_class)
    if curve:
        rate = _interp(curve, flops)
        ref = target.peak_flops.get("fp32", target.vector_flops) if matrix else target.vector_flops
        return rate * (peak / ref if ref else 1.0)
    eff = target.efficiency.get(op_class, target.efficiency.get("other", 0.5))
    # half_flops is stated for matrix work at the reference peak: the size at which an op runs
    # for about as long as its fixed start-up; slower units reach that point at smaller sizes.
    half = target.half_flops * peak / reference_peak(target)
    return peak * eff * flops / (flops + half)


def fusible(target: Target, op: OpRecord) -> bool:
    """Whether the target's runtime folds this op into the kernel that produced its input."""
    f = target.fuses_elementwise
    if isinstance(f, frozenset):
        return fusion_key(op.op) in f
    return bool(f) and (op.op_class in FUSIBLE_CLASSES or op.op.endswith(FUSIBLE_NORMS))


def reference_peak(target: Target) -> float:
    """The peak `half_efficiency_gflop` refers to: 16-bit matrix peak on accelerators, fp32 on CPUs/MCUs."""
    p = target.peak_flops
    if target.kind in ("cpu", "mcu"):
        return p.get("fp32") or target.vector_flops or max(p.values())
    return p.get("bf16") or p.get("fp16") or p.get("fp32") or max(p.values())


def op_bytes(op: OpRecord, bpe: int, scale: float, skip_act: int = 0) -> float:
    return (op.act_in - skip_act + op.out) * bpe * scale + op.w_in * bpe + op.fixed_bytes * scale


def op_times(count: ModelCount, target: Target, precision: str, batch: int) -> tuple[OpTime, ...]:
    bpe = BYTES_PER_ELEMENT[precision]
    scale = batch / count.batch
    bw = target.mem_bw * target.efficiency.get("memory", 0.8)
    bw_curve = target.curves.get("bandwidth")  # calibrated: achieved bandwidth by bytes moved (caches)
    copy_curve = target.curves.get("copy")  # calibrated: transposing copies, slower than streaming
    times: list[OpTime] = []
    last_outputs: tuple[int, ...] = ()
    for op in count.ops:
        if op.op_class == "view":
            if op.out and target.copies_views and fusion_key(op.op) in target.copies_views:
                copied = 2 * op.out * bpe * scale  # the runtime copies it: read and write every element
                curve = copy_curve or bw_curve
                m = copied / (_interp(curve, copied) if curve else bw)
                t = m + target.kernel_overhead_s
                e = t * target.tdp_w * (target.idle_fraction + (1 - target.idle_fraction)) if target.tdp_w else 0.0
                times.append(OpTime(t, 0.0, m, target.kernel_overhead_s, "memory", e))
            else:
                times.append(OpTime(0.0, 0.0, 0.0, 0.0, "none", 0.0))
            continue
        flops = op.flops * scale
        chained = [sid for sid in op.inputs if sid in last_outputs]
        fused = bool(chained) and fusible(target, op)
        if fused:  # the producer's output stays on chip: neither re-read nor written twice
            skip = count.tensors.get(chained[0], 0) if chained[0] in count.float_tensors else 0
            nbytes = max(0.0, op_bytes(op, bpe, scale, skip) - op.out * bpe * scale)
        else:
            nbytes = op_bytes(op, bpe, scale)
        # a CPU works through the products of a batched matmul one after another: each runs at the
        # efficiency of its own size; a GPU runs them concurrently, so the total size is what counts
        size = op.unit_flops if op.unit_flops and target.kind in SERIAL_KINDS else flops
        rate = compute_rate(target, precision, op.op_class, size) if flops else 0.0
        c = flops / rate if rate else 0.0
        curve = copy_curve if (copy_curve and fusion_key(op.op) in TRANSPOSING_COPIES) else bw_curve
        m = nbytes / (_interp(curve, nbytes) if curve else bw) if nbytes else 0.0
        overhead = 0.0 if fused else target.kernel_overhead_s
        busy = max(c, m)
        t = busy + overhead
        if fused:
            bound = "fused"
        elif overhead > busy:
            bound = "overhead"
        else:
            bound = "compute" if c >= m else "memory"
        energy = 0.0
        if target.tdp_w is not None and t > 0:
            peak = target.peak_flops.get(precision, target.vector_flops) if op.op_class in MATRIX_CLASSES else target.vector_flops
            activity = max(flops / (peak * t) if peak else 0.0, nbytes / (target.mem_bw * t))
            energy = t * target.tdp_w * (target.idle_fraction + (1 - target.idle_fraction) * min(1.0, activity))
        times.append(OpTime(t, c, m, overhead, bound, energy))
        if op.outputs:
            last_outputs = op.outputs
    return tuple(times)


def estimate(count: ModelCount, target: Target, requested: str, batch: int) -> Estimate:
    precision = resolve_precision(target, requested)
    notes: list[str] = []
    if precision != requested:
        notes.append(f"{target.id} has no {requested} peak; estimated at {precision}")
    times = op_times(count, target, precision, batch)
    latency = sum(t.time_s for t in times)
    compute = sum(t.compute_s for t in times)
    mem = sum(t.memory_s for t in times)
    overhead = sum(t.overhead_s for t in times)
    by_bound = {"compute": 0.0, "memory": 0.0, "overhead": 0.0}
    for t in times:
        if t.bound in ("compute", "memory", "overhead"):
            by_bound[t.bound] += t.time_s
    bound = max(by_bound, key=lambda k: by_bound[k]) if latency else "none"
    scale = batch / count.batch
    flops = count.flops * scale
    peak = target.peak_flops.get(precision, target.vector_flops)
    weights = memory.weight_bytes(count, precision)
    acts = int(memory.peak_activation_bytes(count, precision) * scale)
    per_sample = acts / batch if batch else 0
    energy = sum(t.energy_j for t in times) if target.tdp_w is not None else None
    if energy is None:
        notes.append(f"{target.id} has no published power figure; energy not estimated")
    return Estimate(
        target=target.id,
        precision=precision,
        precision_requested=requested,
        batch=batch,
        latency_s=latency,
        throughput_per_s=batch / latency if latency else 0.0,
        bound=bound,
        compute_s=compute,
        memory_s=mem,
        overhead_s=overhead,
        utilisation=flops / (latency * peak) if latency and peak else 0.0,
        weights_bytes=weights,
        activation_bytes=acts,
        memory_bytes=weights + acts,
        fits=memory.fit(target, weights, acts),
        max_batch=memory.max_batch(target, weights, per_sample),
        energy_j=energy,
        kernels=sum(1 for t in times if t.overhead_s > 0),
        notes=tuple(notes),
        op_times=times,
    )


def training_step(count: ModelCount, target: Target, forward: Estimate, optimizer: str, dataset_size: int | None) -> TrainingEstimate:
    """Forward + backward (about 3x the forward) and an optimizer update over the parameters."""
    precision = forward.precision
    bpe = BYTES_PER_ELEMENT[precision]
    scale = forward.batch / count.batch
    params = count.params
    master = 4 * params if bpe < 4 else 0  # fp32 master weights under mixed precision
    state = OPTIMIZER_STATE_BYTES[optimizer] * params
    update_bytes = params * (bpe * 3 + OPTIMIZER_STATE_BYTES[optimizer] * 2 + (8 if master else 0))
    step = forward.latency_s * (1 + BACKWARD_FACTOR) + update_bytes / (target.mem_bw * target.efficiency.get("memory", 0.8))
    saved = int(memory.saved_activation_bytes(count, precision) * scale)
    mem = memory.weight_bytes(count, precision) + params * bpe + state + master + saved
    epoch = step * math.ceil(dataset_size / forward.batch) if dataset_size else None
    fits = None if target.mem_bytes is None else mem <= target.mem_bytes
    return TrainingEstimate(target.id, precision, forward.batch, optimizer, step, epoch, mem, fits)
