"""Orchestrate one analysis: config -> load -> count -> cost -> report. One bad model never stops the others."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ha_bot import cost, report, targets
from ha_bot.config import Config, ModelSpec
from ha_bot.errors import ConfigError, HaBotError, ModelError
from ha_bot.records import ModelCount

Counter = Callable[[ModelSpec, str], ModelCount]


def select_targets(
    config: Config, ids: Sequence[str] = (), files: Sequence[str] = (), calibration: str | None = None,
) -> list[targets.Target]:
    """The targets to estimate for: CLI ids override the config's; files and inline definitions add to
    the pool. With a calibration file, targets without measured curves get curves derived from it."""
    chosen = _select(config, ids, files)
    path = calibration or config.calibration
    if not path:
        return chosen
    from ha_bot.calibrate import derive_for

    calibrated = list(targets.load_targets_file(path).values())
    if len(calibrated) != 1 or not calibrated[0].curves:
        raise ConfigError("expected one calibrated target (a file written by `ha-bot calibrate`)", file=path)
    return [t if t.curves else derive_for(t, calibrated[0]) for t in chosen]


def _select(config: Config, ids: Sequence[str], files: Sequence[str]) -> list[targets.Target]:
    pool = dict(targets.load_builtin())
    for path in (*config.target_files, *files):
        pool.update(targets.load_targets_file(path))
    for doc in config.custom_targets:
        t = targets.parse_target(doc, origin=config.path or "config", line_of=targets._line_of(doc))
        pool[t.id] = t
    if ids:
        return targets.resolve(list(ids), pool)
    for i, tid in enumerate(config.targets):  # locate an unknown id in the config file
        if tid not in pool:
            try:
                targets.resolve([tid], pool)
            except ConfigError as e:
                line = config.target_lines[i] if i < len(config.target_lines) else None
                raise ConfigError(str(e), file=config.path, line=line, key=f"targets[{i}]") from None
    return targets.resolve(list(config.targets), pool)


def source_of(spec: ModelSpec) -> dict[str, Any]:
    src: dict[str, Any] = {"python": spec.python} if spec.python else {"onnx": spec.onnx}
    if spec.inputs:
        src["inputs"] = [{"shape": list(i.shape), "dtype": i.dtype} for i in spec.inputs]
    if spec.device != "cpu":
        src["device"] = spec.device
    return src


def count_model(spec: ModelSpec, root: str) -> ModelCount:
    """Count one model: ONNX in-process (no model code runs), Python in a sandboxed child process."""
    return count_model_deps(spec, root)[0]


def count_model_deps(spec: ModelSpec, root: str) -> tuple[ModelCount, list[str]]:
    """The count and the repository files it depended on (for the cache)."""
    count, deps, _ = count_and_measure(spec, root, measure=None)
    return count, deps


def count_and_measure(spec: ModelSpec, root: str, measure: str | None) -> tuple[ModelCount, list[str], dict[str, Any] | None]:
    """Count a model and, when ``measure`` names a runtime, time it on this machine too."""
    if spec.onnx:
        from ha_bot.count_onnx import count_onnx

        path = os.path.join(root, spec.onnx)
        count = count_onnx(path, input_shapes=[list(i.shape) for i in spec.inputs] or None)
        return count, [os.path.relpath(path, root)], _measure_onnx(path, spec, measure) if measure else None
    from ha_bot.sandbox import run_worker

    job = {
        "python": spec.python,
        "root": root,
        "kwargs": dict(spec.kwargs),
        "inputs": [{"shape": list(i.shape), "dtype": i.dtype} for i in spec.inputs],
        "device": spec.device,
        "measure": measure,
    }
    answer = run_worker(job, timeout_s=spec.timeout_s, cwd=root)
    if answer.get("status") != "ok":
        raise ModelError(str(answer.get("error")))
    return ModelCount.from_json(answer["count"]), list(answer.get("deps", [])), answer.get("measurement")


def _measure_onnx(path: str, spec: ModelSpec, engine: str) -> dict[str, Any]:
    """Time an ONNX model with onnxruntime (the graph runs; no Python model code does)."""
    if engine != "onnxruntime":
        raise ModelError(f"`measure: {engine}` needs a Python model; an ONNX model is measured with onnxruntime")
    from ha_bot import measure

    try:
        session = measure.ort_session(path)
        m = measure.measure_session(session, measure.random_feeds(session, [i.shape for i in spec.inputs]), max_wait_s=10.0)
    except Exception as e:
        raise ModelError(f"measuring {spec.onnx} with onnxruntime failed: {type(e).__name__}: {e}") from None
    return {"engine": "onnxruntime", **m._asdict()}


def cached_counter(cache: Any) -> Counter:
    """A counter that reuses counts whose inputs (files, spec, versions) are unchanged."""

    def counter(spec: ModelSpec, root: str) -> ModelCount:
        hit = cache.get(spec, root)
        if hit is not None:
            return hit
        count, deps = count_model_deps(spec, root)
        cache.put(spec, root, count, deps)
        return count

    return counter


def analyze_model(
    spec: ModelSpec, count: ModelCount, config: Config, chosen: Sequence[targets.Target],
    precision: str | None = None, batches: Sequence[int] | None = None,
) -> dict[str, Any]:
    prec = precision or spec.precision or config.precision
    batch_sizes = list(batches or spec.batch_sizes or config.batch_sizes)
    estimates = [cost.estimate(count, t, prec, b) for b in batch_sizes for t in chosen]
    by_id = {t.id: t for t in chosen}
    training = [
        cost.training_step(count, by_id[e.target], e, config.training.optimizer, config.training.dataset_size)
        for e in estimates
    ]
    return report.model_entry(spec.name, source_of(spec), count, prec, estimates, training)


def analyze(
    config: Config,
    chosen: Sequence[targets.Target],
    *,
    precision: str | None = None,
    batches: Sequence[int] | None = None,
    counter: Counter = count_model,
    progress: Callable[[str], None] | None = None,
    measure: str | None = None,
) -> dict[str, Any]:
    """``measure`` (or a model's `measure:`) also times each model on this machine."""
    entries = []
    for spec in config.models:
        if progress:
            progress(f"analysing {spec.name}")
        try:
            engine = measure or spec.measure
            measurement = None
            if engine:
                count, _, measurement = count_and_measure(spec, config.root, engine)
            else:
                count = counter(spec, config.root)
            entry = analyze_model(spec, count, config, chosen, precision, batches)
            if measurement:
                entry["measurement"] = report.measurement_entry(measurement, count.batch, entry["estimates"], chosen)
            entries.append(entry)
        except ConfigError:
            raise
        except HaBotError as e:
            entries.append(report.error_entry(spec.name, source_of(spec), str(e)))
    settings = {
        "precision": precision or config.precision,
        "batch_sizes": list(batches or config.batch_sizes),
        "targets": [t.id for t in chosen],
        "training": {"optimizer": config.training.optimizer, "dataset_size": config.training.dataset_size},
    }
    return report.build(entries, chosen, settings)
