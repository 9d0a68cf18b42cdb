"""Shared by the benchmark scripts: timing medians, a table printer, JSON output."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def median_time(fn: Callable[[], Any], reps: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([line.format(*header), line.format(*("-" * w for w in widths)), *(line.format(*r) for r in cells)])


def write_json(name: str, doc: dict[str, Any]) -> str:
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
    return path
