"""`.ha-bot.yml` -> a validated, immutable :class:`Config`. Errors name the file, line and key."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ha_bot.errors import ConfigError
from ha_bot.targets import PRECISIONS

DEFAULT_CONFIG = ".ha-bot.yml"
DEFAULT_TARGETS = ("nvidia_h100_sxm", "nvidia_jetson_orin_nano_8gb", "rpi5_cortex_a76")
DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool")
OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class InputSpec:
    shape: tuple[int, ...]
    dtype: str = "float32"


@dataclass(frozen=True)
class Budget:
    """A limit on one metric: absolute (`max`) or relative (`regression` in percent), warn/fail."""

    metric: str  # latency | memory | params | macs | flops | energy
    target: str | None  # None: every target (latency/memory/energy) or model-level metric
    warn: float | None
    fail: float | None
    relative: bool  # True: percent change vs base; False: absolute SI value


@dataclass(frozen=True)
class ModelSpec:
    name: str
    python: str | None = None  # "path/to/file.py:build" or "pkg.module:build"
    onnx: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    inputs: tuple[InputSpec, ...] = ()
    device: str = "cpu"  # cpu | meta
    precision: str | None = None
    batch_sizes: tuple[int, ...] | None = None
    card: str | None = None
    training_log: str | None = None
    measure: str | None = None  # onnxruntime | torch
    timeout_s: float = 600.0
    budgets: tuple[Budget, ...] = ()
    line: int | None = None


@dataclass(frozen=True)
class TrainingSpec:
    optimizer: str = "adamw"
    dataset_size: int | None = None


@dataclass(frozen=True)
class Config:
    path: str  # the file read ("" for zero-config runs)
    root: str  # directory model paths are relative to
    models: tuple[ModelSpec, ...]
    targets: tuple[str, ...] = DEFAULT_TARGETS
    custom_targets: tuple[Mapping[str, Any], ...] = ()
    target_files: tuple[str, ...] = ()
    precision: str = "fp16"
    batch_sizes: tuple[int, ...] = (1,)
    training: TrainingSpec = TrainingSpec()
    budgets: tuple[Budget, ...] = ()
    epsilon_pct: float = 1.0  # changes smaller than this are "unchanged"
    informational: bool = False
    fail_on: str = "fail"  # fail | warn | never
    target_lines: tuple[int | None, ...] = ()  # line of each `targets:` item, for error messages
    calibration: str | None = None  # a calibrated target file: its curves are carried to targets without any
    narrative: Mapping[str, Any] = field(default_factory=dict)  # LLM settings: model, max_tokens, temperature, timeout_s, token_cap


_TOP_KEYS = (
    "models", "targets", "target_files", "precision", "batch_sizes", "training", "budgets",
    "epsilon_pct", "informational", "fail_on", "calibration", "narrative",
)
_NARRATIVE_KEYS = {"model": str, "max_tokens": int, "temperature": float, "timeout_s": float, "token_cap": int}
_MODEL_KEYS = (
    "name", "python", "onnx", "kwargs", "inputs", "device", "precision", "batch_sizes", "card",
    "training_log", "measure", "timeout", "budgets",
)
_BUDGET_METRICS = ("latency", "memory", "params", "macs", "flops", "energy")


class _Ctx:
    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, msg: str, node: Any = None, key: Any = None, path: str = "") -> ConfigError:
        line = None
        lc = getattr(node, "lc", None)
        if lc is not None:
            try:
                if key is not None and isinstance(key, int):
                    line = lc.item(key)[0] + 1
                elif key is not None:
                    line = lc.key(key)[0] + 1
                else:
                    line = lc.line + 1
            except (KeyError, IndexError, TypeError, AttributeError):
                line = lc.line + 1
        return ConfigError(msg, file=self.file, line=line, key=path)


def _suggest(value: str, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(value, allowed, n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"Allowed: {', '.join(allowed)}.{hint}"


def _check_keys(ctx: _Ctx, node: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
    for k in node:
        if k not in allowed:
            where = f"{path}.{k}" if path else str(k)
            raise ctx.fail(f"unknown key {k!r}. {_suggest(str(k), allowed)}", node, k, where)


def _int_list(ctx: _Ctx, node: Any, parent: Any, key: Any, path: str, *, minimum: int = 1) -> tuple[int, ...]:
    if isinstance(node, int) and not isinstance(node, bool):
        node = [node]
    if not isinstance(node, list) or not node:
        raise ctx.fail("expected a non-empty list of integers", parent, key, path)
    out = []
    for i, v in enumerate(node):
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise ctx.fail(f"expected integers >= {minimum}, got {v!r}", node, i, f"{path}[{i}]")
        out.append(int(v))
    return tuple(out)


def _precision(ctx: _Ctx, value: Any, parent: Any, key: Any, path: str) -> str:
    if value not in PRECISIONS:
        raise ctx.fail(f"unknown precision {value!r}. {_suggest(str(value), PRECISIONS)}", parent, key, path)
    return str(value)


def parse_shape(text: str) -> tuple[int, ...]:
    """'1x3x224x224' or '1,3,224,224' -> (1, 3, 224, 224)."""
    parts = re.split(r"[x,\s]+", text.strip().strip("[]()"))
    try:
        shape = tuple(int(p) for p in parts if p)
    except ValueError:
        raise ConfigError(f"bad input shape {text!r}: expected dimensions like 1x3x224x224") from None
    if not shape or any(d < 0 for d in shape):
        raise ConfigError(f"bad input shape {text!r}: expected dimensions like 1x3x224x224")
    return shape


def _inputs(ctx: _Ctx, node: Any, parent: Any, path: str) -> tuple[InputSpec, ...]:
    if not isinstance(node, list) or not node:
        raise ctx.fail("expected a non-empty list like [{shape: [1, 3, 224, 224], dtype: float32}]", parent, "inputs", path)
    specs = []
    for i, item in enumerate(node):
        p = f"{path}[{i}]"
        if isinstance(item, list):
            item = {"shape": item}
        if not isinstance(item, Mapping):
            raise ctx.fail("expected {shape: [...], dtype: ...}", node, i, p)
        _check_keys(ctx, item, ("shape", "dtype"), p)
        shape = item.get("shape")
        if isinstance(shape, str):
            dims = parse_shape(shape)
        else:
            dims = _int_list(ctx, shape, item, "shape", f"{p}.shape", minimum=0)
        dtype = item.get("dtype", "float32")
        if dtype not in DTYPES:
            raise ctx.fail(f"unknown dtype {dtype!r}. {_suggest(str(dtype), DTYPES)}", item, "dtype", f"{p}.dtype")
        specs.append(InputSpec(dims, str(dtype)))
    return tuple(specs)


def _budgets(ctx: _Ctx, node: Any, parent: Any, path: str) -> tuple[Budget, ...]:
    """budgets: {latency: {warn: 5ms, fail: 10ms, target: id}, memory_regression_pct: {warn: 5, fail: 10}}
    Accepts a list of mappings: [{metric: latency, target: nvidia_h100_sxm, max: {warn: .., fail: ..}}]"""
    if node is None:
        return ()
    if not isinstance(node, list):
        raise ctx.fail(
            "expected a list like [{metric: latency, target: rpi5_cortex_a76, fail: 0.05}, {metric: macs, regression_pct: {warn: 5, fail: 10}}]",
            parent, "budgets", path,
        )
    out = []
    for i, item in enumerate(node):
        p = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise ctx.fail("expected a mapping", node, i, p)
        _check_keys(ctx, item, ("metric", "target", "warn", "fail", "regression_pct"), p)
        metric = item.get("metric")
        if metric not in _BUDGET_METRICS:
            raise ctx.fail(f"unknown metric {metric!r}. {_suggest(str(metric), _BUDGET_METRICS)}", item, "metric", f"{p}.metric")
        rel = item.get("regression_pct")
        levels = rel if rel is not None else item
        if rel is not None and not isinstance(rel, Mapping):
            raise ctx.fail("expected {warn: PCT, fail: PCT}", item, "regression_pct", f"{p}.regression_pct")
        if rel is not None:
            _check_keys(ctx, rel, ("warn", "fail"), f"{p}.regression_pct")
        vals = []
        for lvl in ("warn", "fail"):
            v = levels.get(lvl)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
                raise ctx.fail(f"expected a non-negative number, got {v!r}", levels, lvl, f"{p}.{lvl}")
            vals.append(float(v) if v is not None else None)
        if vals == [None, None]:
            raise ctx.fail("a budget needs `warn` and/or `fail`", node, i, p)
        target = item.get("target")
        out.append(Budget(str(metric), str(target) if target else None, vals[0], vals[1], rel is not None))
    return tuple(out)


def _model(ctx: _Ctx, node: Any, models: Any, i: int) -> ModelSpec:
    p = f"models[{i}]"
    if not isinstance(node, Mapping):
        raise ctx.fail("expected a mapping with `name` and `python` or `onnx`", models, i, p)
    _check_keys(ctx, node, _MODEL_KEYS, p)
    name = node.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ctx.fail("`name` is required: letters, digits, '.', '_' or '-', at most 64 characters", node, "name" if "name" in node else None, f"{p}.name")
    p = f"models[{i}] ({name})"
    python, onnx = node.get("python"), node.get("onnx")
    if (python is None) == (onnx is None):
        raise ctx.fail("give exactly one of `python: path/to/file.py:build` or `onnx: path/to/model.onnx`", node, None, p)
    if python is not None and (not isinstance(python, str) or ":" not in python):
        raise ctx.fail("expected `path/to/file.py:function` or `package.module:function`", node, "python", f"{p}.python")
    if onnx is not None and not isinstance(onnx, str):
        raise ctx.fail("expected a path to an .onnx file", node, "onnx", f"{p}.onnx")
    inputs: tuple[InputSpec, ...] = ()
    if "inputs" in node:
        inputs = _inputs(ctx, node["inputs"], node, f"{p}.inputs")
    elif python is not None:
        raise ctx.fail("a Python model needs `inputs: [{shape: [1, 3, 224, 224], dtype: float32}]`", node, None, p)
    kwargs = node.get("kwargs", {}) or {}
    if not isinstance(kwargs, Mapping):
        raise ctx.fail("expected a mapping of keyword arguments for the factory", node, "kwargs", f"{p}.kwargs")
    device = node.get("device", "cpu")
    if device not in ("cpu", "meta"):
        raise ctx.fail(f"unknown device {device!r}. Allowed: cpu, meta", node, "device", f"{p}.device")
    precision = _precision(ctx, node["precision"], node, "precision", f"{p}.precision") if "precision" in node else None
    batches = _int_list(ctx, node["batch_sizes"], node, "batch_sizes", f"{p}.batch_sizes") if "batch_sizes" in node else None
    measure = node.get("measure")
    if measure is not None and measure not in ("onnxruntime", "torch"):
        raise ctx.fail(f"unknown measure {measure!r}. Allowed: onnxruntime, torch", node, "measure", f"{p}.measure")
    timeout = node.get("timeout", 600)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ctx.fail("expected a positive number of seconds", node, "timeout", f"{p}.timeout")
    for key in ("card", "training_log"):
        if key in node and not isinstance(node[key], str):
            raise ctx.fail("expected a path", node, key, f"{p}.{key}")
    return ModelSpec(
        name=name,
        python=python,
        onnx=onnx,
        kwargs=_plain(kwargs),
        inputs=inputs,
        device=str(device),
        precision=precision,
        batch_sizes=batches,
        card=node.get("card"),
        training_log=node.get("training_log"),
        measure=measure,
        timeout_s=float(timeout),
        budgets=_budgets(ctx, node.get("budgets"), node, f"{p}.budgets"),
        line=(node.lc.line + 1) if hasattr(node, "lc") else None,
    )


def _plain(obj: Any) -> Any:
    """ruamel's commented containers -> plain dicts/lists (picklable, JSON-able)."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


