"""ha-bot calibrate: the target document it writes, derive_for, and the accuracy statistics."""

from __future__ import annotations

import argparse
import importlib.util
import io
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from ha_bot import calibrate, cost
from ha_bot.records import ModelCount, OpRecord
from ha_bot.targets import load_builtin, load_targets_file, parse_target

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def calibrated() -> tuple[dict[str, Any], list[str]]:
    messages: list[str] = []
    doc = calibrate.calibrate(name="tiny_cal", budget_s=1.0, progress=messages.append)
    return doc, messages


def _count(op_class: str, flops: int, elems: int) -> ModelCount:
    op = OpRecord("aten::x", "", op_class, flops // 2, flops, elems, 0, elems, 0, True, (0,), (1,))
    return ModelCount("torch", 1, 0, 0, 0, elems, {0: elems, 1: elems}, frozenset({0, 1}), (op,))


def test_tiny_budget_gives_a_valid_target(calibrated: tuple[dict[str, Any], list[str]]) -> None:
    doc, messages = calibrated
    target = parse_target(doc, origin="calibration")
    assert target.id == "tiny_cal" and target.kind == "cpu"
    assert set(calibrate.CURVE_CLASSES) <= set(target.curves)
    assert target.peak_flops["fp32"] > 1e9 and target.mem_bw > 1e8
    assert 0 < target.kernel_overhead_s < 1e-3
    assert doc["sources"]["calibration"][0].startswith("ha-bot calibrate on ")
    assert any("per-op overhead" in m for m in messages) and any("done in" in m for m in messages)
    for cls, points in target.curves.items():
        sizes = [f for f, _ in points]
        assert sizes == sorted(sizes), cls
        assert all(r > 0 for _, r in points), cls
    # monotone-ish: a tiny GEMM or attention is far slower per FLOP than a big one (> 10x on any
    # machine, so that a loaded machine cannot flip it); convs (~2x) only when measured quietly
    quiet = "never ran while the machine was quiet" not in doc["notes"]
    for cls in ("matmul", "attention", "conv") if quiet else ("matmul", "attention"):
        pts = target.curves[cls]
        assert len(pts) >= 2 and max(r for _, r in pts[1:]) > pts[0][1], cls


def test_cost_model_uses_the_curves(calibrated: tuple[dict[str, Any], list[str]]) -> None:
    target = parse_target(calibrated[0], origin="calibration")
    f = 1e8
    assert cost.compute_rate(target, "fp32", "matmul", f) == pytest.approx(cost._interp(target.curves["matmul"], f))
    est = cost.estimate(_count("matmul", int(f), 10_000), target, "fp32", 1)
    assert est.latency_s >= f / target.peak_flops["fp32"]
    assert est.latency_s == pytest.approx(f / cost._interp(target.curves["matmul"], f) + target.kernel_overhead_s, rel=1e-6)


def test_yaml_round_trip_and_cli(calibrated: tuple[dict[str, Any], list[str]], tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate, "calibrate", lambda **kw: {**calibrated[0], "id": kw["name"]})
    parser = argparse.ArgumentParser()
    calibrate.register(parser.add_subparsers(dest="command"))
    out = tmp_path / "here.yaml"
    args = parser.parse_args(["calibrate", "--out", str(out), "--name", "my_box", "--budget", "5"])
    assert args.func(args) == 0
    loaded = load_targets_file(str(out))
    assert list(loaded) == ["my_box"]
    assert loaded["my_box"].curves.keys() == parse_target(calibrated[0], origin="x").curves.keys()
    from ha_bot.main import main

    assert main(["targets", "--targets-file", str(out), "my_box"]) == 0


def test_dump_yaml_is_plain_yaml(calibrated: tuple[dict[str, Any], list[str]]) -> None:
    buf = io.StringIO()
    calibrate.dump_yaml(calibrated[0], buf)
    assert buf.getvalue().startswith("# ha-bot calibrated target")
    assert "curves:" in buf.getvalue() and "!!" not in buf.getvalue()


def test_cuda_without_a_gpu_is_a_clear_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RuntimeError, match="CUDA"):
        calibrate.make_engine("torch", "cuda")
    with pytest.raises(RuntimeError, match="CUDAExecutionProvider"):
        calibrate.make_engine("onnxruntime", "cuda")


def test_bench_flops_follow_the_counting_conventions() -> None:
    cls, kind, dims, flops, _ = calibrate._conv(64, 64, 28, 3)
    assert (cls, flops) == ("conv", 2 * 64 * 28 * 28 * 64 * 9)
    assert calibrate._conv(96, 96, 56, 3, groups=96)[0] == "dwconv"
    assert calibrate._conv(128, 128, 56, 3, groups=32)[0] == ""  # grouped: reported only
    heads, length, dim = 12, 128, 64
    assert calibrate._attention(heads, length, dim)[3] == 2 * heads * length * length * 2 * dim + 4 * heads * length * length
    assert calibrate._rows("layernorm", "norm", 8, 64, 6, 8)[3] == 6 * 8 * 64
    assert len(calibrate.bench_specs(thin=True)) < len(calibrate.bench_specs())
    assert {s[0] for s in calibrate.bench_specs(thin=True)} >= set(calibrate.CURVE_CLASSES)


def test_onnx_chains_run_and_chain(calibrated: tuple[dict[str, Any], list[str]]) -> None:
    import onnx

    for spec in calibrate.bench_specs(thin=True)[::4]:
        bench = calibrate.Bench(*spec, chain=3 if calibrate._chainable(spec[1]) else 1)
        model, feeds = calibrate.onnx_chain(bench)
        onnx.checker.check_model(model, full_check=True)
        fn = calibrate.OrtEngine("cpu").prepare_model(model, feeds)
        out = fn()
        assert out[0].size > 0


