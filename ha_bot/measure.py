"""Measure real latency, to check estimates against: onnxruntime sessions and eager PyTorch.

The onnxruntime session is built exactly as :mod:`ha_bot.calibrate` builds the sessions of its
micro-benchmarks (:func:`ort_session`: one intra-op thread per core, all graph optimisations, the
sequential executor, and ``session.force_spinning_stop`` so that the thread pool of a session that
just ran stops spinning and does not slow the next session down), so that a target calibrated with
``ha-bot calibrate`` and a model measured here describe the same runtime.

Timing: ``warmup`` untimed runs, then ``reps`` timed runs; the figures are the median and the 10th
and 90th percentiles of the per-run wall times (``time.perf_counter``; CUDA events on a GPU).

Shared machines: while timing, :class:`LoadMeter` reads the scheduler's accounting to learn how
long the runtime's threads sat runnable but waiting for a CPU that another process held
(``Measurement.busy``). :func:`measure_quiet` repeats a burst of runs until one was quiet (waits
under ``QUIET`` of the time) or its wait runs out, and keeps the best.
A CPU runtime with one thread per core slows down far more than its share when another process
takes a core (every parallel op waits for the thread that was preempted), so unguarded medians on
a busy machine say more about the neighbours than about the model.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple


class Measurement(NamedTuple):
    median_s: float
    p10_s: float
    p90_s: float
    reps: int
    busy: float = 0.0  # share of the time the runtime's threads waited for a CPU (0..1), see LoadMeter


QUIET = 0.05  # a measurement whose threads waited for a CPU less than this share of the time is "quiet"
TICKS_PER_S = 100.0  # /proc/stat's USER_HZ on Linux

def cpu_threads() -> int:
    """Cores this process may run on (the affinity mask when the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of ``values`` (0 <= q <= 1)."""
    xs = sorted(values)
    if not xs:
        raise ValueError("quantile of no values")
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(times: Sequence[float]) -> Measurement:
    return Measurement(statistics.median(times), quantile(times, 0.1), quantile(times, 0.9), len(times))


def _proc_stat() -> tuple[float, float] | None:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat (None elsewhere)."""
    try:
        with open("/proc/stat", encoding="utf-8") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / tick, sum(fields) / tick


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def _runqueue_wait_s() -> float | None:
    """Seconds this process's threads have spent runnable but waiting for a CPU (Linux schedstat)."""
    total = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    found = False
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[1])
            found = True
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9 if found else None


class LoadMeter:
    """Context manager: how much other processes got in the way while it was open.

    ``busy`` (0..1) is the time this process's threads waited for a CPU, over the CPU time the
    machine had (wall x cores), from ``/proc/self/task/*/schedstat`` (nanosecond accounting); over
    windows long enough for ``/proc/stat``'s 10 ms ticks (>= 40 of them), at least the share of CPU
    time other processes used (a neighbour on a core the runtime left idle still takes cache and
    memory bandwidth). Without schedstat, that share alone. ``others`` is that share in any case.
    """

    def __init__(self) -> None:
        self.busy = self.others = 0.0
        self._stat: tuple[float, float] | None = None
        self._own = 0.0
        self._wait: float | None = None
        self._t0 = 0.0

    def __enter__(self) -> LoadMeter:
        self._stat, self._own, self._wait = _proc_stat(), _own_cpu_s(), _runqueue_wait_s()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._t0
        end, wait = _proc_stat(), _runqueue_wait_s()
        if self._stat is not None and end is not None and end[1] > self._stat[1]:
            others = (end[0] - self._stat[0]) - (_own_cpu_s() - self._own)
            self.others = min(1.0, max(0.0, others / (end[1] - self._stat[1])))
        if self._wait is not None and wait is not None and wall > 0:
            self.busy = min(1.0, max(0.0, (wait - self._wait) / (wall * cpu_threads())))
            ticks = (end[1] - self._stat[1]) * TICKS_PER_S if self._stat is not None and end is not None else 0.0
            if ticks >= 40:  # long enough for /proc/stat's ticks to resolve a few percent
                self.busy = max(self.busy, self.others)  # also a neighbour on an idle core (caches, memory)
        else:
            self.busy = self.others


def _better(a: Measurement, b: Measurement | None) -> bool:
    """Is ``a`` a better figure than ``b``: quiet beats busy; then the faster, or the quieter."""
    if b is None:
        return True
    qa, qb = a.busy <= QUIET, b.busy <= QUIET
    if qa != qb:
        return qa
    return a.median_s < b.median_s if qa else a.busy < b.busy


def measure_quiet(fn: Callable[[], object], *, warmup: int = 3, reps: int = 20, max_wait_s: float = 0.0,
                  clock: Callable[[Callable[[], object]], float] | None = None) -> Measurement:
    """Time bursts of ``reps`` runs until one is quiet or ``max_wait_s`` has passed; the best burst."""
    deadline = time.perf_counter() + max_wait_s
    best: Measurement | None = None
    for _ in range(max(0, warmup)):
        fn()
    while True:
        with LoadMeter() as load:
            times = time_calls(fn, warmup=0, reps=reps, clock=clock)
        m = summarize(times)._replace(busy=load.busy)
        best = m if best is None or _better(m, best) else best
        if m.busy <= QUIET or time.perf_counter() >= deadline:
            return best


