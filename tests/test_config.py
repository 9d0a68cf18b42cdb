"""Config validation: errors name the file, line and key, and what is allowed."""

from __future__ import annotations

import pytest

from ha_bot import config
from ha_bot.errors import ConfigError

GOOD = """\
models:
  - name: resnet-edge
    python: models/net.py:build
    kwargs: {width: 2}
    inputs:
      - {shape: [1, 3, 224, 224], dtype: float32}
    device: meta
    precision: int8
  - name: detector
    onnx: models/detector.onnx
targets: [nvidia_h100_sxm, rpi5_cortex_a76]
precision: fp16
batch_sizes: [1, 32]
training: {optimizer: sgd_momentum, dataset_size: 1000}
budgets:
  - {metric: latency, target: rpi5_cortex_a76, warn: 0.01, fail: 0.02}
  - {metric: macs, regression_pct: {warn: 5, fail: 10}}
"""


def write(tmp_path, text):
    p = tmp_path / ".ha-bot.yml"
    p.write_text(text)
    return str(p)


def test_good_config(tmp_path):
    cfg = config.load(write(tmp_path, GOOD))
    assert [m.name for m in cfg.models] == ["resnet-edge", "detector"]
    m = cfg.models[0]
    assert m.inputs[0].shape == (1, 3, 224, 224) and m.device == "meta" and m.precision == "int8"
    assert m.kwargs == {"width": 2}
    assert cfg.targets == ("nvidia_h100_sxm", "rpi5_cortex_a76")
    assert cfg.batch_sizes == (1, 32) and cfg.training.optimizer == "sgd_momentum"
    assert cfg.budgets[0].target == "rpi5_cortex_a76" and cfg.budgets[0].fail == 0.02
    assert cfg.budgets[1].relative and cfg.budgets[1].warn == 5
    assert cfg.root == str(tmp_path)


@pytest.mark.parametrize(
    ("text", "line", "key", "needle"),
    [
        (
            "models:\n  - name: a\n    onnx: a.onnx\nprecison: fp16\n",
            4,
            "precison",
            "Did you mean 'precision'",
        ),
        (
            "models:\n  - name: a\n    onnx: a.onnx\nprecision: fp12\n",
            4,
            "precision",
            "Allowed: fp32",
        ),
        (
            "models:\n  - name: a\n    onnx: a.onnx\n  - name: a\n    onnx: b.onnx\n",
            4,
            "models[1].name",
            "duplicate",
        ),
        ("models:\n  - name: a\n    python: net.py:build\n", 2, "models[0] (a)", "needs `inputs"),
        (
            "models:\n  - name: a\n    python: net.py:build\n    onnx: x.onnx\n",
            2,
            "models[0] (a)",
            "exactly one",
        ),
        (
            "models:\n  - name: a\n    python: net.py\n    inputs: [[1, 3]]\n",
            3,
            "models[0] (a).python",
            "path/to/file.py:function",
        ),
        (
            "models:\n  - name: a\n    onnx: a.onnx\n    inputs: [{shape: [1, -3]}]\n",
            4,
            "models[0] (a).inputs[0].shape[1]",
            ">= 0",
        ),
        (
            "models:\n  - name: a\n    onnx: a.onnx\n    inputs: [{shape: [1], dtype: float33}]\n",
            4,
            "dtype",
            "float32",
        ),
        (
            "models:\n  - name: a\n    onnx: a.onnx\n    device: cuda\n",
            4,
            "models[0] (a).device",
            "cpu, meta",
        ),
        (
            "models:\n  - name: a\n    onnx: a.onnx\nbatch_sizes: [1, 0]\n",
            4,
            "batch_sizes[1]",
            ">= 1",
        ),
        (
            "models:\n  - name: a\n    onnx: a.onnx\ntraining: {optimizer: lion}\n",
            4,
            "training.optimizer",
            "adamw",
        ),
        (
            "models:\n  - name: a\n    onnx: a.onnx\nbudgets:\n  - {metric: speed, fail: 1}\n",
            5,
            "budgets[0].metric",
            "latency",
        ),
        (
            "models:\n  - name: a\n    onnx: a.onnx\nbudgets:\n  - {metric: macs}\n",
            5,
            "budgets[0]",
            "warn",
        ),
        ("models: []\n", 1, "models", "non-empty"),
        ("models:\n  - name: 'bad name!'\n    onnx: a.onnx\n", 2, "models[0].name", "letters"),
        (
            "models:\n  - name: a\n    onnx: a.onnx\n    modle: x\n",
            4,
            "models[0].modle",
            "unknown key",
        ),
    ],
)
def test_errors_name_file_line_and_key(tmp_path, text, line, key, needle):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        config.load(path)
    err = info.value
    assert err.file == path and err.line == line and key in err.key, (err.line, err.key, str(err))
    assert needle in str(err)
    assert str(err).startswith(f"{path}:{line}")


@pytest.mark.parametrize(
    ("text", "needle"), [("models: [\n", "invalid YAML"), ("", "empty"), ("- a\n- b\n", "mapping")]
)
def test_malformed_files(tmp_path, text, needle):
    with pytest.raises(ConfigError, match=needle):
        config.load(write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        config.load(str(tmp_path / "nope.yml"))


@pytest.mark.parametrize(
    ("text", "shape"), [("1x3x224x224", (1, 3, 224, 224)), ("1,128", (1, 128)), ("[2, 3]", (2, 3))]
)
def test_parse_shape(text, shape):
    assert config.parse_shape(text) == shape


@pytest.mark.parametrize("text", ["", "axb", "1x-2"])
def test_parse_shape_errors(text):
    with pytest.raises(ConfigError):
        config.parse_shape(text)


def test_unknown_target_lists_closest(tmp_path):
    from ha_bot import analyze

    cfg = config.load(
        write(tmp_path, "models:\n  - name: a\n    onnx: a.onnx\ntargets: [nvidia_h100_sx]\n")
    )
    with pytest.raises(ConfigError, match="nvidia_h100_sxm"):
        analyze.select_targets(cfg)


def test_inline_custom_target(tmp_path):
    from ha_bot import analyze

    text = (
        "models:\n  - name: a\n    onnx: a.onnx\n"
        "targets:\n  - rpi5_cortex_a76\n  - {id: my_npu, kind: npu, peak_tflops: {int8: 26}, vector_tflops: 1, mem_bw_gbps: 50, mem_gb: 8}\n"
    )
    cfg = config.load(write(tmp_path, text))
    chosen = analyze.select_targets(cfg)
    assert [t.id for t in chosen] == ["rpi5_cortex_a76", "my_npu"]
    assert chosen[1].peak_flops == {"int8": 26e12}


def test_narrative_settings(tmp_path):
    cfg = config.load(write(tmp_path, "models:\n  - name: a\n    onnx: a.onnx\nnarrative: {model: claude-x, max_tokens: 300, timeout_s: 10}\n"))
    assert cfg.narrative == {"model": "claude-x", "max_tokens": 300, "timeout_s": 10}
    with pytest.raises(ConfigError, match=r"narrative\.max_tokens"):
        config.load(write(tmp_path, "models:\n  - name: a\n    onnx: a.onnx\nnarrative: {max_tokens: many}\n"))
    with pytest.raises(ConfigError, match=r"narrative\.modle"):
        config.load(write(tmp_path, "models:\n  - name: a\n    onnx: a.onnx\nnarrative: {modle: x}\n"))
