"""The CLI end to end: exit codes, the JSON schema, bad input that never stops the other models."""

from __future__ import annotations

import json
import os
import shutil
import textwrap

import pytest

from ha_bot.main import main

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")

GOOD = """
import torch
from torch import nn

def build(width=8):
    return nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 4))
"""
BROKEN_IMPORT = "import not_a_real_package_xyz\n"
RAISES = "def build():\n    raise ValueError('bad hyper-parameter')\n"
NOT_MODULE = "def build():\n    return 42\n"
PRINTS = "import torch\nprint('{\"status\": \"ok\"}')\ndef build():\n    print('hello {')\n    return torch.nn.Linear(4, 4)\n"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    for name, body in [
        ("good", GOOD),
        ("broken", BROKEN_IMPORT),
        ("raises", RAISES),
        ("notmod", NOT_MODULE),
        ("prints", PRINTS),
    ]:
        (models / f"{name}.py").write_text(textwrap.dedent(body))
    shutil.copy(os.path.join(EXAMPLES, "models", "mlp.onnx"), models / "mlp.onnx")
    (models / "garbage.onnx").write_bytes(b"\x08\x07not really onnx" * 10)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cfg(repo, models: str, extra: str = "targets: [nvidia_h100_sxm, rpi5_cortex_a76]\n") -> str:
    (repo / ".ha-bot.yml").write_text("models:\n" + textwrap.dedent(models) + extra)
    return str(repo / ".ha-bot.yml")


def run_json(capsys, argv):
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


SCHEMA_MODEL_KEYS = {
    "name",
    "status",
    "error",
    "params",
    "macs",
    "flops",
    "coverage",
    "unsupported_ops",
    "estimates",
}
SCHEMA_ESTIMATE_KEYS = {
    "target",
    "precision",
    "batch",
    "latency_s",
    "throughput_per_s",
    "bound",
    "memory_bytes",
    "fits",
    "energy_j",
}


def test_config_run_json_schema_and_bad_models(repo, capsys):
    path = cfg(
        repo,
        """
      - {name: good, python: models/good.py:build, kwargs: {width: 4}, inputs: [{shape: [1, 3, 16, 16]}]}
      - {name: broken, python: models/broken.py:build, inputs: [{shape: [1, 3]}]}
      - {name: raises, python: models/raises.py:build, inputs: [{shape: [1, 3]}]}
      - {name: notmod, python: models/notmod.py:build, inputs: [{shape: [1, 3]}]}
      - {name: wrongshape, python: models/good.py:build, inputs: [{shape: [1, 5, 16, 16]}]}
      - {name: missingfn, python: models/good.py:make, inputs: [{shape: [1, 3, 16, 16]}]}
      - {name: missingfile, python: models/nope.py:build, inputs: [{shape: [1, 3]}]}
      - {name: prints, python: models/prints.py:build, inputs: [{shape: [2, 4]}]}
      - {name: mlp, onnx: models/mlp.onnx}
      - {name: garbage, onnx: models/garbage.onnx}
      - {name: nofile, onnx: models/absent.onnx}
    """,
        "targets: [nvidia_h100_sxm, rpi5_cortex_a76]\nbatch_sizes: [1, 4]\n",
    )
    code, doc = run_json(capsys, ["analyze", "--config", path, "--json", "-q"])
    assert code == 1
    assert doc["schema_version"] == 1
    by = {m["name"]: m for m in doc["models"]}
    for m in doc["models"]:
        assert SCHEMA_MODEL_KEYS <= set(m)
    ok = [n for n, m in by.items() if m["status"] == "ok"]
    assert sorted(ok) == ["good", "mlp", "prints"]
    good = by["good"]
    assert len(good["estimates"]) == 4
    for e in good["estimates"]:
        assert SCHEMA_ESTIMATE_KEYS <= set(e)
    assert good["macs"] == 4 * 14 * 14 * 27 + 4 * 4
    errors = {n: by[n]["error"] for n in by if by[n]["status"] == "error"}
    assert "not_a_real_package_xyz" in errors["broken"] and "models/broken.py" in errors["broken"]
    assert "bad hyper-parameter" in errors["raises"] and "raises.py:2" in errors["raises"]
    assert "expected a torch.nn.Module" in errors["notmod"]
    assert "1x5x16x16" in errors["wrongshape"] and "inputs" in errors["wrongshape"]
    assert "no callable 'make'" in errors["missingfn"] and "build" in errors["missingfn"]
    assert "not found" in errors["missingfile"]
    assert "garbage.onnx" in errors["garbage"]
    assert "absent.onnx" in errors["nofile"]


def test_json_is_deterministic(repo, capsys):
    path = cfg(repo, "  - {name: mlp, onnx: models/mlp.onnx}\n")
    _, first = run_json(capsys, ["analyze", "--config", path, "--json", "-q"])
    _, second = run_json(capsys, ["analyze", "--config", path, "--json", "-q"])
    assert first == second