def time_calls(fn: Callable[[], object], *, warmup: int, reps: int,
               clock: Callable[[Callable[[], object]], float] | None = None) -> list[float]:
    """Wall time of each of ``reps`` calls of ``fn`` after ``warmup`` untimed calls."""
    for _ in range(max(0, warmup)):
        fn()
    if clock is not None:
        return [clock(fn) for _ in range(max(1, reps))]
    out = []
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


# --- onnxruntime -------------------------------------------------------------------------------


def ort_providers(device: str) -> list[str]:
    """Execution providers for ``device`` ("cpu" | "cuda"); a clear error when CUDA is not there."""
    if device == "cpu":
        return ["CPUExecutionProvider"]
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise RuntimeError(
            "onnxruntime has no CUDAExecutionProvider here (install onnxruntime-gpu on a CUDA "
            "machine), or use --engine torch with a CUDA build of PyTorch"
        )
    return ["CUDAExecutionProvider", "CPUExecutionProvider"]


def ort_session(model: str | bytes, *, threads: int | None = None, device: str = "cpu") -> Any:
    """An onnxruntime session as ha-bot times it: all graph optimisations, ``threads`` intra-op."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads or cpu_threads()
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    # worker threads stop spinning when run() returns: otherwise an idle session's spinning pool
    # competes with the next session's (timing many sessions in turn would measure that)
    so.add_session_config_entry("session.force_spinning_stop", "1")
    return ort.InferenceSession(model, so, providers=ort_providers(device))


_ORT_DTYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
               "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
               "tensor(bool)": "bool"}


def random_feeds(session: Any, shapes: Sequence[Sequence[int]] = ()) -> dict[str, Any]:
    """Inputs for a session: the given shapes, else the model's own with free dimensions at 1.
    Floats are normal noise; integers (token ids, indices) are zeros, valid for any table."""
    import numpy as np

    rng = np.random.default_rng(0)
    feeds = {}
    for i, inp in enumerate(session.get_inputs()):
        shape = list(shapes[i]) if i < len(shapes) else [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
        dtype = np.dtype(_ORT_DTYPES.get(inp.type, "float32"))
        feeds[inp.name] = rng.standard_normal(shape).astype(dtype) if dtype.kind == "f" else np.zeros(shape, dtype)
    return feeds


def ort_feeds(session: Any, inputs: Sequence[Any] | Mapping[str, Any]) -> dict[str, Any]:
    """Session feeds from positional inputs (numpy arrays or CPU tensors) or a name mapping."""
    import numpy as np

    if isinstance(inputs, Mapping):
        items = dict(inputs)
    else:
        names = [i.name for i in session.get_inputs()]
        if len(names) != len(inputs):
            raise ValueError(f"the model takes {len(names)} inputs ({', '.join(names)}), got {len(inputs)}")
        items = dict(zip(names, inputs, strict=True))
    return {k: np.ascontiguousarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v)
            for k, v in items.items()}


def measure_session(session: Any, feeds: Mapping[str, Any], *, warmup: int = 3, reps: int = 20,
                    max_wait_s: float = 0.0) -> Measurement:
    feeds = dict(feeds)
    return measure_quiet(lambda: session.run(None, feeds), warmup=warmup, reps=reps, max_wait_s=max_wait_s)


def measure_onnx(path: str | bytes, inputs: Sequence[Any] | Mapping[str, Any], *, warmup: int = 3,
                 reps: int = 20, threads: int | None = None, device: str = "cpu",
                 max_wait_s: float = 0.0) -> Measurement:
    """Latency of one onnxruntime ``run`` of the model at ``path`` (or serialized bytes).

    ``max_wait_s`` > 0: on a busy machine, retry bursts for up to that long (:func:`measure_quiet`).
    """
    session = ort_session(path, threads=threads, device=device)
    return measure_session(session, ort_feeds(session, inputs), warmup=warmup, reps=reps, max_wait_s=max_wait_s)


# --- PyTorch -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads or cpu_threads())
    try:
        yield
    finally:
        torch.set_num_threads(before)


def cuda_clock(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes on the current CUDA stream (events; synchronised)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / 1e3


def measure_torch(model: Any, inputs: Sequence[Any], *, warmup: int = 3, reps: int = 20,
                  threads: int | None = None, max_wait_s: float = 0.0) -> Measurement:
    """Latency of ``model(*inputs)`` in eager PyTorch: eval, inference mode, synchronised on CUDA."""
    import torch

    model.eval()
    on_cuda = any(getattr(t, "is_cuda", False) for t in inputs)
    with _torch_threads(threads), torch.inference_mode():
        return measure_quiet(lambda: model(*inputs), warmup=warmup, reps=reps, max_wait_s=max_wait_s,
                             clock=cuda_clock if on_cuda else None)


def export_onnx(model: Any, inputs: Sequence[Any], path: str, *, opset: int = 17) -> str:
    """Export ``model(*inputs)`` to ONNX at ``path`` with the TorchScript exporter (``dynamo=False``).

    PyTorch's fused transformer fast path is switched off while exporting so that attention exports
    as the plain ops ha-bot counts. Returns ``path``.
    """
    import inspect

    import torch

    model.eval()
    kwargs: dict[str, Any] = {"opset_version": opset, "do_constant_folding": True}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    names = [f"input{i}" for i in range(len(inputs))]
    mha = getattr(torch.backends, "mha", None)
    fast = mha.get_fastpath_enabled() if mha else None
    if mha:
        mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, tuple(inputs), path, input_names=names, **kwargs)
    finally:
        if mha and fast is not None:
            mha.set_fastpath_enabled(fast)
    return path
