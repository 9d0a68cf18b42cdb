"""Memory footprint: weights plus peak live activations from liveness over the traced order. Pure."""

from __future__ import annotations

from ha_bot.records import ModelCount
from ha_bot.targets import BYTES_PER_ELEMENT, Target


def storage_bytes(count: ModelCount, precision: str) -> dict[int, int]:
    bpe = BYTES_PER_ELEMENT[precision]
    return {sid: size * bpe if sid in count.float_tensors else size for sid, size in count.tensors.items()}


def peak_activation_bytes(count: ModelCount, precision: str) -> int:
    """Largest total size of simultaneously live activation storages, at the traced batch.

    A storage is live from the op that creates it (or the start, for model inputs) to its last
    reader; a storage nobody reads afterwards (a model output) stays live to the end. Views and
    in-place ops share their input's storage, so they add nothing.
    """
    sizes = storage_bytes(count, precision)
    n = len(count.ops)
    born: dict[int, int] = dict.fromkeys(sizes, 0)
    last: dict[int, int] = {}
    for i, op in enumerate(count.ops):
        for sid in op.outputs:
            born[sid] = i
        for sid in op.inputs:
            last[sid] = i
    delta = [0] * (n + 2)
    for sid, size in sizes.items():
        start = born.get(sid, 0)
        end = last.get(sid, n) if last.get(sid, -1) >= start else n
        delta[start] += size
        delta[end + 1] -= size
    peak = live = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def saved_activation_bytes(count: ModelCount, precision: str) -> int:
    """Activations kept for the backward pass: every op output plus the inputs (training memory)."""
    return sum(storage_bytes(count, precision).values())


def weight_bytes(count: ModelCount, precision: str) -> int:
    return (count.params + count.buffers) * BYTES_PER_ELEMENT[precision] + count.weight_fixed_bytes


def fit(target: Target, weights: float, activations: float) -> bool | None:
    """Whether weights and activations fit the target's memory (None: capacity unknown)."""
    if target.mem_bytes is None:
        return None
    if target.flash_bytes is not None:  # MCU: weights in flash, activations in SRAM
        return weights <= target.flash_bytes and activations <= target.mem_bytes
    return weights + activations <= target.mem_bytes


def max_batch(target: Target, weights: float, activations_per_sample: float) -> int | None:
    """Largest batch whose footprint fits (0: not even one sample; None: unknown capacity)."""
    if target.mem_bytes is None:
        return None
    if target.flash_bytes is not None:
        if weights > target.flash_bytes:
            return 0
        room = target.mem_bytes
    else:
        room = target.mem_bytes - weights
    if room <= 0:
        return 0
    if activations_per_sample <= 0:
        return None
    return int(room // activations_per_sample)
