"""The versioned JSON report: the stored artifact everything downstream reads. Pure.

Schema (``schema_version`` 1) is documented in ``docs/report.md``. Units are SI base units
(seconds, bytes, FLOPs, joules); numbers are rounded to 6 significant digits and keys sorted, so
the same inputs give byte-identical output.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ha_bot import __version__
from ha_bot.cost import Estimate, TrainingEstimate
from ha_bot.records import ModelCount
from ha_bot.targets import BYTES_PER_ELEMENT, Target

SCHEMA_VERSION = 1
CONVENTIONS = {
    "macs": "multiply-accumulates of matrix work (conv, linear, matmul, attention products)",
    "flops": "2 x MACs plus one per element of elementwise/reduction work; see docs/conventions.md",
    "units": "SI: seconds, bytes, FLOPs, joules",
    "estimates": "roofline estimates on the named target profile, not measurements",
}


def sig(x: float | None, digits: int = 6) -> float | None:
    """Round to significant digits: stable output, no float noise."""
    if x is None:
        return None
    return float(f"{x:.{digits}g}")


def _estimate_json(e: Estimate) -> dict[str, Any]:
    return {
        "target": e.target,
        "precision": e.precision,
        "precision_requested": e.precision_requested,
        "batch": e.batch,
        "latency_s": sig(e.latency_s),
        "throughput_per_s": sig(e.throughput_per_s),
        "bound": e.bound,
        "compute_s": sig(e.compute_s),
        "memory_s": sig(e.memory_s),
        "overhead_s": sig(e.overhead_s),
        "utilisation": sig(e.utilisation, 4),
        "memory_bytes": e.memory_bytes,
        "weights_bytes": e.weights_bytes,
        "activation_bytes": e.activation_bytes,
        "fits": e.fits,
        "max_batch": e.max_batch,
        "energy_j": sig(e.energy_j),
        "kernels": e.kernels,
        "notes": list(e.notes),
    }


def _training_json(t: TrainingEstimate) -> dict[str, Any]:
    return {
        "target": t.target,
        "precision": t.precision,
        "batch": t.batch,
        "optimizer": t.optimizer,
        "step_s": sig(t.step_s),
        "epoch_s": sig(t.epoch_s),
        "memory_bytes": t.memory_bytes,
        "fits": t.fits,
    }


def model_entry(
    name: str,
    source: dict[str, Any],
    count: ModelCount,
    precision: str,
    estimates: Sequence[Estimate],
    training: Sequence[TrainingEstimate],
) -> dict[str, Any]:
    """The report entry of one analysed model."""
    real = [o for o in count.ops if o.op_class != "view"]
    first = estimates[0] if estimates else None
    times = [t.time_s for t in first.op_times] if first else [0.0] * len(count.ops)
    total_time = sum(times) or 1.0
    bpe = BYTES_PER_ELEMENT[precision]

    unsupported: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    by_op: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0, 0, 0.0])
    by_module: dict[str, dict[str, Any]] = {}
    scale_targets = [e for e in estimates if e.batch == (first.batch if first else 0)]
    for i, op in enumerate(count.ops):
        if op.op_class == "view":
            continue
        nbytes = (op.act_in + op.w_in + op.out) * bpe + op.fixed_bytes
        row = by_op[(op.op, op.op_class)]
        row[0] += 1
        row[1] += op.macs
        row[2] += op.flops
        row[3] += nbytes
        row[4] += times[i]
        if not op.supported:
            unsupported[op.op][0] += 1
            unsupported[op.op][1] += times[i]
        mod = by_module.setdefault(op.scope, {"macs": 0, "flops": 0, "bytes": 0, "time_s": defaultdict(float)})
        mod["macs"] += op.macs
        mod["flops"] += op.flops
        mod["bytes"] += nbytes
        for e in scale_targets:
            mod["time_s"][e.target] += e.op_times[i].time_s

    supported_time = sum(t for op, t in zip(count.ops, times) if op.supported)
    return {
        "name": name,
        "status": "ok",
        "error": None,
        "source": source,
        "engine": count.engine,
        "traced_batch": count.batch,
        "params": count.params,
        "buffers": count.buffers,
        "macs": count.macs,
        "flops": count.flops,
        "precision": precision,
        "coverage": {
            "ops": sig(sum(1 for o in real if o.supported) / len(real), 4) if real else 1.0,
            "time": sig(supported_time / total_time, 4) if first else None,
            "time_reference": f"{first.target} batch {first.batch}" if first else None,
        },
        "unsupported_ops": [
            {"op": op, "count": int(c), "time_share": sig(t / total_time, 4)}
            for op, (c, t) in sorted(unsupported.items(), key=lambda kv: (-kv[1][1], kv[0]))
        ],
        "estimates": [_estimate_json(e) for e in estimates],
        "training": [_training_json(t) for t in training],
        "ops": [
            {"op": op, "op_class": cls, "count": int(r[0]), "macs": int(r[1]), "flops": int(r[2]), "bytes": int(r[3]),
             "time_share": sig(r[4] / total_time, 4)}
            for (op, cls), r in sorted(by_op.items(), key=lambda kv: (-kv[1][4], kv[0]))
        ],
        "modules": [
            {"module": scope or "(root)", "macs": m["macs"], "flops": m["flops"], "bytes": m["bytes"],
             "time_s": {k: sig(v) for k, v in sorted(m["time_s"].items())}}
            for scope, m in sorted(by_module.items())
        ],
    }


def measurement_entry(m: dict[str, Any], batch: int, estimates: Sequence[dict[str, Any]], targets: Sequence[Target]) -> dict[str, Any]:
    """A measurement on this machine, with the estimate of each calibrated target at the traced batch
    beside it (a calibrated target is one whose sources name a calibration)."""
    calibrated = {t.id for t in targets if "calibration" in t.sources}
    versus = [
        {"target": e["target"], "estimate_s": e["latency_s"], "ratio": sig(e["latency_s"] / m["median_s"], 4)}
        for e in estimates if e["target"] in calibrated and e["batch"] == batch and m["median_s"]
    ]
    return {
        "engine": m["engine"], "batch": batch, "median_s": sig(m["median_s"]), "p10_s": sig(m["p10_s"]),
        "p90_s": sig(m["p90_s"]), "reps": m["reps"], "busy": sig(m.get("busy", 0.0), 3),
        "vs_calibrated": versus,
        "note": "measured on this machine; unlike the rest of the report, it varies from run to run",
    }


def error_entry(name: str, source: dict[str, Any], error: str) -> dict[str, Any]:
    return {
        "name": name, "status": "error", "error": error, "source": source, "params": None, "macs": None,
        "flops": None, "coverage": None, "unsupported_ops": [], "estimates": [], "training": [],
    }


def target_entry(t: Target) -> dict[str, Any]:
    return {
        "name": t.name,
        "kind": t.kind,
        "origin": t.origin,
        "peak_flops": {k: v for k, v in sorted(t.peak_flops.items())},
        "mem_bw": t.mem_bw,
        "mem_bytes": t.mem_bytes,
        "tdp_w": t.tdp_w,
        "sources": {k: list(v) for k, v in sorted(t.sources.items())},
    }


def build(models: Sequence[dict[str, Any]], targets: Sequence[Target], settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "ha-bot", "version": __version__},
        "conventions": CONVENTIONS,
        "settings": settings,
        "targets": {t.id: target_entry(t) for t in targets},
        "models": list(models),
    }


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def load_report(path: str) -> dict[str, Any]:
    from ha_bot.errors import HaBotError

    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise HaBotError(f"{path}: report not found") from None
    except (OSError, ValueError) as e:
        raise HaBotError(f"{path}: not a ha-bot JSON report ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        raise HaBotError(f"{path}: unsupported report schema_version {doc.get('schema_version') if isinstance(doc, dict) else None!r} (expected {SCHEMA_VERSION})")
    return doc
