"""Small builders shared by tests: hand-made counts and targets with numbers you can check by hand."""

from __future__ import annotations

from ha_bot.records import ModelCount, OpRecord
from ha_bot.targets import Target


def target(**kw: object) -> Target:
    base = dict(
        id="toy",
        name="Toy accelerator",
        kind="gpu",
        peak_flops={"fp32": 10e12, "fp16": 100e12},
        vector_flops=10e12,
        mem_bw=1e12,
        mem_bytes=1e9,
        onchip_bytes=None,
        flash_bytes=None,
        tdp_w=100.0,
        idle_fraction=0.2,
        kernel_overhead_s=5e-6,
        fuses_elementwise=False,
        efficiency={
            "matmul": 1.0,
            "conv": 1.0,
            "elementwise": 1.0,
            "memory": 1.0,
            "other": 1.0,
            "norm": 1.0,
        },
        half_flops=0.0,
        curves={},
        sources={"compute": ("https://example.com",)},
        notes="",
        origin="test",
    )
    base.update(kw)
    return Target(**base)  # type: ignore[arg-type]


def op(
    op: str = "aten::linear",
    cls: str = "matmul",
    macs: int = 0,
    flops: int = 0,
    act_in: int = 0,
    w_in: int = 0,
    out: int = 0,
    inputs: tuple[int, ...] = (),
    outputs: tuple[int, ...] = (),
    supported: bool = True,
    scope: str = "",
) -> OpRecord:
    return OpRecord(op, scope, cls, macs, flops, act_in, w_in, out, 0, supported, inputs, outputs)


def count(
    ops: list[OpRecord], tensors: dict[int, int], params: int = 0, batch: int = 1
) -> ModelCount:
    return ModelCount(
        "torch", batch, params, 0, 0, tensors.get(0, 0), tensors, frozenset(tensors), tuple(ops)
    )
