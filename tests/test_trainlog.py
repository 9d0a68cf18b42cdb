"""Training logs: JSON Lines, JSON and CSV summaries, failure detection, and the comparison with estimates."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ha_bot import trainlog
from ha_bot.errors import HaBotError
from ha_bot.trainlog import (
    TrainingSummary,
    compare_with_estimate,
    direction,
    kind_of,
    load_log,
    parse_log,
    pick_estimate,
    render_training,
    training_for,
)

LOGS = Path(__file__).parent / "fixtures" / "logs"


def load(name: str) -> TrainingSummary:
    return load_log(str(LOGS / name), name=name)


def kinds(summary: TrainingSummary) -> list[str]:
    return [f.kind for f in summary.failures]


H100_TRAINING = {"target": "nvidia_h100_sxm", "precision": "bf16", "batch": 32, "optimizer": "adamw",
                 "step_s": 0.016, "epoch_s": None, "memory_bytes": 4_600_000_000, "fits": True}
ORIN_TRAINING = {"target": "nvidia_jetson_orin_nano_8gb", "precision": "fp16", "batch": 16, "optimizer": "adamw",
                 "step_s": 0.04, "epoch_s": None, "memory_bytes": 2_000_000_000, "fits": True}


# ----------------------------------------------------------------------------- key names


@pytest.mark.parametrize(("key", "kind"), [
    ("step", "step"), ("global_step", "step"), ("_step", "step"), ("trainer/global_step", "step"), ("iter", "step"),
    ("epoch", "epoch"), ("train/epoch", "epoch"),
    ("step_time", "step_time"), ("step_time_ms", "step_time"), ("time_per_step", "step_time"), ("s/it", "step_time"),
    ("train_steps_per_second", "steps_per_s"), ("it/s", "steps_per_s"),
    ("tokens_per_sec", "tokens_per_s"), ("train/tok/s", "tokens_per_s"),
    ("samples_per_sec", "samples_per_s"), ("train_samples_per_second", "samples_per_s"), ("throughput", "samples_per_s"),
    ("images/s", "samples_per_s"),
    ("eval_samples_per_second", "metric"), ("val/throughput", "metric"),  # evaluation is not the training run
    ("time", "clock"), ("elapsed", "clock"), ("_timestamp", "clock"), ("_runtime", "clock"), ("train_runtime", "clock"),
    ("gpu_mem", "memory"), ("max_memory_allocated", "memory"), ("gpu_mem_gb", "memory"), ("mem_util_pct", "metric"),
    ("lr", "lr"), ("learning_rate", "lr"), ("train/lr_group0", "lr"),
    ("batch_size", "batch"), ("train_batch_size", "batch"),
    ("device", "hardware"), ("gpu_name", "hardware"), ("sys/gpu_name", "hardware"),
    ("loss", "metric"), ("val_loss", "metric"), ("accuracy", "metric"), ("grad_norm", "metric"),
])
def test_key_kinds(key: str, kind: str) -> None:
    assert kind_of(key) == kind


@pytest.mark.parametrize(("key", "want"), [
    ("loss", "min"), ("val_loss", "min"), ("eval/perplexity", "min"), ("top1_err", "min"), ("wer", "min"),
    ("accuracy", "max"), ("val/acc", "max"), ("eval_f1", "max"), ("mAP", "max"), ("bleu", "max"),
    ("grad_norm", None), ("total_flos", None),
])
def test_metric_direction(key: str, want: str | None) -> None:
    assert direction(key) == want


# ----------------------------------------------------------------------------- fixtures


def test_good_jsonl() -> None:
    s = load("good.jsonl")
    assert (s.format, s.rows, s.steps, s.epochs) == ("jsonl", 25, 200, 2.0)
    assert s.hardware == "NVIDIA H100 80GB HBM3"  # the specific name beats the generic `cuda:0`
    assert s.batch_size == 32
    assert s.samples_per_s == 1010.0
    assert s.step_time_s == pytest.approx(0.032)
    assert s.peak_memory_bytes == 9_200_000_000
    assert s.wall_time_s == pytest.approx(6.4)
    assert s.final["loss"] == pytest.approx(0.5052) and s.best["loss"] == pytest.approx(0.5052)
    assert s.best["val/accuracy"] == 0.9
    assert "lr" not in s.final
    assert s.failures == ()
    assert any("derived from `time`" in n for n in s.notes)


def test_good_csv_units_from_names() -> None:
    s = load("good.csv")
    assert (s.format, s.rows, s.steps, s.epochs) == ("csv", 4, 400, 4.0)
    assert s.step_time_s == pytest.approx(0.0505)  # step_time_ms
    assert s.peak_memory_bytes == pytest.approx(3.31e9)  # gpu_mem_gb
    assert s.hardware == "Jetson Orin Nano"
    assert s.samples_per_s == pytest.approx(16 / 0.0505)
    assert any("derived from the logged batch size" in n for n in s.notes)
    assert s.best == {"loss": 0.8, "val_acc": 0.66}


def test_trainer_state_json() -> None:
    s = load("trainer_state.json")
    assert (s.format, s.rows, s.steps) == ("json", 4, 30)
    assert s.samples_per_s == 48.0  # train_samples_per_second, not the eval throughput
    assert s.step_time_s == 2.0  # 1 / train_steps_per_second
    assert s.wall_time_s == 60.0  # train_runtime
    assert s.best["eval_accuracy"] == 0.71


def test_nan_loss_first_step() -> None:
    s = load("nan.jsonl")
    assert kinds(s) == ["nan"]
    f = s.failures[0]
    assert (f.step, f.line) == (40, 4)
    assert "loss is nan at step 40" in f.message
    assert math.isnan(s.final["loss"])
    assert s.best["loss"] == pytest.approx(1 / 30)


def test_oom_record_and_plain_text_message() -> None:
    s = load("oom.jsonl")
    assert kinds(s) == ["oom"]
    f = s.failures[0]
    assert (f.step, f.line) == (4, 4)
    assert "CUDA out of memory" in f.message and "2 records mention it" in f.message
    assert s.peak_memory_bytes == pytest.approx(70.53e9)


def test_divergence_and_inf() -> None:
    s = load("diverge.csv")
    assert kinds(s) == ["divergence", "nan"]
    div, inf = s.failures
    assert div.step == 9 and "diverged" in div.message
    assert inf.step == 12 and "inf" in inf.message
    assert s.best["accuracy"] == 0.6


def test_gaps_stall_and_restart() -> None:
    s = load("gaps.jsonl")
    assert kinds(s) == ["gap", "restart"]
    stall, restart = s.failures
    assert "7200 s without a record before step 100" in stall.message
    assert "step went back from 120 to 60" in restart.message
    assert s.wall_time_s == 8245.0


def test_step_gap() -> None:
    text = "".join(f'{{"step": {s}, "loss": 1.0}}\n' for s in (10, 20, 30, 40, 200, 210))
    s = parse_log(text, name="x.jsonl")
    assert kinds(s) == ["gap"]
    assert "no record from step 40 to 200" in s.failures[0].message


@pytest.mark.parametrize("name", ["truncated.jsonl", "truncated.csv"])
def test_truncated_last_line_is_a_note(name: str) -> None:
    s = load(name)
    assert s.failures == ()
    assert any("truncated last" in n and "ignored" in n for n in s.notes)
    assert s.rows in (5, 2)


@pytest.mark.parametrize(("name", "line", "why"), [
    ("malformed.jsonl", 3, "not valid JSON"),
    ("malformed.csv", 3, "3 fields where the header (line 1) has 2"),
])
def test_malformed_middle_line_names_file_and_line(name: str, line: int, why: str) -> None:
    with pytest.raises(HaBotError, match=rf"^{name}:{line}: .*") as err:
        load(name)
    assert why in str(err.value)


@pytest.mark.parametrize(("text", "message"), [
    ('{"step": 1}\n[1, 2]\n{"step": 3}\n', "x.jsonl:2: expected a JSON object"),
    ('{"step": 1}\n42\n', "x.jsonl:2: expected a JSON object"),  # a complete non-object is not a truncation
])
def test_non_objects_are_errors(text: str, message: str) -> None:
    with pytest.raises(HaBotError, match=message):
        parse_log(text, name="x.jsonl")


def test_missing_file_and_tensorboard() -> None:
    with pytest.raises(HaBotError, match="training log not found"):
        load_log(str(LOGS / "nope.jsonl"), name="nope.jsonl")
    with pytest.raises(HaBotError, match="TensorBoard event files are not read"):
        parse_log("", name="runs/events.out.tfevents.123.host")


def test_memory_units() -> None:
    text = ('{"step": 1, "gpu_mem": "3.5G"}\n{"step": 2, "mem_mib": 4096}\n{"step": 3, "gpu_memory": 5.1}\n'
            '{"step": 4, "max_memory_reserved": 2000000000}\n')
    s = parse_log(text, name="x.jsonl")
    assert s.peak_memory_bytes == 4096 * 2**20
    assert any("`gpu_memory` has values without a unit" in n for n in s.notes)


def test_mmdet_style_time_is_per_iteration() -> None:
    text = "".join(f'{{"iter": {i}, "time": {t}, "loss": 1}}\n' for i, t in ((50, 0.31), (100, 0.29), (150, 0.30)))
    s = parse_log(text, name="x.jsonl")
    assert s.step_time_s == pytest.approx(0.30)
    assert s.wall_time_s is None


def test_nested_objects_are_flattened_and_iso_timestamps_read() -> None:
    text = ('{"step": 1, "train": {"loss": 2.0}, "timestamp": "2024-05-01T12:00:00"}\n'
            '{"step": 2, "train": {"loss": 1.0}, "timestamp": "2024-05-01T12:00:10"}\n')
    s = parse_log(text, name="x.jsonl")
    assert s.final == {"train/loss": 1.0}
    assert s.wall_time_s == 10.0 and s.step_time_s == 10.0


# ----------------------------------------------------------------------------- against the estimate


def test_pick_estimate_by_hardware_name() -> None:
    items = [ORIN_TRAINING, H100_TRAINING, {**H100_TRAINING, "target": "nvidia_h100_pcie"}]
    est, how = pick_estimate("NVIDIA H100 80GB HBM3", items)
    assert est is H100_TRAINING and "nvidia_h100_sxm" in how
    est, _ = pick_estimate("Jetson Orin Nano", items)
    assert est is ORIN_TRAINING
    assert pick_estimate("cuda:0", items)[0] is None  # a device index is no model number
    assert pick_estimate(None, items)[0] is None
    assert pick_estimate(None, [ORIN_TRAINING])[0] is ORIN_TRAINING


def test_compare_same_batch() -> None:
    s = load("good.jsonl")
    c = compare_with_estimate(s, H100_TRAINING)
    assert c["target"] == "nvidia_h100_sxm"
    assert c["step_ratio"] == 2.0  # 32 ms measured / 16 ms estimated
    assert c["throughput_ratio"] == pytest.approx(0.505)  # 1010/s vs 2000/s
    assert c["memory_ratio"] == 2.0
    assert c["notes"] == []


def test_compare_other_batch_compares_only_throughput() -> None:
    s = load("good.csv")  # batch 16
    c = compare_with_estimate(s, {**ORIN_TRAINING, "batch": 1, "step_s": 0.01})
    assert c["step_ratio"] is None and c["memory_ratio"] is None
    assert c["throughput_ratio"] == pytest.approx(3.17)  # 317/s vs 100/s
    assert "differs from the estimate's batch 1" in c["notes"][0]


def test_compare_without_estimate() -> None:
    c = compare_with_estimate(load("nan.jsonl"), None)
    assert c["target"] is None and c["step_ratio"] is None
    assert c["notes"] == ["no training estimate to compare with"]


def test_render_training() -> None:
    s = load("good.jsonl")
    training = training_for(s, [H100_TRAINING])
    md = render_training(training["summary"], training["comparison"])
    assert md.startswith("### Training run (measured)\n")
    assert "From good.jsonl: 25 records, 200 steps, 2 epochs, wall time 6.4 s on NVIDIA H100 80GB HBM3." in md
    assert "| step time | 32 ms | 16 ms | 2x |" in md
    assert "estimate (nvidia\\_h100\\_sxm, batch 32, bf16, adamw)" in md
    assert "val/accuracy" in md
    bad = render_training(load("diverge.csv"), None)
    assert "**Problems in the log:**" in bad and "- divergence:" in bad and "- nan:" in bad


def test_training_data_is_rounded_and_plain() -> None:
    s = load("good.jsonl")
    data = trainlog.training_data(s, compare_with_estimate(s, H100_TRAINING))
    assert data["step_s"] == 0.032 and data["peak_memory_bytes"] == 9_200_000_000
    assert data["vs_estimate"] == {"target": "nvidia_h100_sxm", "batch": 32, "step_ratio": 2.0,
                                   "throughput_ratio": 0.505, "memory_ratio": 2.0}
    assert data["failures"] == []