def test_zero_config_onnx_and_python(repo, capsys):
    code, doc = run_json(
        capsys,
        [
            "analyze",
            "models/mlp.onnx",
            "--target",
            "nvidia_t4",
            "--batch",
            "8",
            "--precision",
            "int8",
            "--json",
            "-q",
        ],
    )
    assert code == 0
    (m,) = doc["models"]
    assert m["status"] == "ok" and m["params"] == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10
    (e,) = m["estimates"]
    assert (e["target"], e["batch"], e["precision"]) == ("nvidia_t4", 8, "int8")
    code = main(["analyze", "models/good.py:build", "--input", "1x3x16x16", "--markdown", "-q"])
    out = capsys.readouterr().out
    assert code == 0 and "| target |" in out and "good" in out


def test_targets_file_option(repo, capsys):
    (repo / "t.yml").write_text(
        "id: my_cpu\nkind: cpu\npeak_tflops: {fp32: 0.5}\nmem_bw_gbps: 20\nmem_gb: 16\n"
    )
    code, doc = run_json(
        capsys,
        [
            "analyze",
            "models/mlp.onnx",
            "--targets-file",
            "t.yml",
            "--target",
            "my_cpu",
            "--json",
            "-q",
        ],
    )
    assert code == 0 and doc["models"][0]["estimates"][0]["target"] == "my_cpu"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["analyze", "--config", "missing.yml"], "not found"),
        (["analyze", "models/good.py:build"], "--input"),
        (["analyze", "models/mlp.onnx", "--target", "nvidia_h100"], "nvidia_h100_sxm"),
        (["analyze", "models/good.py"], "path/to/file.py:function"),
        (["targets", "rpi5_cortex_a67"], "rpi5_cortex_a76"),
    ],
)
def test_usage_errors_exit_2(repo, capsys, argv, needle):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_targets_lists_builtins(capsys):
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    assert "nvidia_h100_sxm" in out and "arm_cortex_m7_stm32h743" in out
    assert main(["targets", "rpi5_cortex_a76"]) == 0
    assert "http" in capsys.readouterr().out


def test_measure_reports_median_and_spread_next_to_the_estimate(repo, capsys):
    code, doc = run_json(capsys, ["analyze", "models/mlp.onnx", "--target", "rpi5_cortex_a76", "--measure", "onnxruntime", "--json", "-q"])
    assert code == 0
    m = doc["models"][0]["measurement"]
    assert m["engine"] == "onnxruntime" and m["reps"] >= 5
    assert 0 < m["p10_s"] <= m["median_s"] <= m["p90_s"] < 1.0
    assert m["vs_calibrated"] == []  # rpi5 is a datasheet target, not a calibration of this machine
    code = main(["analyze", "models/good.py:build", "--input", "1x3x16x16", "--measure", "torch", "-q"])
    assert code == 0 and "measured here (torch, batch 1)" in capsys.readouterr().out


def test_measure_meta_model_is_a_clear_error(repo, capsys):
    code, doc = run_json(capsys, ["analyze", "models/good.py:build", "--input", "1x3x16x16", "--device", "meta", "--measure", "torch", "--json", "-q"])
    assert code == 1 and "device: cpu" in doc["models"][0]["error"]


def test_calibration_is_carried_to_targets_without_curves(repo, capsys, tmp_path):
    cal = tmp_path / "cal.yml"
    cal.write_text(
        "id: here\nkind: cpu\npeak_tflops: {fp32: 0.2}\nmem_bw_gbps: 20\nmem_gb: 16\n"
        "curves:\n  matmul: [[1.0e5, 5], [1.0e9, 150]]\n  elementwise: [[1.0e4, 1], [1.0e8, 10]]\n"
        "sources: {calibration: [ha-bot calibrate on a test machine]}\n"
    )
    _, plain = run_json(capsys, ["analyze", "models/mlp.onnx", "--target", "nvidia_t4", "--json", "-q"])
    _, carried = run_json(capsys, ["analyze", "models/mlp.onnx", "--target", "nvidia_t4", "--calibration", str(cal), "--json", "-q"])
    assert plain["models"][0]["estimates"][0]["latency_s"] != carried["models"][0]["estimates"][0]["latency_s"]
    assert "calibration" in carried["targets"]["nvidia_t4"]["sources"]


def test_onnx_inputs_from_the_config_apply_by_position(repo, capsys):
    path = cfg(repo, "  - {name: mlp, onnx: models/mlp.onnx, inputs: [{shape: [4, 1, 28, 28]}]}\n")
    code, doc = run_json(capsys, ["analyze", "--config", path, "--json", "-q"])
    assert code == 0 and doc["models"][0]["traced_batch"] == 4
    path = cfg(repo, "  - {name: mlp, onnx: models/mlp.onnx, inputs: [{shape: [1, 784]}, {shape: [1]}]}\n")
    code, doc = run_json(capsys, ["analyze", "--config", path, "--json", "-q"])
    assert code == 1 and "2 input shapes given" in doc["models"][0]["error"]
