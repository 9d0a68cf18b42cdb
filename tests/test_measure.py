"""ha_bot.measure: timing onnxruntime sessions and eager PyTorch, exporting, busy-machine guard."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from ha_bot import measure


def _small() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 4)).eval()


def _sane(m: measure.Measurement, reps: int) -> None:
    assert 0 < m.p10_s <= m.median_s <= m.p90_s < 1.0
    assert m.reps == reps
    assert 0.0 <= m.busy <= 1.0


def test_export_and_measure_onnx(tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort

    model, x = _small(), torch.randn(1, 3, 16, 16)
    path = measure.export_onnx(model, (x,), str(tmp_path / "small.onnx"))
    onnx.checker.check_model(onnx.load(path))
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(session.run(None, {"input0": x.numpy()})[0], expected, rtol=1e-4, atol=1e-5)
    _sane(measure.measure_onnx(path, (x,), warmup=2, reps=9), 9)
    _sane(measure.measure_onnx(path, {"input0": x.numpy()}, warmup=1, reps=5, threads=1), 5)


def test_measure_onnx_rejects_wrong_inputs(tmp_path: Path) -> None:
    x = torch.randn(1, 3, 16, 16)
    path = measure.export_onnx(_small(), (x,), str(tmp_path / "small.onnx"))
    with pytest.raises(ValueError, match="takes 1 inputs"):
        measure.measure_onnx(path, (x, x), reps=1)


def test_measure_torch_restores_threads() -> None:
    before = torch.get_num_threads()
    _sane(measure.measure_torch(_small(), (torch.randn(1, 3, 16, 16),), warmup=1, reps=7, threads=1), 7)
    assert torch.get_num_threads() == before


def test_export_keeps_transformer_layers_plain(tmp_path: Path) -> None:
    import onnx

    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).eval()
    path = measure.export_onnx(encoder, (torch.randn(1, 10, 32),), str(tmp_path / "enc.onnx"))
    ops = {n.op_type for n in onnx.load(path).graph.node}
    assert "MatMul" in ops and "Softmax" in ops  # not a fused custom op
    assert torch.backends.mha.get_fastpath_enabled()  # switched back on


def test_quantile_and_summary() -> None:
    assert measure.quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert measure.quantile([0.0, 10.0], 0.1) == pytest.approx(1.0)
    m = measure.summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (m.median_s, m.reps, m.busy) == (3.0, 5, 0.0)
    with pytest.raises(ValueError):
        measure.quantile([], 0.5)


def test_load_meter_and_quiet_selection() -> None:
    with measure.LoadMeter() as load:
        sum(range(100_000))
    assert 0.0 <= load.busy <= 1.0
    quiet_slow = measure.Measurement(2.0, 2.0, 2.0, 1, 0.0)
    quiet_fast = measure.Measurement(1.0, 1.0, 1.0, 1, 0.05)
    busy_fast = measure.Measurement(0.5, 0.5, 0.5, 1, 0.9)
    assert measure._better(quiet_fast, quiet_slow) and not measure._better(busy_fast, quiet_slow)
    assert measure._better(measure.Measurement(9.0, 9.0, 9.0, 1, 0.5), busy_fast)  # less busy wins
    calls: list[int] = []
    m = measure.measure_quiet(lambda: calls.append(1), warmup=2, reps=4, max_wait_s=0.0)
    assert m.reps == 4 and len(calls) >= 6


def test_cpu_threads_and_providers() -> None:
    assert measure.cpu_threads() >= 1
    assert measure.ort_providers("cpu") == ["CPUExecutionProvider"]
