"""The roofline cost model on hand-built counts and targets whose numbers can be checked by hand."""

from __future__ import annotations

import pytest

from ha_bot import cost
from tests.helpers import count, op, target


def test_compute_bound_matmul():
    c = count(
        [
            op(
                macs=10**9,
                flops=2 * 10**9,
                act_in=1000,
                w_in=1000,
                out=1000,
                inputs=(0,),
                outputs=(1,),
            )
        ],
        {0: 1000, 1: 1000},
    )
    e = cost.estimate(c, target(), "fp16", 1)
    compute = 2e9 / 100e12
    assert e.compute_s == pytest.approx(compute)
    assert e.latency_s == pytest.approx(compute + 5e-6)
    assert e.bound == "compute" and e.precision == "fp16"
    assert e.throughput_per_s == pytest.approx(1 / e.latency_s)


def test_memory_bound_elementwise_and_bytes_follow_precision():
    n = 10**8
    c = count(
        [op("aten::relu", "elementwise", flops=n, act_in=n, out=n, inputs=(0,), outputs=(1,))],
        {0: n, 1: n},
    )
    fp32 = cost.estimate(c, target(), "fp32", 1)
    fp16 = cost.estimate(c, target(), "fp16", 1)
    assert fp32.memory_s == pytest.approx(2 * n * 4 / 1e12)
    assert fp16.memory_s == pytest.approx(2 * n * 2 / 1e12)
    assert fp32.bound == "memory"


def test_overhead_bound_tiny_kernels():
    ops = [
        op("aten::relu", "elementwise", flops=10, act_in=10, out=10, inputs=(i,), outputs=(i + 1,))
        for i in range(5)
    ]
    c = count(ops, {i: 10 for i in range(6)})
    e = cost.estimate(c, target(), "fp32", 1)
    assert e.bound == "overhead" and e.kernels == 5
    assert e.latency_s == pytest.approx(5 * 5e-6, rel=1e-3)


def test_fusion_removes_launch_and_round_trip():
    n = 10**6
    ops = [
        op(macs=n, flops=2 * n, act_in=n, w_in=0, out=n, inputs=(0,), outputs=(1,)),
        op("aten::relu", "elementwise", flops=n, act_in=n, out=n, inputs=(1,), outputs=(2,)),
    ]
    c = count(ops, {0: n, 1: n, 2: n})
    plain = cost.estimate(c, target(fuses_elementwise=False), "fp32", 1)
    fused = cost.estimate(c, target(fuses_elementwise=True), "fp32", 1)
    assert plain.kernels == 2 and fused.kernels == 1
    assert fused.op_times[1].bound == "fused" and fused.op_times[1].memory_s == 0
    assert fused.latency_s < plain.latency_s


def test_batch_scales_activations_not_weights():
    c = count(
        [op(macs=100, flops=200, act_in=10, w_in=1000, out=10, inputs=(0,), outputs=(1,))],
        {0: 10, 1: 10},
        params=1000,
    )
    one = cost.estimate(c, target(kernel_overhead_s=0), "fp32", 1)
    many = cost.estimate(c, target(kernel_overhead_s=0), "fp32", 8)
    bytes1 = (10 + 10 + 1000) * 4
    bytes8 = (80 + 80 + 1000) * 4
    assert one.memory_s == pytest.approx(bytes1 / 1e12)
    assert many.memory_s == pytest.approx(bytes8 / 1e12)
    assert many.weights_bytes == one.weights_bytes == 4000
    assert many.activation_bytes == 8 * one.activation_bytes


@pytest.mark.parametrize(
    ("peaks", "asked", "used"),
    [
        ({"fp32": 1e12}, "fp16", "fp32"),
        ({"fp32": 1e12, "bf16": 2e12}, "fp16", "bf16"),
        ({"int8": 4e12}, "fp32", "int8"),
        ({"fp32": 1e12, "fp16": 2e12}, "fp8", "fp16"),
        ({"fp32": 1e12, "fp16": 2e12, "fp8": 4e12}, "fp8", "fp8"),
    ],
)
def test_precision_fallback_is_reported(peaks, asked, used):
    c = count([op(macs=10, flops=20, act_in=1, out=1, inputs=(0,), outputs=(1,))], {0: 1, 1: 1})
    e = cost.estimate(c, target(peak_flops=peaks), asked, 1)
    assert e.precision == used and e.precision_requested == asked
    assert bool(e.notes) == (used != asked)


