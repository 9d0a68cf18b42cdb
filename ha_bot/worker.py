"""The child process that imports and traces user model code (see :mod:`ha_bot.sandbox`).

Reads one JSON job on stdin, prints one JSON line on stdout:
``{"status": "ok", "count": {...}}`` or ``{"status": "error", "error": "..."}``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import traceback
from typing import Any

_DTYPES = {
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}


class _Fail(Exception):
    pass


def _user_frame(tb: Any, root: str) -> str:
    """The innermost traceback frame inside the user's tree, as 'file:line'."""
    where = ""
    for frame in traceback.extract_tb(tb):
        path = os.path.abspath(frame.filename)
        if path.startswith(root) and "site-packages" not in path:
            where = f" (at {os.path.relpath(path, root)}:{frame.lineno})"
    return where


def _load_factory(ref: str, root: str) -> Any:
    target, _, func = ref.rpartition(":")
    if target.endswith(".py") or "/" in target or os.sep in target:
        path = os.path.join(root, target)
        if not os.path.isfile(path):
            raise _Fail(f"model file not found: {target}")
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        spec = importlib.util.spec_from_file_location(f"_ha_bot_model_{abs(hash(path))}", path)
        if spec is None or spec.loader is None:
            raise _Fail(f"cannot import {target}")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            raise _Fail(f"importing {target} failed: {type(e).__name__}: {e}{_user_frame(e.__traceback__, root)}") from None
    else:
        try:
            module = importlib.import_module(target)
        except Exception as e:
            raise _Fail(f"importing {target} failed: {type(e).__name__}: {e}{_user_frame(e.__traceback__, root)}") from None
    fn = getattr(module, func, None)
    if fn is None or not callable(fn):
        names = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise _Fail(f"{target} has no callable {func!r} (callables there: {', '.join(names[:10]) or 'none'})")
    return fn


def run(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from ha_bot.count_torch import count_module

    root = os.path.abspath(job["root"])
    sys.path.insert(0, root)
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    factory = _load_factory(job["python"], root)
    device = job.get("device", "cpu")
    try:
        with torch.device(device):
            model = factory(**job.get("kwargs", {}))
    except Exception as e:
        raise _Fail(f"{job['python']}() raised {type(e).__name__}: {e}{_user_frame(e.__traceback__, root)}") from None
    if not isinstance(model, torch.nn.Module):
        raise _Fail(f"{job['python']}() returned {type(model).__name__}, expected a torch.nn.Module")
    inputs = []
    for spec in job["inputs"]:
        dtype = getattr(torch, _DTYPES[spec["dtype"]])
        shape = tuple(spec["shape"])
        if dtype.is_floating_point:
            t = torch.empty(shape, dtype=dtype, device=device) if device == "meta" else torch.randn(shape, dtype=dtype)
        else:
            t = torch.zeros(shape, dtype=dtype, device=device)
        inputs.append(t)
    try:
        count = count_module(model, tuple(inputs))
    except Exception as e:
        shapes = ", ".join("x".join(map(str, s["shape"])) + f" {s['dtype']}" for s in job["inputs"])
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        hint = " (check `inputs:` shapes and dtypes)"
        if device == "meta" and "cond must be a bool" in msg:
            hint = (" (torch's tracer cannot run convolutions on the meta device: use `device: cpu` for this model;"
                    " meta suits transformers built from linear, attention, embedding and norm layers)")
        raise _Fail(
            f"tracing with inputs [{shapes}] failed: {type(e).__name__}: {msg}{_user_frame(e.__traceback__, root)}{hint}"
        ) from None
    answer: dict[str, Any] = {"status": "ok", "count": count.to_json(), "deps": _repo_files_loaded(root)}
    if job.get("measure"):
        answer["measurement"] = _measure(job["measure"], model, tuple(inputs), device)
    return answer


def _measure(engine: str, model: Any, inputs: tuple[Any, ...], device: str) -> dict[str, Any]:
    """Run the model on this machine (warm-up, repetitions): median and spread."""
    import tempfile

    from ha_bot import measure

    if device == "meta":
        raise _Fail("`measure:` needs real weights: build the model with `device: cpu`")
    try:
        if engine == "torch":
            m = measure.measure_torch(model, inputs, max_wait_s=10.0)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                path = measure.export_onnx(model, inputs, os.path.join(tmp, "model.onnx"))
                m = measure.measure_onnx(path, inputs, max_wait_s=10.0)
    except _Fail:
        raise
    except Exception as e:
        raise _Fail(f"measuring with {engine} failed: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None
    return {"engine": engine, **m._asdict()}


def _repo_files_loaded(root: str) -> list[str]:
    """Files of the user's tree that model code imported: what the cache must hash."""
    deps = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        path = os.path.abspath(path)
        if path.startswith(root + os.sep) and "site-packages" not in path and os.sep + ".venv" not in path:
            deps.add(os.path.relpath(path, root))
    return sorted(deps)


RESULT_PREFIX = "@@ha-bot-result@@ "


def main() -> int:
    job = json.loads(sys.stdin.read())
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # model code's prints must not corrupt the answer
    try:
        answer = run(job)
    except _Fail as e:
        answer = {"status": "error", "error": str(e)}
    except Exception as e:  # a bug in ha-bot or torch: still one clear line for the report
        answer = {"status": "error", "error": f"unexpected {type(e).__name__}: {e}"}
    real_stdout.write(RESULT_PREFIX + json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
