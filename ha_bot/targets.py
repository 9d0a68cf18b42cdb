"""Hardware targets: the built-in database (``ha_bot/data/targets/*.yaml``) and user targets.

Data files use human units (TFLOP/s, GB/s, GB, W, us); :class:`Target` holds SI units.
"""

from __future__ import annotations

from typing import NamedTuple

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")
BYTES_PER_ELEMENT = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


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
    fuses_elementwise: bool  # the runtime fuses elementwise ops into their producer
    efficiency: dict[str, float]  # op class -> max fraction of peak; "memory" -> bandwidth fraction
    half_flops: float  # op size (FLOPs) at which compute efficiency reaches half its max
    curves: dict[str, tuple[tuple[float, float], ...]]  # calibrated: op class -> ((op FLOPs, FLOP/s), ...)
    sources: dict[str, tuple[str, ...]]  # field group -> URLs
    notes: str
    origin: str  # "builtin" or the file it came from
