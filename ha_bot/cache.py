"""Count cache keyed by the content of everything a model depends on.

The key covers the model's spec (source, inputs, kwargs, device), ha-bot's and torch's versions,
and the bytes of the model's entry file (or ONNX file). Each entry also records every file of the
repository the model code imported while it was traced, with their hashes; a hit requires all of
them unchanged. Counts are precision- and target-independent, so one entry serves every estimate.
Entries are JSON files written atomically; a corrupt entry is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from ha_bot import __version__
from ha_bot.config import ModelSpec
from ha_bot.records import ModelCount

DEFAULT_DIR = ".ha-bot-cache"


def file_hash(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def _torch_version() -> str:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:
        return "unknown"


def entry_file(spec: ModelSpec, root: str) -> str:
    if spec.onnx:
        return os.path.join(root, spec.onnx)
    assert spec.python is not None
    target = spec.python.rpartition(":")[0]
    if target.endswith(".py") or "/" in target:
        return os.path.join(root, target)
    return os.path.join(root, *target.split(".")) + ".py"


def key(spec: ModelSpec, root: str) -> str:
    doc = {
        "ha_bot": __version__,
        "torch": _torch_version() if spec.python else None,
        "python": spec.python,
        "onnx": spec.onnx,
        "kwargs": spec.kwargs,
        "inputs": [[list(i.shape), i.dtype] for i in spec.inputs],
        "device": spec.device,
        "entry": file_hash(entry_file(spec, root)),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:32]


class Cache:
    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.hits = 0
        self.misses = 0

    def _path(self, k: str) -> str:
        return os.path.join(self.dir, f"{k}.json")

    def get(self, spec: ModelSpec, root: str) -> ModelCount | None:
        try:
            with open(self._path(key(spec, root)), encoding="utf-8") as f:
                doc: dict[str, Any] = json.load(f)
            for rel, digest in doc["deps"].items():
                if file_hash(os.path.join(root, rel)) != digest:
                    raise KeyError(rel)
            count = ModelCount.from_json(doc["count"])
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            self.misses += 1
            return None
        self.hits += 1
        return count

    def put(self, spec: ModelSpec, root: str, count: ModelCount, deps: Sequence[str]) -> None:
        hashes = {rel: file_hash(os.path.join(root, rel)) for rel in sorted(deps)}
        doc = {"deps": hashes, "count": count.to_json()}
        os.makedirs(self.dir, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, separators=(",", ":"))
            os.replace(tmp, self._path(key(spec, root)))
        except OSError:
            if os.path.exists(tmp):
                os.unlink(tmp)