# --- derive_for ---------------------------------------------------------------------------------


CAL = {
    "id": "cal", "kind": "cpu", "peak_tflops": {"fp32": 0.2}, "mem_bw_gbps": 20, "kernel_overhead_us": 1,
    "efficiency": {"memory": 1.0},
    "curves": {"matmul": [[1e6, 20], [1e8, 150], [1e9, 200]], "elementwise": [[1e4, 1], [1e6, 4]]},
}


def _flat(points: Any) -> list[float]:
    return [v for pair in points for v in pair]


def test_derive_for_shifts_curves_by_the_ceiling_ratio() -> None:
    cal = parse_target(CAL, origin="t")
    h200 = load_builtin()["nvidia_h200_sxm"]
    derived = calibrate.derive_for(h200, cal)
    k = h200.peak_flops["fp32"] * h200.efficiency["matmul"] / 200e9
    assert _flat(derived.curves["matmul"]) == pytest.approx(_flat((f * k, r * k) for f, r in cal.curves["matmul"]))
    # the ceiling is the target's own peak x efficiency
    assert max(r for _, r in derived.curves["matmul"]) == pytest.approx(h200.peak_flops["fp32"] * h200.efficiency["matmul"])
    # an op k times larger takes as long on the target as the op did on the calibrated machine
    for f in (3e5, 1e7, 5e8):
        t_cal = f / cost.compute_rate(cal, "fp32", "matmul", f)
        t_new = k * f / cost.compute_rate(derived, "fp32", "matmul", k * f)
        assert t_new == pytest.approx(t_cal, rel=1e-9)
    # bandwidth-bound classes: no faster than the bandwidth ratio allows
    bw_ratio = h200.mem_bw * h200.efficiency["memory"] / (cal.mem_bw * 1.0)
    k_e = min(h200.vector_flops * h200.efficiency["elementwise"], 4e9 * bw_ratio) / 4e9
    assert _flat(derived.curves["elementwise"]) == pytest.approx(_flat((f * k_e, r * k_e) for f, r in cal.curves["elementwise"]))
    # overhead, fusion and peaks stay the target's own; the note says where the curves came from
    assert derived.kernel_overhead_s == h200.kernel_overhead_s and derived.peak_flops == h200.peak_flops
    assert "derived from the calibration of cal" in derived.notes


def test_derive_for_keeps_measured_curves() -> None:
    cal = parse_target(CAL, origin="t")
    own = parse_target({**CAL, "id": "own", "curves": {"matmul": [[1e6, 1], [1e9, 2]]}}, origin="t")
    derived = calibrate.derive_for(own, cal)
    assert derived.curves["matmul"] == own.curves["matmul"]
    assert "elementwise" in derived.curves
    full = parse_target({**CAL, "id": "full"}, origin="t")
    assert calibrate.derive_for(full, cal) == full


def test_derived_bf16_estimates_scale_with_the_precision_peak() -> None:
    cal = parse_target(CAL, origin="t")
    derived = calibrate.derive_for(load_builtin()["nvidia_h200_sxm"], cal)
    f = 1e10
    ratio = cost.compute_rate(derived, "bf16", "matmul", f) / cost.compute_rate(derived, "fp32", "matmul", f)
    assert ratio == pytest.approx(derived.peak_flops["bf16"] / derived.peak_flops["fp32"])


# --- the accuracy benchmark's statistics ------------------------------------------------------------


def _accuracy() -> Any:
    spec = importlib.util.spec_from_file_location("ha_bot_accuracy", ROOT / "benchmarks" / "accuracy.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["ha_bot_accuracy"] = module
    spec.loader.exec_module(module)
    return module


def test_spearman_on_known_inputs() -> None:
    acc = _accuracy()
    assert acc.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert acc.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert acc.spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0)  # ranks, not values
    # Wikipedia's worked example (IQ vs hours of TV): rho = -29/165
    iq = [106, 100, 86, 101, 99, 103, 97, 113, 112, 110]
    tv = [7, 27, 2, 50, 28, 29, 20, 12, 6, 17]
    assert acc.spearman(iq, tv) == pytest.approx(-29 / 165)
    assert acc.ranks([10, 20, 20, 30]) == [1.0, 2.5, 2.5, 4.0]


def test_accuracy_summary_and_baseline_fit() -> None:
    acc = _accuracy()
    flops = [1e9, 4e9, 1.6e10]
    meas = [f / 1e11 for f in flops]
    assert acc.fit_throughput(flops, meas) == pytest.approx(1e11)
    s = acc.summary([1.2, 1.0, 0.4], [1.0, 1.0, 1.0])
    assert s["within_25pct"] == pytest.approx(2 / 3) and s["within_2x"] == pytest.approx(2 / 3)
    assert s["worst_ratio"] == pytest.approx(0.4)
    assert acc.within(1.25, 0.25) and not acc.within(1.26, 0.25) and acc.within_factor(0.5, 2)
    assert math.isclose(acc.summary([1, 2], [1, 2])["geomean_ratio"], 1.0)


def test_transpose_bench_is_a_real_transpose_graph() -> None:
    import numpy as np
    import onnxruntime as ort

    spec = calibrate._transpose((1, 2, 3, 4))
    bench = calibrate.Bench(*spec, 1)
    model, feeds = calibrate.onnx_chain(bench)
    [node] = model.graph.node
    assert node.op_type == "Transpose" and list(node.attribute[0].ints) == [0, 2, 1, 3]
    out = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    assert np.array_equal(out, feeds["x"].transpose(0, 2, 1, 3))
    assert spec[4] == 2 * 4 * 24 and not calibrate._chainable("transpose")