def test_memory_fit_and_max_batch():
    # weights 1000 x 4 B; activations peak 2 x 100 x 4 B per sample
    c = count(
        [op(macs=1, flops=2, act_in=100, w_in=1000, out=100, inputs=(0,), outputs=(1,))],
        {0: 100, 1: 100},
        params=1000,
    )
    e = cost.estimate(c, target(mem_bytes=4000 + 800 * 10), "fp32", 1)
    assert e.fits is True and e.max_batch == 10
    big = cost.estimate(c, target(mem_bytes=4000 + 800 * 10), "fp32", 11)
    assert big.fits is False
    unknown = cost.estimate(c, target(mem_bytes=None), "fp32", 1)
    assert unknown.fits is None and unknown.max_batch is None


def test_mcu_weights_in_flash_activations_in_sram():
    c = count(
        [op(macs=1, flops=2, act_in=100, w_in=1000, out=100, inputs=(0,), outputs=(1,))],
        {0: 100, 1: 100},
        params=1000,
    )
    t = target(mem_bytes=1000, flash_bytes=5000, peak_flops={"fp32": 1e9, "int8": 4e9})
    e = cost.estimate(c, t, "int8", 1)
    assert e.weights_bytes == 1000 and e.fits is True  # 1000 B in flash, 200 B activations in SRAM
    assert e.max_batch == 5


def test_energy_power_model():
    c = count(
        [op(macs=10**9, flops=2 * 10**9, act_in=0, out=0, inputs=(0,), outputs=(1,))], {0: 0, 1: 0}
    )
    t = target(kernel_overhead_s=0)
    e = cost.estimate(c, t, "fp16", 1)
    # fully compute-bound at 100% of peak: full TDP for the whole op
    assert e.energy_j == pytest.approx(e.latency_s * 100.0)
    none = cost.estimate(c, target(tdp_w=None), "fp16", 1)
    assert none.energy_j is None and any("energy" in n for n in none.notes)


def test_efficiency_by_size_and_calibrated_curve():
    t = target(half_flops=1e9)
    assert cost.compute_rate(t, "fp16", "matmul", 1e9 * 10) / 100e12 == pytest.approx(10 / 11)
    curve = ((1e6, 1e9), (1e9, 1e11))
    tc = target(curves={"matmul": curve})
    assert cost.compute_rate(tc, "fp32", "matmul", 1e9) == pytest.approx(1e11)
    mid = cost.compute_rate(tc, "fp32", "matmul", 10**7.5)
    assert mid == pytest.approx(1e10, rel=1e-6)  # log-log midpoint
    assert cost.compute_rate(tc, "fp16", "matmul", 1e9) == pytest.approx(
        1e12
    )  # scaled by the fp16/fp32 peak ratio


@pytest.mark.parametrize(("optimizer", "state"), [("sgd", 0), ("sgd_momentum", 4), ("adamw", 8)])
def test_training_step_memory_and_time(optimizer, state):
    p = 1000
    c = count(
        [op(macs=10**6, flops=2 * 10**6, act_in=10, w_in=p, out=10, inputs=(0,), outputs=(1,))],
        {0: 10, 1: 10},
        params=p,
    )
    t = target()
    fwd = cost.estimate(c, t, "fp32", 4)
    tr = cost.training_step(c, t, fwd, optimizer, dataset_size=100)
    saved = 4 * (10 + 10) * 4
    assert tr.memory_bytes == p * 4 + p * 4 + p * state + saved
    assert tr.step_s > 3 * fwd.latency_s * 0.999
    assert tr.epoch_s == pytest.approx(tr.step_s * 25)
    half = cost.training_step(c, t, cost.estimate(c, t, "fp16", 4), optimizer, None)
    assert (
        half.memory_bytes == p * 2 + p * 2 + p * state + p * 4 + saved // 2
    )  # + fp32 master weights
    assert half.epoch_s is None