def parse(doc: Any, *, file: str, root: str) -> Config:
    ctx = _Ctx(file)
    if doc is None:
        raise ConfigError("the file is empty; it needs at least `models:`", file=file)
    if not isinstance(doc, Mapping):
        raise ctx.fail("expected a mapping at the top level (models:, targets:, ...)", doc)
    _check_keys(ctx, doc, _TOP_KEYS, "")
    models_node = doc.get("models")
    if not isinstance(models_node, list) or not models_node:
        raise ctx.fail("`models` must be a non-empty list", doc, "models" if "models" in doc else None, "models")
    models = tuple(_model(ctx, m, models_node, i) for i, m in enumerate(models_node))
    seen: dict[str, int] = {}
    for i, m in enumerate(models):
        if m.name in seen:
            raise ctx.fail(f"duplicate model name {m.name!r} (also models[{seen[m.name]}])", models_node, i, f"models[{i}].name")
        seen[m.name] = i

    kw: dict[str, Any] = {}
    if "targets" in doc:
        tnode = doc["targets"]
        if isinstance(tnode, str):
            tnode = [tnode]
        if not isinstance(tnode, list) or not tnode:
            raise ctx.fail("expected a list of target ids or inline target definitions", doc, "targets", "targets")
        ids, custom = [], []
        for i, t in enumerate(tnode):
            if isinstance(t, str):
                ids.append(t)
            elif isinstance(t, Mapping) and isinstance(t.get("id"), str):
                ids.append(t["id"])
                custom.append(t)
            else:
                raise ctx.fail("expected a target id or a mapping with `id:`", tnode, i, f"targets[{i}]")
        kw["targets"], kw["custom_targets"] = tuple(ids), tuple(custom)
        lc = getattr(tnode, "lc", None)
        kw["target_lines"] = tuple((lc.item(i)[0] + 1) if lc is not None else None for i in range(len(ids)))
    if "target_files" in doc:
        files = doc["target_files"]
        if isinstance(files, str):
            files = [files]
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise ctx.fail("expected a list of paths", doc, "target_files", "target_files")
        kw["target_files"] = tuple(os.path.join(root, f) for f in files)
    if "precision" in doc:
        kw["precision"] = _precision(ctx, doc["precision"], doc, "precision", "precision")
    if "batch_sizes" in doc:
        kw["batch_sizes"] = _int_list(ctx, doc["batch_sizes"], doc, "batch_sizes", "batch_sizes")
    if "training" in doc:
        tr = doc["training"]
        if not isinstance(tr, Mapping):
            raise ctx.fail("expected {optimizer: adamw, dataset_size: N}", doc, "training", "training")
        _check_keys(ctx, tr, ("optimizer", "dataset_size"), "training")
        opt = tr.get("optimizer", "adamw")
        if opt not in OPTIMIZERS:
            raise ctx.fail(f"unknown optimizer {opt!r}. {_suggest(str(opt), OPTIMIZERS)}", tr, "optimizer", "training.optimizer")
        size = tr.get("dataset_size")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ctx.fail("expected a positive integer", tr, "dataset_size", "training.dataset_size")
        kw["training"] = TrainingSpec(str(opt), size)
    kw["budgets"] = _budgets(ctx, doc.get("budgets"), doc, "budgets")
    if "epsilon_pct" in doc:
        eps = doc["epsilon_pct"]
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
            raise ctx.fail("expected a non-negative number (percent)", doc, "epsilon_pct", "epsilon_pct")
        kw["epsilon_pct"] = float(eps)
    if "informational" in doc:
        if not isinstance(doc["informational"], bool):
            raise ctx.fail("expected true or false", doc, "informational", "informational")
        kw["informational"] = doc["informational"]
    if "calibration" in doc:
        if not isinstance(doc["calibration"], str):
            raise ctx.fail("expected the path of a file written by `ha-bot calibrate`", doc, "calibration", "calibration")
        kw["calibration"] = os.path.join(root, doc["calibration"])
    if "narrative" in doc:
        nar = doc["narrative"]
        if not isinstance(nar, Mapping):
            raise ctx.fail("expected {model: ..., max_tokens: N, temperature: T, timeout_s: S, token_cap: N}", doc, "narrative", "narrative")
        _check_keys(ctx, nar, tuple(_NARRATIVE_KEYS), "narrative")
        for key, kind in _NARRATIVE_KEYS.items():
            v = nar.get(key)
            if v is None:
                continue
            ok = isinstance(v, str) and bool(v) if kind is str else (not isinstance(v, bool) and isinstance(v, (int, float)) and v >= 0)
            if kind is int and ok:
                ok = isinstance(v, int)
            if not ok:
                raise ctx.fail(f"expected a {'name' if kind is str else 'non-negative ' + kind.__name__}", nar, key, f"narrative.{key}")
        kw["narrative"] = _plain(nar)
    if "fail_on" in doc:
        if doc["fail_on"] not in ("fail", "warn", "never"):
            raise ctx.fail("expected one of: fail, warn, never", doc, "fail_on", "fail_on")
        kw["fail_on"] = str(doc["fail_on"])
    return Config(path=file, root=root, models=models, **kw)


def load(path: str) -> Config:
    """Read and validate a config file."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError("config file not found (pass --config FILE, or give a model path for zero-config)", file=path) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read: {e}", file=path) from None
    try:
        doc = YAML(typ="rt").load(text)
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"invalid YAML: {problem}", file=path, line=line) from None
    return parse(doc, file=path, root=os.path.dirname(os.path.abspath(path)))
