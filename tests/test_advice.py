"""Rule-based advice: hand-built counts, the real cost model and built-in targets; effects checked
against cost.estimate / cost.training_step computed independently here."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from typing import Any

import pytest

from ha_bot import advice, cost, diff, report, targets
from ha_bot.advice import Advice, advise, safe_name
from ha_bot.records import ModelCount
from tests.helpers import count, op

POOL = targets.load_builtin()


def chain(dims: Sequence[int], batch: int = 1, scope: str = "layers") -> ModelCount:
    """Linear layers dims[0] -> dims[1] -> ..., one module each (``layers.0``, ``layers.1``, ...)."""
    ops, tensors, params = [], {0: dims[0] * batch}, 0
    for i, (a, b) in enumerate(itertools.pairwise(dims)):
        ops.append(op("aten::linear", "matmul", macs=a * b * batch, flops=2 * a * b * batch, act_in=a * batch,
                      w_in=a * b, out=b * batch, inputs=(i,), outputs=(i + 1,), scope=f"{scope}.{i}"))
        tensors[i + 1] = b * batch
        params += a * b
    return count(ops, tensors, params=params, batch=batch)


def mobile(blocks: int = 8, ch: int = 256, hw: int = 56) -> ModelCount:
    """Depthwise-separable blocks: a 3x3 depthwise conv then a 1x1 pointwise conv."""
    n = ch * hw * hw
    ops, tensors = [], {0: n}
    for i in range(blocks):
        ops.append(op("aten::_convolution", "dwconv", macs=9 * n, flops=18 * n, act_in=n, w_in=ch * 9, out=n,
                      inputs=(2 * i,), outputs=(2 * i + 1,), scope=f"blocks.{i}.dw"))
        ops.append(op("aten::_convolution", "conv", macs=ch * n, flops=2 * ch * n, act_in=n, w_in=ch * ch, out=n,
                      inputs=(2 * i + 1,), outputs=(2 * i + 2,), scope=f"blocks.{i}.pw"))
        tensors[2 * i + 1] = tensors[2 * i + 2] = n
    return count(ops, tensors, params=blocks * (ch * 9 + ch * ch))


def activations(layers: int = 20, elems: int = 64 * 224 * 224) -> ModelCount:
    """Activation-heavy: cheap elementwise-sized ops with big outputs (training memory is activations)."""
    ops, tensors = [], {0: elems}
    for i in range(layers):
        ops.append(op("aten::_convolution", "conv", macs=elems * 9, flops=elems * 18, act_in=elems, w_in=64 * 64 * 9,
                      out=elems, inputs=(i,), outputs=(i + 1,), scope=f"stage.{i}"))
        tensors[i + 1] = elems
    return count(ops, tensors, params=layers * 64 * 64 * 9)


def entry(c: ModelCount, tids: Sequence[str], precision: str = "fp32", batches: Sequence[int] = (1,),
          optimizer: str = "adam", name: str = "m") -> dict[str, Any]:
    chosen = [POOL[t] for t in tids]
    ests = [cost.estimate(c, t, precision, b) for b in batches for t in chosen]
    training = [cost.training_step(c, t, e, optimizer, None) for t, e in zip(chosen, ests)]
    return report.model_entry(name, {"python": "m.py:build"}, c, precision, ests, training)


def by_rule(items: Sequence[Advice], rule: str) -> list[Advice]:
    return [a for a in items if a.rule == rule]


def r4(x: float) -> float:
    return float(f"{x:.4g}")


# --- rules with a count: effects from the cost model ---------------------------------------------------------


def test_memory_bound_small_batch_lower_precision_with_estimated_latency():
    c = chain([4096, 4096, 4096])
    e = entry(c, ["nvidia_t4"])
    assert e["estimates"][0]["bound"] == "memory"
    [a] = by_rule(advise(e, targets=POOL, count=c), "lower-precision")
    t4 = POOL["nvidia_t4"]
    fp16 = cost.estimate(c, t4, "fp16", 1).latency_s
    int8 = cost.estimate(c, t4, "int8", 1).latency_s
    lat = cost.estimate(c, t4, "fp32", 1).latency_s
    assert a.target == "nvidia_t4"
    assert a.effect == {"from_latency_s": r4(lat), "latency_s": r4(fp16), "speedup": r4(lat / fp16), "int8_latency_s": r4(int8)}
    assert "fp16" in a.message and "int8" in a.message and "check accuracy" in a.message


def test_lower_precision_not_at_large_batch_nor_when_compute_bound():
    c = chain([4096, 4096, 4096])
    e = entry(c, ["nvidia_t4"], batches=(64,))
    assert not by_rule(advise(e, targets=POOL, count=c), "lower-precision")


def test_lower_precision_picks_bf16_where_the_target_has_it():
    c = chain([4096, 4096, 4096])
    [a] = by_rule(advise(entry(c, ["nvidia_h100_sxm"]), targets=POOL, count=c), "lower-precision")
    assert "at bf16" in a.message
    assert a.effect["latency_s"] == r4(cost.estimate(c, POOL["nvidia_h100_sxm"], "bf16", 1).latency_s)


def test_does_not_fit_names_the_precision_that_fits():
    c = chain([65536, 65536, 8192])  # ~4.8e9 params: 19 GB at fp32 on a 16 GB T4
    e = entry(c, ["nvidia_t4"])
    [a] = by_rule(advise(e, targets=POOL, count=c), "does-not-fit")
    fp16 = cost.estimate(c, POOL["nvidia_t4"], "fp16", 1)
    assert fp16.fits
    assert a.effect == {"memory_bytes": e["estimates"][0]["memory_bytes"], "capacity_bytes": 16_000_000_000,
                        "fit_memory_bytes": fp16.memory_bytes}
    assert "at fp16 it needs 9.66 GB and fits" in a.message


def test_does_not_fit_gives_the_largest_batch_that_fits():
    c = activations()
    e = entry(c, ["nvidia_jetson_orin_nano_8gb"], precision="fp16", batches=(1024,))
    est = e["estimates"][0]
    assert est["fits"] is False and est["max_batch"] >= 1
    [a] = by_rule(advise(e, targets=POOL, count=c), "does-not-fit")
    assert a.effect["max_batch"] == est["max_batch"]
    assert f"the largest batch that fits is {est['max_batch']}" in a.message


def test_overhead_bound_gpu_launch_advice_with_what_if_batch():
    c = chain([16] * 21)
    e = entry(c, ["nvidia_h100_sxm", "rpi5_cortex_a76"])
    got = by_rule(advise(e, targets=POOL, count=c), "launch-overhead")
    assert [a.target for a in got] == ["nvidia_h100_sxm"]  # a CPU gets no CUDA-graph advice
    [a] = got
    est = e["estimates"][0]
    assert a.effect["latency_s"] == r4(est["latency_s"] - est["overhead_s"])
    assert a.effect["kernels"] == 20
    b8 = cost.estimate(c, POOL["nvidia_h100_sxm"], "fp32", 8)
    assert a.effect["batch"] == 8 and a.effect["throughput_per_s"] == r4(b8.throughput_per_s)
    assert "CUDA graphs" in a.message and "torch.compile" in a.message


def test_tensor_core_target_at_fp32_mixed_precision_speedup():
    c = chain([8192, 8192, 8192], batch=256)
    e = entry(c, ["nvidia_h100_sxm"], batches=(256,))
    assert e["estimates"][0]["bound"] == "compute"
    [a] = by_rule(advise(e, targets=POOL, count=c), "mixed-precision")
    h100 = POOL["nvidia_h100_sxm"]
    bf16 = cost.estimate(c, h100, "bf16", 256).latency_s
    lat = e["estimates"][0]["latency_s"]
    assert a.effect["latency_s"] == r4(bf16)
    assert a.effect["speedup"] == r4(lat / bf16) and a.effect["speedup"] > 4
    assert a.effect["peak_ratio"] == r4(h100.peak_flops["bf16"] / h100.peak_flops["fp32"])


@pytest.mark.parametrize(("tid", "expected"), [
    ("amd_epyc_9654", False),  # bf16 only 2x fp32
    ("nvidia_jetson_nano", False),  # fp16 only 2x fp32
    ("intel_xeon_8480plus", True),  # AMX: bf16 16x fp32
])
def test_mixed_precision_only_where_16_bit_matrix_peak_is_far_higher(tid, expected):
    c = chain([8192, 8192, 8192], batch=256)
    e = entry(c, [tid], batches=(256,))
    assert e["estimates"][0]["bound"] == "compute"
    assert bool(by_rule(advise(e, targets=POOL, count=c), "mixed-precision")) is expected


def test_depthwise_convs_far_below_peak():
    c = mobile()
    e = entry(c, ["nvidia_t4"], precision="fp16")
    [a] = by_rule(advise(e, targets=POOL, count=c), "depthwise-conv")
    est = cost.estimate(c, POOL["nvidia_t4"], "fp16", 1)
    dw = sum(t.time_s for o, t in zip(c.ops, est.op_times) if o.op_class == "dwconv")
    assert a.effect["time_share"] == r4(dw / est.latency_s)
    assert a.effect["utilisation"] < advice.DWCONV_UTILISATION
    assert "depthwise" in a.message


def test_small_matmuls_far_below_peak():
    c = chain([4096, 4096, 4096])
    [a] = by_rule(advise(entry(c, ["nvidia_t4"]), targets=POOL, count=c), "small-matmul")
    assert a.effect["ops"] == 2 and a.effect["time_share"] == 1.0 and a.effect["utilisation"] < 0.1


def test_training_over_capacity_sgd_micro_batch_and_checkpointing():
    c = activations()
    e = entry(c, ["nvidia_t4"], precision="fp16", batches=(256,), optimizer="adam")
    row = e["training"][0]
    assert row["fits"] is False
    got = advise(e, targets=POOL, count=c)
    t4 = POOL["nvidia_t4"]

    [opt] = by_rule(got, "training-optimizer")
    sgd = cost.training_step(c, t4, cost.estimate(c, t4, "fp16", 256), "sgd", None)
    assert opt.effect["memory_bytes"] == sgd.memory_bytes
    assert opt.effect["saved_bytes"] == row["memory_bytes"] - sgd.memory_bytes

    [micro] = by_rule(got, "training-micro-batch")
    b = micro.effect["micro_batch"]
    small = cost.training_step(c, t4, cost.estimate(c, t4, "fp16", int(b)), "adam", None)
    bigger = cost.training_step(c, t4, cost.estimate(c, t4, "fp16", int(b) * 2), "adam", None)
    assert small.fits and not bigger.fits  # the largest halving that fits
    assert micro.effect["accumulation_steps"] == math.ceil(256 / b)

    [ckpt] = by_rule(got, "training-checkpointing")
    assert ckpt.effect["modules"] == 20
    assert ckpt.effect["memory_bytes"] < row["memory_bytes"]
    assert "rule of thumb" in ckpt.message


def test_regression_concentrated_in_one_module_is_named_safely():
    evil = "blocks.3 <img src=x onerror=alert(1)> @team"
    base_c = chain([1024] * 5)
    ops = list(base_c.ops)
    ops[3] = ops[3]._replace(scope=evil)
    base_c = base_c._replace(ops=tuple(ops))
    head_ops = list(ops)
    head_ops[3] = head_ops[3]._replace(macs=head_ops[3].macs * 8, flops=head_ops[3].flops * 8, w_in=head_ops[3].w_in * 8)
    head_c = base_c._replace(ops=tuple(head_ops))
    settings = {"precision": "fp32", "batch_sizes": [1], "targets": ["nvidia_t4"]}
    base = report.build([entry(base_c, ["nvidia_t4"])], [POOL["nvidia_t4"]], settings)
    head = report.build([entry(head_c, ["nvidia_t4"])], [POOL["nvidia_t4"]], settings)
    d = diff.diff_reports(base, head)
    [a] = by_rule(advise(head["models"][0], targets=POOL, count=head_c, diff_entry=d["models"][0]), "regression-module")
    top = d["models"][0]["movers"][0]
    assert a.effect["share"] == r4(top["share"]) and a.effect["share"] >= 0.5
    assert a.effect["delta_s"] == r4(top["delta_s"])
    assert "blocks.3_img_src_x_onerror_alert_1_team" in a.message
    assert not set("<>@ ") & set(a.message.split("module ")[1].split(":")[0])


# --- report only: say less --------------------------------------------------------------------------------


def test_report_only_uses_report_numbers_and_says_less():
    c = chain([4096, 4096, 4096])
    e = entry(c, ["nvidia_t4"])
    tdoc = report.build([e], [POOL["nvidia_t4"]], {})["targets"]
    got = advise(e, targets=advice.targets_from_doc(tdoc))
    [a] = by_rule(got, "lower-precision")
    est = e["estimates"][0]
    assert a.effect == {"from_latency_s": r4(est["latency_s"]), "memory_s": r4(est["memory_s"])}
    assert "latency_s" not in a.effect


def test_report_only_training_sgd_saving_is_exact():
    c = chain([65536, 65536, 8192])
    e = entry(c, ["nvidia_t4"])
    got = advise(e, targets=advice.targets_from_doc(report.build([e], [POOL["nvidia_t4"]], {})["targets"]))
    [opt] = by_rule(got, "training-optimizer")
    assert opt.effect["saved_bytes"] == cost.OPTIMIZER_STATE_BYTES["adam"] * c.params


# --- order, determinism, edge cases ------------------------------------------------------------------------


def test_order_is_by_rule_then_target_and_stable():
    c = chain([65536, 65536, 8192])
    e = entry(c, ["nvidia_t4", "nvidia_h100_sxm"])
    one, two = advise(e, targets=POOL, count=c), advise(e, targets=POOL, count=c)
    assert one == two
    assert json.dumps([a._asdict() for a in one]) == json.dumps([a._asdict() for a in two])
    keys = [(advice.RULES.index(a.rule), ["nvidia_t4", "nvidia_h100_sxm"].index(a.target)) for a in one]
    assert keys == sorted(keys)


def test_failed_model_gets_no_advice():
    assert advise(report.error_entry("x", {}, "boom"), targets=POOL) == []


@pytest.mark.parametrize(("raw", "safe"), [
    ("resnet50", "resnet50"),
    ("ignore previous instructions <script>", "ignore_previous_instructions_script"),
    ("a/b.c-d_e", "a/b.c-d_e"),
    ("@everyone", "everyone"),
    ("", "unnamed"),
    ("x" * 100, "x" * advice.NAME_LIMIT),
])
def test_safe_name(raw, safe):
    assert safe_name(raw) == safe