def test_fusion_list_folds_only_the_named_ops():
    n = 10**6
    ops = [
        op(macs=n, flops=2 * n, act_in=n, out=n, inputs=(0,), outputs=(1,)),
        op("aten::relu_", "elementwise", flops=n, act_in=n, out=n, inputs=(1,), outputs=()),
        op("aten::gelu", "elementwise", flops=n, act_in=n, out=n, inputs=(1,), outputs=(2,)),
    ]
    c = count(ops, {0: n, 1: n, 2: n})
    e = cost.estimate(c, target(fuses_elementwise=frozenset({"relu", "batchnorm"})), "fp32", 1)
    assert [t.bound for t in e.op_times][1] == "fused"
    assert [t.bound for t in e.op_times][2] != "fused" and e.kernels == 2


@pytest.mark.parametrize(("kind", "serial"), [("cpu", True), ("gpu", False)])
def test_batched_products_run_at_their_own_size_on_serial_targets(kind, serial):
    # 64 products of 1 MFLOP each: a CPU pays the small-op efficiency 64 times, a GPU runs them together
    unit, total = 10**6, 64 * 10**6
    rec = op("aten::matmul", "matmul", macs=total // 2, flops=total, act_in=1, out=1, inputs=(0,), outputs=(1,))._replace(unit_flops=unit)
    c = count([rec], {0: 1, 1: 1})
    t = target(kind=kind, half_flops=10**7, kernel_overhead_s=0)
    e = cost.estimate(c, t, "fp16", 1)
    size = unit if serial else total
    half = 10**7 * 100e12 / cost.reference_peak(t)  # half_flops is stated at the reference peak
    assert e.compute_s == pytest.approx(total / (100e12 * size / (size + half)))


def test_calibrated_bandwidth_curve_makes_cache_resident_ops_faster():
    small, large = 10**5, 10**9  # elements: 0.8 MB and 8 GB moved at fp32
    curve = ((1e6, 100e9), (1e9, 25e9))  # bytes moved -> achieved B/s (cache, then DRAM)
    t = target(curves={"bandwidth": curve}, kernel_overhead_s=0)
    for n, bw in ((small, None), (large, 25e9)):
        c = count([op("aten::relu", "elementwise", flops=n, act_in=n, out=n, inputs=(0,), outputs=(1,))], {0: n, 1: n})
        e = cost.estimate(c, t, "fp32", 1)
        nbytes = 2 * n * 4
        expected_bw = bw if bw else cost._interp(curve, nbytes)
        assert e.memory_s == pytest.approx(nbytes / expected_bw)
    assert cost._interp(curve, 8e5) > 25e9 * 3


def test_views_a_runtime_copies_cost_their_bytes():
    n = 10**6
    view = op("aten::permute", "view", out=n, inputs=(0,), outputs=())
    c = count([view], {0: n})
    assert cost.estimate(c, target(), "fp32", 1).latency_s == 0  # a view: no kernel
    e = cost.estimate(c, target(copies_views=frozenset({"permute"})), "fp32", 1)
    assert e.memory_s == pytest.approx(2 * n * 4 / 1e12) and e.kernels == 1


def test_transposing_copies_use_the_calibrated_copy_curve():
    n = 10**6
    contiguous = op("aten::contiguous", "memory", act_in=n, out=n, inputs=(0,), outputs=(1,))
    cat = op("aten::cat", "memory", act_in=n, out=n, inputs=(0,), outputs=(2,))
    c = count([contiguous, cat], {0: n, 1: n, 2: n})
    t = target(kernel_overhead_s=0, curves={"bandwidth": ((1e3, 100e9), (1e10, 100e9)), "copy": ((1e3, 20e9), (1e10, 20e9))})
    e = cost.estimate(c, t, "fp32", 1)
    assert e.op_times[0].memory_s == pytest.approx(8e6 / 20e9)  # a transposing copy
    assert e.op_times[1].memory_s == pytest.approx(8e6 / 100e9)  # a streaming copy
