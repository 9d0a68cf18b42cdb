"""Pure diff: states, deltas, epsilon, budgets with warn/fail levels, verdicts."""

from __future__ import annotations

import copy

import pytest

from ha_bot import diff
from ha_bot.config import Budget


def model(
    name="m",
    lat=0.010,
    mem=1_000_000,
    macs=1_000_000,
    params=1000,
    status="ok",
    fits=True,
    targets=("t1", "t2"),
):
    if status != "ok":
        return {"name": name, "status": "error", "error": "boom", "estimates": []}
    return {
        "name": name,
        "status": "ok",
        "error": None,
        "params": params,
        "macs": macs,
        "flops": 2 * macs,
        "coverage": {"ops": 1.0, "time": 1.0},
        "unsupported_ops": [],
        "estimates": [
            {
                "target": t,
                "batch": 1,
                "precision": "fp16",
                "latency_s": lat * (i + 1),
                "memory_bytes": mem,
                "energy_j": 1.0,
                "throughput_per_s": 1 / (lat * (i + 1)),
                "bound": "compute",
                "fits": fits,
            }
            for i, t in enumerate(targets)
        ],
        "modules": [
            {"module": "a", "time_s": {"t1": lat * 0.5}},
            {"module": "b", "time_s": {"t1": lat * 0.5}},
        ],
    }


def report(*models):
    return {
        "models": list(models),
        "settings": {"batch_sizes": [1]},
        "tool": {"version": "x"},
        "targets": {},
    }


def test_unchanged_within_epsilon():
    d = diff.diff_reports(report(model()), report(model(lat=0.01005)), epsilon_pct=1.0)
    (m,) = d["models"]
    assert m["state"] == "unchanged" and d["verdict"] == "ok" and d["status"] == "success"
    assert m["targets"][0]["latency"]["pct"] == pytest.approx(0.5)


def test_changed_with_movers():
    head = model(lat=0.02)
    head["modules"][1]["time_s"]["t1"] = 0.015
    d = diff.diff_reports(report(model()), report(head))
    (m,) = d["models"]
    assert m["state"] == "changed"
    assert m["targets"][0]["latency"] == {"base": 0.01, "head": 0.02, "delta": 0.01, "pct": 100.0}
    assert m["movers"][0]["module"] == "b"


def test_new_model_is_new_not_plus_100_percent():
    d = diff.diff_reports(report(), report(model("fresh")))
    (m,) = d["models"]
    assert m["state"] == "added"
    assert m["targets"][0]["latency"]["pct"] is None and m["targets"][0]["latency"]["base"] is None
    assert d["verdict"] == "ok"


def test_no_base_report_at_all():
    d = diff.diff_reports(None, report(model()))
    assert d["models"][0]["state"] == "added"


def test_removed_model():
    d = diff.diff_reports(report(model("old"), model("kept")), report(model("kept")))
    states = {m["name"]: m["state"] for m in d["models"]}
    assert states == {"kept": "unchanged", "old": "removed"}


def test_error_on_head_fails_the_check():
    d = diff.diff_reports(report(model()), report(model(status="error")))
    assert (
        d["models"][0]["state"] == "error" and d["verdict"] == "fail" and d["status"] == "failure"
    )


def test_error_only_on_base_is_a_note():
    d = diff.diff_reports(report(model(status="error")), report(model()))
    m = d["models"][0]
    assert m["state"] == "no-baseline" and "no baseline" in m["note"]
    assert d["status"] == "success"


@pytest.mark.parametrize(
    ("budget", "head", "level"),
    [
        (Budget("latency", "t1", 0.015, 0.03, False), model(lat=0.012), "ok"),
        (Budget("latency", "t1", 0.015, 0.03, False), model(lat=0.02), "warn"),
        (Budget("latency", "t1", 0.015, 0.03, False), model(lat=0.04), "fail"),
        (Budget("latency", None, None, 0.03, False), model(lat=0.02), "fail"),  # t2 is 0.04
        (Budget("memory", None, None, 2e6, False), model(mem=3_000_000), "fail"),
        (Budget("params", None, 1500, None, False), model(params=2000), "warn"),
        (Budget("macs", None, 5, 10, True), model(macs=1_070_000), "warn"),
        (Budget("macs", None, 5, 10, True), model(macs=1_200_000), "fail"),
        (Budget("latency", "t1", 5, 10, True), model(lat=0.0104), "ok"),
    ],
)
def test_budgets(budget, head, level):
    d = diff.diff_reports(report(model()), report(head), budgets=[budget])
    levels = [c["level"] for c in d["models"][0]["checks"]]
    assert diff._worst(levels) == level
    assert d["verdict"] == level


def test_relative_budget_skipped_for_new_model():
    d = diff.diff_reports(report(), report(model()), budgets=[Budget("macs", None, 5, 10, True)])
    assert d["models"][0]["checks"] == []


@pytest.mark.parametrize(
    ("fail_on", "informational", "head_lat", "status"),
    [
        ("fail", False, 0.02, "success"),  # warn only
        ("warn", False, 0.02, "failure"),
        ("fail", False, 0.04, "failure"),
        ("never", False, 0.04, "success"),
        ("fail", True, 0.04, "success"),
    ],
)
def test_fail_levels_and_informational(fail_on, informational, head_lat, status):
    b = Budget("latency", "t1", 0.015, 0.03, False)
    d = diff.diff_reports(
        report(model()),
        report(model(lat=head_lat)),
        budgets=[b],
        fail_on=fail_on,
        informational=informational,
    )
    assert d["status"] == status


def test_per_model_budgets_apply_only_to_their_model():
    b = Budget("params", None, None, 1500, False)
    d = diff.diff_reports(
        report(model("a"), model("b")),
        report(model("a", params=2000), model("b", params=2000)),
        model_budgets={"a": [b]},
    )
    by = {m["name"]: m for m in d["models"]}
    assert by["a"]["checks"][0]["level"] == "fail" and by["b"]["checks"] == []


def test_fit_flip_counts_as_change():
    d = diff.diff_reports(report(model()), report(model(fits=False)))
    assert d["models"][0]["state"] == "changed"


def test_inputs_not_mutated():
    base, head = report(model()), report(model(lat=0.5))
    b0, h0 = copy.deepcopy(base), copy.deepcopy(head)
    diff.diff_reports(base, head)
    assert base == b0 and head == h0
