"""Two reports -> deltas and verdicts against budgets and thresholds. Pure.

States per model: ``added`` (new: no baseline, never "+100%"), ``removed``, ``changed``,
``unchanged`` (every change below ``epsilon_pct``), ``error`` (fails on head: fails the check) and
``no-baseline`` (analysed on head, failed on base: a note, not a failure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ha_bot.config import Budget

LEVELS = ("ok", "warn", "fail")
METRIC_KEYS = {"latency": "latency_s", "memory": "memory_bytes", "energy": "energy_j"}
MODEL_METRICS = ("params", "macs", "flops")


def change(base: float | None, head: float | None) -> dict[str, float | None]:
    delta = None if base is None or head is None else head - base
    pct = None if delta is None or not base else 100.0 * delta / base
    return {"base": base, "head": head, "delta": delta, "pct": None if pct is None else round(pct, 3)}


def _worst(levels: Sequence[str]) -> str:
    return max(levels, key=LEVELS.index, default="ok")


def _estimates(model: Mapping[str, Any] | None) -> dict[tuple[str, int], Mapping[str, Any]]:
    if not model or model.get("status") != "ok":
        return {}
    return {(e["target"], e["batch"]): e for e in model["estimates"]}


def _check(budget: Budget, value: float | None, base: float | None, what: str) -> dict[str, Any] | None:
    """One budget against one value; None when it does not apply (no baseline for a relative budget)."""
    if budget.relative:
        if value is None or not base:
            return None
        measured = 100.0 * (value - base) / base
        unit = "%"
    else:
        if value is None:
            return None
        measured = value
        unit = ""
    level = "ok"
    limit = None
    if budget.fail is not None and measured > budget.fail:
        level, limit = "fail", budget.fail
    elif budget.warn is not None and measured > budget.warn:
        level, limit = "warn", budget.warn
    kind = "regression" if budget.relative else "max"
    return {
        "metric": budget.metric,
        "target": budget.target,
        "scope": what,
        "kind": kind,
        "value": round(measured, 6) if unit else value,
        "warn": budget.warn,
        "fail": budget.fail,
        "limit": limit,
        "level": level,
    }


def _checks(budgets: Sequence[Budget], base: Mapping[str, Any] | None, head: Mapping[str, Any], first_batch: int) -> list[dict[str, Any]]:
    out = []
    b_est, h_est = _estimates(base), _estimates(head)
    for budget in budgets:
        if budget.metric in MODEL_METRICS:
            base_v = base.get(budget.metric) if base and base.get("status") == "ok" else None
            c = _check(budget, head.get(budget.metric), base_v, "model")
            if c:
                out.append(c)
            continue
        key = METRIC_KEYS[budget.metric]
        for (target, batch), e in sorted(h_est.items()):
            if batch != first_batch or (budget.target and budget.target != target):
                continue
            b = b_est.get((target, batch))
            c = _check(budget, e.get(key), b.get(key) if b else None, f"{target} batch {batch}")
            if c:
                out.append(c)
    return out


def _movers(base: Mapping[str, Any], head: Mapping[str, Any], target: str, top: int = 5) -> list[dict[str, Any]]:
    """The modules whose estimated time on ``target`` moved most (first batch)."""
    def times(m: Mapping[str, Any]) -> dict[str, float]:
        return {row["module"]: row["time_s"].get(target, 0.0) for row in m.get("modules", [])}

    tb, th = times(base), times(head)
    deltas = {k: th.get(k, 0.0) - tb.get(k, 0.0) for k in set(tb) | set(th)}
    total = sum(deltas.values())
    ranked = sorted(deltas.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:top]
    return [
        {"module": k, "base_s": tb.get(k), "head_s": th.get(k), "delta_s": v,
         "share": round(v / total, 4) if total else None}
        for k, v in ranked if v
    ]


def _is_changed(entry: Mapping[str, Any], epsilon: float) -> bool:
    values = [entry["metrics"][k]["pct"] for k in MODEL_METRICS]
    for row in entry["targets"]:
        values += [row["latency"]["pct"], row["memory"]["pct"]]
        if row["fits"]["base"] != row["fits"]["head"]:
            return True
    return any(v is not None and abs(v) >= epsilon for v in values)


def diff_model(
    name: str, base: Mapping[str, Any] | None, head: Mapping[str, Any] | None, budgets: Sequence[Budget],
    first_batch: int, epsilon: float,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "checks": [], "targets": [], "movers": [], "note": None, "error": None}
    if head is None:
        entry["state"] = "removed"
        return entry
    if head.get("status") != "ok":
        entry.update(state="error", error=head.get("error"))
        entry["checks"] = [{"metric": "analysis", "target": None, "scope": "model", "kind": "error", "value": None,
                            "warn": None, "fail": None, "limit": None, "level": "fail"}]
        return entry
    base_ok = base is not None and base.get("status") == "ok"
    entry["metrics"] = {k: change(base.get(k) if base_ok and base else None, head.get(k)) for k in MODEL_METRICS}
    b_est = _estimates(base) if base_ok else {}
    for (target, batch), e in sorted(_estimates(head).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        b = b_est.get((target, batch), {})
        entry["targets"].append({
            "target": target,
            "batch": batch,
            "precision": e["precision"],
            "latency": change(b.get("latency_s"), e["latency_s"]),
            "memory": change(b.get("memory_bytes"), e["memory_bytes"]),
            "energy": change(b.get("energy_j"), e["energy_j"]),
            "throughput": change(b.get("throughput_per_s"), e["throughput_per_s"]),
            "bound": {"base": b.get("bound"), "head": e["bound"]},
            "fits": {"base": b.get("fits"), "head": e["fits"]},
        })
    entry["checks"] = _checks(budgets, base if base_ok else None, head, first_batch)
    entry["coverage"] = head.get("coverage")
    entry["unsupported_ops"] = head.get("unsupported_ops", [])
    if base is None:
        entry["state"] = "added"
    elif not base_ok:
        entry.update(state="no-baseline", note=f"no baseline: the model failed on the base ({base.get('error')})")
    else:
        entry["state"] = "changed" if _is_changed(entry, epsilon) else "unchanged"
        if entry["state"] == "changed" and head.get("estimates"):
            entry["movers_target"] = head["estimates"][0]["target"]
            entry["movers"] = _movers(base, head, entry["movers_target"])
    return entry


def diff_reports(
    base: Mapping[str, Any] | None,
    head: Mapping[str, Any],
    *,
    budgets: Sequence[Budget] = (),
    model_budgets: Mapping[str, Sequence[Budget]] | None = None,
    epsilon_pct: float = 1.0,
    fail_on: str = "fail",
    informational: bool = False,
    base_info: Mapping[str, Any] | None = None,
    head_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    base_models = {m["name"]: m for m in (base or {}).get("models", [])}
    head_models = {m["name"]: m for m in head["models"]}
    first_batch = (head.get("settings", {}).get("batch_sizes") or [1])[0]
    names = list(head_models) + sorted(set(base_models) - set(head_models))
    models = [
        diff_model(n, base_models.get(n), head_models.get(n), [*budgets, *(model_budgets or {}).get(n, ())], first_batch, epsilon_pct)
        for n in names
    ]
    levels = [c["level"] for m in models for c in m["checks"]]
    verdict = _worst(levels)
    failing = verdict == "fail" or (verdict == "warn" and fail_on == "warn")
    if fail_on == "never" or informational:
        failing = False
    return {
        "schema_version": 1,
        "kind": "ha-bot-diff",
        "base": dict(base_info or {}),
        "head": dict(head_info or {}),
        "settings": head.get("settings", {}),
        "tool": head.get("tool", {}),
        "targets": head.get("targets", {}),
        "verdict": verdict,
        "status": "failure" if failing else "success",
        "informational": informational or fail_on == "never",
        "regressions": sum(1 for lvl in levels if lvl != "ok"),
        "counts": {s: sum(1 for m in models if m["state"] == s) for s in ("added", "removed", "changed", "unchanged", "error", "no-baseline")},
        "models": models,
    }
