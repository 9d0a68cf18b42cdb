"""Calibrate a hardware target on the machine you have: ``ha-bot calibrate --out FILE``.

Micro-benchmarks, one per op class and size, each built as a tiny ONNX graph with ``onnx.helper``
and timed with onnxruntime (``--engine onnxruntime``, the default), or run as the equivalent eager
PyTorch ops (``--engine torch``), on the CPU or a CUDA GPU (``--device cuda``: CUDA events).

What is measured
----------------
- **GEMMs** from tiny to large, as an exported ``nn.Linear`` on ``[1, rows, features]`` runs them
  (MatMul + bias; square, wide, tall and odd-row shapes), **convolutions** (3x3 and 1x1, dense),
  **depthwise** convolutions (3x3, 5x5, 7x7), **grouped** convolutions (reported only: the cost
  model has no class for them), **attention** subgraphs (scale, Q K^T, softmax, x V: the ops
  PyTorch's ONNX exporter emits for ``scaled_dot_product_attention``), **elementwise** adds (up to
  200 MB moved per op: the main-memory bandwidth), **softmax** (the ``reduction`` class; short and
  long rows), **layer norm** (``norm``) and **pooling** (3x3/2 max pool, global average pool), the
  **per-op overhead** (chains of 1 and 256 one-element adds) and whether the runtime **fuses** an
  activation into the conv before it (conv chains with and without ReLUs).
- Each chainable benchmark is a chain of K identical ops (each feeds the next, as in a network)
  timed against a chain of one: the per-op time is ``(t(K) - t(1)) / (K - 1)``, free of the fixed
  cost of a ``run`` call and of what happens only at a chain's ends (layout reorders, the first
  read of the input). Pools, which do not chain, subtract the measured fixed cost of a run.
- Shared machines: runs come in bursts of about 60 ms, and the scheduler's accounting
  (``/proc/self/task/*/schedstat``) tells how long the runtime's threads waited for a CPU that
  another process held. A burst is *quiet* when that is under ``measure.QUIET`` of the time; each
  benchmark keeps the median of its quiet bursts (pools, timed directly, the fastest), and passes
  repeat (the benchmarks with the fewest quiet bursts first) until each has three or the budget is
  spent. The two chains of a benchmark run alternately, and a burst's per-op time is the median of
  the per-pair differences, so that a disturbance hits both chains alike. With one thread per core a
  neighbour that takes a core makes a parallel op several times slower: such a figure would
  describe the neighbour, not the machine. Benchmarks that never got a quiet burst are counted in
  the notes, and a class's curve leaves them out when it has two or more quiet benchmarks.
  onnxruntime sessions stop spinning their threads when a run returns
  (``measure.ort_session``), so that one session's idle pool does not slow the next one down.
- A point of a curve is the compute rate that makes the cost model's roofline reproduce the
  benchmark: ``FLOPs / (per-op time - per-op overhead)`` (the cost model adds
  ``kernel_overhead_us`` to every op itself). For elementwise ops, which the cost model fuses into
  their producer, a benchmark that its bytes already explain at the measured bandwidth is
  memory-bound and its point is the vector rate. Points of one class are grouped by size (factor-4
  bins, geometric means over the shape families) into one curve.

The document written is a custom target (schema: :mod:`ha_bot.targets`): ``peak_tflops.fp32`` is
the best GEMM rate measured (not a datasheet figure), ``mem_bw_gbps`` the bandwidth of the largest
elementwise add, ``efficiency`` the best measured fraction of those per class, and the ``curves``
carry the size dependence that the cost model interpolates log-log.

Carrying calibration to other targets (:func:`derive_for`)
----------------------------------------------------------
A built-in target without measured curves can borrow the *shape* of a calibrated machine's
curves. For each op class the calibrated curve is shifted along the diagonal of its log-log plot
by ``k = ceiling(target) / ceiling(calibrated)``::

    points (f, r)  ->  (k x f, k x r)

``ceiling(calibrated)`` is the fastest rate of the calibrated curve; ``ceiling(target)`` is the
target's own peak (fp32 matrix peak for matmul/conv/dwconv/attention, its vector rate otherwise)
times its own ``efficiency`` for that class, and for the bandwidth-bound classes (elementwise,
reduction, norm, pool) no more than the calibrated ceiling times the ratio of the two machines'
effective bandwidths. So the derived curve tops out where the target's datasheet figures and
efficiency factors say, and an op k times larger on a k times faster machine takes the same time
as the calibrated op did: fixed start-up costs (thread wake-up, tiling remainders, kernel
prologues) keep their duration in seconds rather than shrinking with the peak.

Limits: the size dependence of one runtime on one machine is a stand-in for another's (a GPU's
occupancy cliffs, tensor-core tile sizes and launch behaviour are not a CPU's); the target's own
``kernel_overhead_us`` and ``fuses_elementwise`` are kept; classes the calibration did not measure,
and classes the target already has curves for, are left alone. Treat derived curves as a better
default than a single efficiency factor, not as a measurement: re-calibrate on the target when you
can (``ha-bot calibrate --device cuda`` on a GPU).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import socket
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ha_bot.records import FUSIBLE_CLASSES
from ha_bot.targets import Target

ENGINES = ("onnxruntime", "torch")
DEVICES = ("cpu", "cuda")
CURVE_CLASSES = ("matmul", "conv", "dwconv", "attention", "elementwise", "reduction", "norm", "pool")
MATRIX = frozenset({"matmul", "conv", "dwconv", "attention"})
BANDWIDTH_CLASSES = frozenset({"elementwise", "reduction", "norm", "pool"})
OPSET = 17
OVERHEAD_CHAIN = 256
MIN_CHAIN_S = 2e-3  # a chain should run at least this long so the fixed per-run cost is small
MIN_CHAIN, MAX_CHAIN = 3, 16
BURST_S = 0.06  # one burst of runs (the load is judged per burst)
MAX_REPS = 2000
QUIET_BURSTS = 3  # quiet bursts wanted per benchmark

Progress = Callable[[str], None]


class Bench(NamedTuple):
    """One micro-benchmark: a chain of ``chain`` ops of one kind and shape."""

    op_class: str  # the cost model's op class the result belongs to ("" = reported only)
    kind: str  # matmul | conv | attention | add | softmax | layernorm | maxpool | gap
    dims: tuple[int, ...]
    flops: float  # per op, ha-bot's counting conventions (docs/conventions.md)
    bytes: float  # fp32 bytes one op reads and writes
    chain: int

    @property
    def label(self) -> str:
        return f"{self.kind} {'x'.join(str(d) for d in self.dims)}"


class Result(NamedTuple):
    bench: Bench
    per_op_s: float
    busy: float = 0.0  # share of the time the runtime waited for a CPU during the burst kept


# --- the benchmark list ------------------------------------------------------------------------


def _matmul(m: int, k: int, n: int) -> tuple[str, str, tuple[int, ...], float, float]:
    """A linear layer with bias on [1, m, k]: 2mkn + mn FLOPs (the bias adds one per output)."""
    return "matmul", "matmul", (m, k, n), 2.0 * m * k * n + m * n, 4.0 * (m * k + k * n + n + m * n)


def _conv(c_in: int, c_out: int, h: int, k: int, groups: int = 1) -> tuple[str, str, tuple[int, ...], float, float]:
    macs = c_out * h * h * (c_in // groups) * k * k
    cls = "dwconv" if groups == c_in and groups > 1 else ("conv" if groups == 1 else "")
    nbytes = 4.0 * (c_in * h * h + c_out * h * h + c_out * (c_in // groups) * k * k)
    return cls, "conv", (c_in, c_out, h, k, groups), 2.0 * macs, nbytes


def _attention(heads: int, length: int, dim: int) -> tuple[str, str, tuple[int, ...], float, float]:
    pairs = heads * length * length
    return "attention", "attention", (heads, length, dim), 2.0 * pairs * 2 * dim + 4.0 * pairs, \
        4.0 * (4 * heads * length * dim + 2 * pairs)


def _rows(kind: str, cls: str, rows: int, cols: int, per_elem: float, nbytes_per: float) -> tuple[str, str, tuple[int, ...], float, float]:
    n = rows * cols
    return cls, kind, (rows, cols), per_elem * n, nbytes_per * n


def _transpose(dims: tuple[int, ...]) -> tuple[str, str, tuple[int, ...], float, float]:
    """A copy that permutes two middle axes (what a runtime does for an exported permute)."""
    return "memory", "transpose", dims, 0.0, 2.0 * 4 * math.prod(dims)


def transpose_perm(rank: int) -> list[int]:
    return [0, 2, 1, 3] if rank == 4 else [0, 1, 3, 2, 4, 5]


def _pool(kind: str, c: int, h: int) -> tuple[str, str, tuple[int, ...], float, float]:
    n = c * h * h
    if kind == "maxpool":  # 3x3, stride 2, pad 1: out_elems x 9
        out = c * ((h + 1) // 2) ** 2
        return "pool", kind, (c, h), 9.0 * out, 4.0 * (n + out)
    return "pool", kind, (c, h), float(n), 4.0 * (n + c)


def bench_specs(thin: bool = False) -> list[tuple[str, str, tuple[int, ...], float, float]]:
    """(op class, kind, dims, flops, bytes) of every micro-benchmark, smallest first per class.

    Generic shape families (square and wide GEMMs, a grid of channels x resolution for convs, token
    x width grids for the row ops), not the layers of any particular model. ``thin``: every third
    one of each class (small budgets, tests).
    """
    specs = _all_specs()
    if not thin:
        return specs
    out: list[tuple[str, str, tuple[int, ...], float, float]] = []
    seen: dict[tuple[str, str], int] = {}
    for spec in specs:
        key = (spec[0], spec[1])
        seen[key] = seen.get(key, -1) + 1
        if seen[key] % 3 == 0:
            out.append(spec)
    return out


def _all_specs() -> list[tuple[str, str, tuple[int, ...], float, float]]:
    specs = []
    for n in (16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024):  # square
        specs.append(_matmul(n, n, n))
    for m, k in ((8, 64), (16, 128), (32, 256), (64, 256), (64, 512), (128, 1024), (256, 1024), (256, 2048)):
        specs.append(_matmul(m, k, 2 * k))  # wide: few rows (tokens), many features
    for m, k in ((64, 16), (256, 32), (1024, 32), (1024, 64), (4096, 64), (4096, 128), (16384, 64)):
        specs.append(_matmul(m, k, 4 * k))  # tall: many rows, few features
    for m, k in ((25, 256), (50, 384), (100, 512), (300, 768), (600, 1024)):
        specs.append(_matmul(m, k, 2 * k))  # row counts that are no multiple of a tile
    for c, h in ((16, 14), (16, 56), (32, 28), (32, 112), (64, 14), (64, 56), (128, 28), (256, 14),
                 (512, 7), (128, 56), (256, 28), (512, 14)):
        specs.append(_conv(c, c, h, 3))
    for c, h in ((32, 14), (64, 28), (64, 56), (128, 28), (256, 14), (512, 7), (256, 56), (512, 28), (1024, 14)):
        specs.append(_conv(c, 4 * c, h, 1))
    for c, h, k in ((32, 14, 3), (64, 28, 3), (128, 28, 3), (256, 14, 3), (512, 7, 3), (96, 56, 3),
                    (144, 56, 3), (32, 112, 3), (384, 28, 3), (96, 112, 3),
                    (120, 28, 5), (240, 14, 5), (672, 7, 5), (96, 56, 7), (192, 28, 7), (384, 14, 7)):
        specs.append(_conv(c, c, h, k, groups=c))
    for c, h, g in ((128, 56, 32), (256, 28, 32), (512, 14, 32), (1024, 7, 32)):
        specs.append(_conv(c, c, h, 3, groups=g))
    for heads, length, dim in ((2, 16, 32), (4, 32, 32), (4, 64, 64), (8, 64, 64), (12, 64, 64),
                               (8, 128, 64), (12, 128, 64), (12, 256, 64), (12, 512, 64)):
        specs.append(_attention(heads, length, dim))
    for n in (1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24):
        specs.append(_rows("add", "elementwise", n // 256, 256, 1, 12))
    for rows, cols in ((16, 16), (64, 64), (128, 128), (256, 256), (1024, 256), (1024, 1024), (4096, 512),
                       (64, 32), (512, 32), (4096, 32), (16384, 32), (32, 1000), (256, 1000)):
        specs.append(_rows("softmax", "reduction", rows, cols, 3, 8))
    for rows, cols in ((8, 64), (32, 128), (64, 256), (128, 384), (128, 768), (256, 768), (512, 768), (1024, 1024),
                       (1024, 64), (4096, 96), (16384, 64)):
        specs.append(_rows("layernorm", "norm", rows, cols, 6, 8))
    head_dims: tuple[tuple[int, ...], ...] = ((1, 4, 64, 32), (1, 12, 64, 64), (1, 12, 160, 64), (1, 8, 512, 64),
                                          (1, 56, 56, 96), (1, 28, 28, 384))
    windows: tuple[tuple[int, ...], ...] = ((1, 8, 7, 8, 7, 96), (1, 4, 7, 4, 7, 384), (1, 16, 7, 16, 7, 32))
    for dims in head_dims:
        specs.append(_transpose(dims))  # [0, 2, 1, 3]: attention heads, channels-last and back
    for dims in windows:
        specs.append(_transpose(dims))  # [0, 1, 3, 2, 4, 5]: window partition
    for c, h in ((16, 28), (64, 56), (64, 112), (128, 112)):
        specs.append(_pool("maxpool", c, h))
    for c, h in ((64, 7), (256, 7), (512, 14), (1024, 14), (2048, 7), (256, 56)):
        specs.append(_pool("gap", c, h))
    return specs


def _chainable(kind: str) -> bool:
    # onnxruntime's transpose optimiser merges consecutive Transposes into one: time them alone
    return kind not in ("maxpool", "gap", "transpose")


def plan(specs: Sequence[tuple[str, str, tuple[int, ...], float, float]], rough_flops: float,
         rough_bw: float) -> list[Bench]:
    """Benches with chain lengths so each chain runs for about MIN_CHAIN_S at rough rates (at least
    MIN_CHAIN ops: the per-op time is the difference between a chain of that many and of one)."""
    out = []
    for cls, kind, dims, flops, nbytes in specs:
        guess = max(flops / rough_flops, nbytes / rough_bw) + 2e-6
        chain = max(MIN_CHAIN, min(MAX_CHAIN, math.ceil(MIN_CHAIN_S / guess))) if _chainable(kind) else 1
        out.append(Bench(cls, kind, dims, flops, nbytes, chain))
    return out


# --- ONNX graphs -------------------------------------------------------------------------------


def _rng_array(shape: Sequence[int], scale: float = 1.0) -> Any:
    import numpy as np

    rng = np.random.default_rng(0)
    return (rng.standard_normal(tuple(shape)) * scale).astype(np.float32)


def onnx_chain(bench: Bench) -> tuple[Any, dict[str, Any]]:
    """The ONNX model of a bench's chain and its feeds."""
    from onnx import TensorProto, helper, numpy_helper

    kind, d, k = bench.kind, bench.dims, bench.chain
    nodes: list[Any] = []
    inits: list[Any] = []
    feeds: dict[str, Any] = {}

    def init(name: str, shape: Sequence[int], scale: float) -> str:
        inits.append(numpy_helper.from_array(_rng_array(shape, scale), name))
        return name

    if kind == "matmul":  # nn.Linear on [1, rows, features] as exported: MatMul + bias Add
        m, kk, n = d
        x_shape, prev = [1, m, kk], "x"
        for i in range(k):
            a, b = (kk, n) if i % 2 == 0 else (n, kk)
            nodes.append(helper.make_node("MatMul", [prev, init(f"w{i}", (a, b), a ** -0.5)], [f"m{i}"]))
            nodes.append(helper.make_node("Add", [f"m{i}", init(f"b{i}", (b,), 0.1)], [f"y{i}"]))
            prev = f"y{i}"
        out_shape = [1, m, n if k % 2 else kk]
    elif kind == "conv":
        c_in, c_out, h, ks, g = d
        x_shape, prev = [1, c_in, h, h], "x"
        for i in range(k):
            a, b = (c_in, c_out) if i % 2 == 0 else (c_out, c_in)
            w = init(f"w{i}", (b, a // g, ks, ks), (a // g * ks * ks) ** -0.5)
            nodes.append(helper.make_node("Conv", [prev, w], [f"y{i}"], group=g, kernel_shape=[ks, ks],
                                          pads=[ks // 2] * 4, strides=[1, 1]))
            prev = f"y{i}"
        out_shape = [1, c_out if k % 2 else c_in, h, h]
    elif kind == "attention":
        heads, length, dim = d
        x_shape, prev = [1, heads, length, dim], "x"
        feeds["k"] = _rng_array((1, heads, length, dim))
        feeds["v"] = _rng_array((1, heads, length, dim))
        inits.append(numpy_helper.from_array(_np_scalar(dim ** -0.25), "s"))
        scale = "s"
        nodes.append(helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]))
        nodes.append(helper.make_node("Mul", ["kt", scale], ["kts"]))
        for i in range(k):
            nodes += [
                helper.make_node("Mul", [prev, scale], [f"q{i}"]),
                helper.make_node("MatMul", [f"q{i}", "kts"], [f"a{i}"]),
                helper.make_node("Softmax", [f"a{i}"], [f"p{i}"], axis=-1),
                helper.make_node("MatMul", [f"p{i}", "v"], [f"y{i}"]),
            ]
            prev = f"y{i}"
        out_shape = x_shape
    elif kind in ("add", "softmax", "layernorm"):
        x_shape, prev = list(d), "x"
        if kind == "layernorm":
            init("g", (d[1],), 1.0)
            init("b", (d[1],), 1.0)
        for i in range(k):
            if kind == "add":
                nodes.append(helper.make_node("Add", [prev, "x"], [f"y{i}"]))
            elif kind == "softmax":
                nodes.append(helper.make_node("Softmax", [prev], [f"y{i}"], axis=-1))
            else:
                nodes.append(helper.make_node("LayerNormalization", [prev, "g", "b"], [f"y{i}"], axis=-1))
            prev = f"y{i}"
        out_shape = x_shape
    elif kind == "transpose":
        perm = transpose_perm(len(d))
        x_shape, prev, shape = list(d), "x", list(d)
        for i in range(k):
            nodes.append(helper.make_node("Transpose", [prev], [f"y{i}"], perm=perm))
            shape = [shape[p] for p in perm]
            prev = f"y{i}"
        out_shape = shape
    elif kind == "maxpool":
        c, h = d
        x_shape, prev = [1, c, h, h], "y0"
        nodes.append(helper.make_node("MaxPool", ["x"], ["y0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
        out_shape = [1, c, (h + 1) // 2, (h + 1) // 2]
    elif kind == "gap":
        c, h = d
        x_shape, prev = [1, c, h, h], "y0"
        nodes.append(helper.make_node("GlobalAveragePool", ["x"], ["y0"]))
        out_shape = [1, c, 1, 1]
    else:
        raise ValueError(f"unknown micro-benchmark kind {kind!r}")
    feeds["x"] = _rng_array(x_shape)
    graph_inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(arr.shape)) for name, arr in feeds.items()]
    graph = helper.make_graph(nodes, "ha_bot_calibrate", graph_inputs,
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, out_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = min(model.ir_version, 8)
    return model, feeds


def _np_scalar(x: float) -> Any:
    import numpy as np

    return np.array(x, dtype=np.float32)


def overhead_chain(n: int) -> tuple[Any, dict[str, Any]]:
    """A chain of ``n`` adds on one-element tensors: nothing but per-op dispatch."""
    return onnx_chain(Bench("", "add", (1, 1), 1.0, 12.0, n))


# --- engines -----------------------------------------------------------------------------------


class Engine:
    """Times a bench's chain. ``run(bench)`` returns a zero-argument callable running it once."""

    name = ""

    def __init__(self, device: str) -> None:
        self.device = device

    def prepare(self, bench: Bench) -> Callable[[], object]:
        raise NotImplementedError

    def clock(self) -> Callable[[Callable[[], object]], float] | None:
        return None

    def describe(self) -> str:
        raise NotImplementedError


class OrtEngine(Engine):
    name = "onnxruntime"

    def __init__(self, device: str) -> None:
        super().__init__(device)
        from ha_bot.measure import cpu_threads, ort_providers

        ort_providers(device)  # a clear error now when CUDA is asked for and missing
        self.threads = cpu_threads()

    def prepare(self, bench: Bench) -> Callable[[], object]:
        model, feeds = onnx_chain(bench) if bench.kind else overhead_chain(bench.chain)
        return self.prepare_model(model, feeds)

    def prepare_model(self, model: Any, feeds: dict[str, Any]) -> Callable[[], object]:
        from ha_bot.measure import ort_session

        session = ort_session(model.SerializeToString(), threads=self.threads, device=self.device)
        return lambda: session.run(None, feeds)

    def describe(self) -> str:
        import onnxruntime as ort

        return f"onnxruntime {ort.__version__} ({self.device}, {self.threads} intra-op threads, ORT_ENABLE_ALL)"


class TorchEngine(Engine):
    name = "torch"

    def __init__(self, device: str) -> None:
        super().__init__(device)
        import torch

        from ha_bot.measure import cpu_threads

        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("--device cuda: this PyTorch build sees no CUDA device")
        self.threads = cpu_threads()
        torch.set_num_threads(self.threads)

    def prepare(self, bench: Bench) -> Callable[[], object]:
        import torch

        fn = torch_chain(bench if bench.kind else Bench("", "add", (1, 1), 1.0, 12.0, bench.chain), self.device)

        def run() -> object:
            with torch.inference_mode():
                return fn()

        return run

    def clock(self) -> Callable[[Callable[[], object]], float] | None:
        if self.device != "cuda":
            return None
        from ha_bot.measure import cuda_clock

        return cuda_clock

    def describe(self) -> str:
        import torch

        where = torch.cuda.get_device_name() if self.device == "cuda" else f"cpu, {self.threads} threads"
        return f"PyTorch {torch.__version__} eager ({where})"


def torch_chain(bench: Bench, device: str) -> Callable[[], object]:
    """The eager PyTorch equivalent of :func:`onnx_chain`."""
    import torch
    import torch.nn.functional as F

    dev = torch.device(device)

    def t(shape: Sequence[int], scale: float = 1.0) -> Any:
        return torch.from_numpy(_rng_array(shape, scale)).to(dev)

    kind, d, k = bench.kind, bench.dims, bench.chain
    if kind == "matmul":
        m, kk, n = d
        ws = [t((n, kk) if i % 2 == 0 else (kk, n), (kk if i % 2 == 0 else n) ** -0.5) for i in range(k)]
        bs = [t((n,) if i % 2 == 0 else (kk,), 0.1) for i in range(k)]
        x = t((1, m, kk))

        def run() -> object:
            y = x
            for w, b in zip(ws, bs):
                y = F.linear(y, w, b)
            return y
    elif kind == "conv":
        c_in, c_out, h, ks, g = d
        ws = [t((c_out, c_in // g, ks, ks) if i % 2 == 0 else (c_in, c_out // g, ks, ks), 0.1) for i in range(k)]
        x = t((1, c_in, h, h))

        def run() -> object:
            y = x
            for w in ws:
                y = F.conv2d(y, w, padding=ks // 2, groups=g)
            return y
    elif kind == "attention":
        heads, length, dim = d
        x, kt, v = t((1, heads, length, dim)), t((1, heads, dim, length)), t((1, heads, length, dim))
        s = dim ** -0.5

        def run() -> object:
            y = x
            for _ in range(k):
                y = torch.softmax((y * s) @ kt, dim=-1) @ v
            return y
    elif kind in ("add", "softmax", "layernorm"):
        x = t(d)

        def run() -> object:
            y = x
            for _ in range(k):
                y = y + x if kind == "add" else torch.softmax(y, -1) if kind == "softmax" else F.layer_norm(y, (d[1],))
            return y
    elif kind == "transpose":
        x, perm = t(d), transpose_perm(len(d))

        def run() -> object:
            y = x
            for _ in range(k):
                y = y.permute(perm).contiguous()
            return y
    elif kind == "maxpool":
        x = t((1, d[0], d[1], d[1]))

        def run() -> object:
            return F.max_pool2d(x, 3, 2, 1)
    elif kind == "gap":
        x = t((1, d[0], d[1], d[1]))

        def run() -> object:
            return F.adaptive_avg_pool2d(x, 1)
    else:
        raise ValueError(f"unknown micro-benchmark kind {kind!r}")
    return run


def make_engine(engine: str, device: str) -> Engine:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    return OrtEngine(device) if engine == "onnxruntime" else TorchEngine(device)


# --- timing --------------------------------------------------------------------------------------


class Burst(NamedTuple):
    per_op_s: float  # time of one op of the bench
    busy: float  # share of the time the runtime's threads waited for a CPU (measure.LoadMeter)


class Timer:
    """Runs the benches within a time budget, in passes over bursts of runs.

    A chainable bench's burst times its chain of K ops and a chain of one, back to back: the per-op
    time is their difference over K - 1, free of the fixed cost of a run and of what happens only
    at a chain's ends (layout reorders, the first read of the input). Each bench keeps the fastest
    of its *quiet* bursts (threads waited for a CPU under ``measure.QUIET`` of the time), or its
    least busy one when it never got a quiet one. Later passes visit the benches with the fewest
    quiet bursts first, until each has ``QUIET_BURSTS`` or the budget is spent.
    """

    def __init__(self, engine: Engine, budget_s: float, progress: Progress | None) -> None:
        self.engine, self.budget_s, self.progress = engine, budget_s, progress
        self.start = time.perf_counter()
        self.base_s = 0.0  # fixed cost of one run() call, beyond its ops
        self.overhead_s = 0.0  # per-op dispatch
        self.clock = engine.clock()
        self.burst_s = min(BURST_S, max(0.005, budget_s / 2000))

    def say(self, msg: str) -> None:
        if self.progress:
            self.progress(f"[{time.perf_counter() - self.start:5.1f}s] {msg}")

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.start)

    def _median(self, fn: Callable[[], object], reps: int) -> float:
        from ha_bot.measure import time_calls

        return statistics.median(time_calls(fn, warmup=0, reps=reps, clock=self.clock))

    def pair_burst(self, one: Callable[[], object], many: Callable[[], object], k: int,
                   reps: tuple[int, int]) -> Burst:
        """Per-op time from chains of 1 and ``k`` ops (``k`` == 1: minus the fixed cost of a run)."""
        from ha_bot.measure import LoadMeter

        if k == 1:
            with LoadMeter() as load:
                t1 = self._median(one, reps[0])
            return Burst(max(1e-9, t1 - self.base_s), load.busy)
        from ha_bot.measure import time_calls

        diffs, longs = [], []
        with LoadMeter() as load:  # alternate the two chains so that both see the same conditions
            for _ in range(reps[1]):
                t1 = time_calls(one, warmup=0, reps=1, clock=self.clock)[0]
                tk = time_calls(many, warmup=0, reps=1, clock=self.clock)[0]
                diffs.append((tk - t1) / (k - 1))
                longs.append(tk / k)
        diff, whole = statistics.median(diffs), statistics.median(longs)
        per_op = diff if diff > 0.05 * whole else whole  # noise: the difference is unusable
        return Burst(max(1e-9, per_op), load.busy)

    def quiet_burst(self, fn: Callable[[], object], reps: int, tries: int) -> float:
        """The fastest median of quiet bursts of ``fn`` (up to ``tries``; stops at the second quiet one)."""
        from ha_bot.measure import QUIET, LoadMeter

        bursts = []
        for _ in range(tries):
            with LoadMeter() as load:
                t = self._median(fn, reps)
            bursts.append(Burst(t, load.busy))
            if sum(b.busy <= QUIET for b in bursts) >= 2:
                break
        return _best(bursts).per_op_s

    def measure_overhead(self) -> None:
        short = self.engine.prepare(Bench("", "", (), 0.0, 0.0, 1))
        long = self.engine.prepare(Bench("", "", (), 0.0, 0.0, OVERHEAD_CHAIN))
        short(), long()
        tries = 10 if self.budget_s >= 20 else 2
        t1 = self.quiet_burst(short, 400, tries)
        tn = self.quiet_burst(long, 40, tries)
        self.overhead_s = max(0.0, (tn - t1) / (OVERHEAD_CHAIN - 1))
        self.base_s = max(0.0, t1 - self.overhead_s)
        self.say(f"per-op overhead {self.overhead_s * 1e6:.2f} us, fixed cost per run {self.base_s * 1e6:.1f} us")

    def _prepare(self, b: Bench) -> tuple[Callable[[], object], Callable[[], object], tuple[int, int]]:
        """Runners for a chain of one and of ``b.chain``, and the runs per burst (alone, in pairs)."""
        one = self.engine.prepare(b._replace(chain=1))
        many = self.engine.prepare(b) if b.chain > 1 else one
        took = []
        for fn in (one, many):
            fn()  # first run: allocations, kernel selection
            t0 = time.perf_counter()
            fn()
            took.append(max(time.perf_counter() - t0, 1e-7))
        alone = max(3, min(MAX_REPS, int(self.burst_s / took[0])))
        pairs = max(3, min(MAX_REPS, int(self.burst_s / (took[0] + took[1]))))
        return one, many, (alone, pairs)

    @staticmethod
    def _covered(benches: Sequence[Bench], bursts: dict[int, list[Burst]]) -> bool:
        """Every op class has at least two measured benches (the least a curve should have)."""
        seen: dict[str, int] = {}
        for i, bs in bursts.items():
            if bs:
                seen[benches[i].op_class] = seen.get(benches[i].op_class, 0) + 1
        return all(seen.get(b.op_class, 0) >= min(2, sum(x.op_class == b.op_class for x in benches)) for b in benches)

    def run(self, benches: Sequence[Bench]) -> list[Result]:
        from ha_bot.measure import QUIET

        benches = _round_robin(benches)

        bursts: dict[int, list[Burst]] = {i: [] for i in range(len(benches))}
        ready: dict[int, tuple[Callable[[], object], Callable[[], object], tuple[int, int]]] = {}
        passes = 0
        while True:
            quiet = {i: sum(b.busy <= QUIET for b in bs) for i, bs in bursts.items()}
            todo = sorted(bursts, key=lambda i: (quiet[i], i)) if passes else list(bursts)
            todo = [i for i in todo if quiet[i] < QUIET_BURSTS]
            if not todo or (passes and self.left() <= 0):
                break
            passes += 1
            for n, i in enumerate(todo):
                if self.left() <= 0 and (passes > 1 or self._covered(benches, bursts)):
                    break
                b = benches[i]
                if i not in ready:
                    ready[i] = self._prepare(b)
                one, many, reps = ready[i]
                burst = self.pair_burst(one, many, b.chain, reps)
                bursts[i].append(burst)
                if passes == 1:
                    rate = b.flops / max(burst.per_op_s - self.overhead_s, 1e-9)
                    self.say(f"[{n + 1}/{len(todo)}] {b.op_class or 'grouped conv'} {b.label} (x{b.chain}): "
                             f"{burst.per_op_s * 1e6:.1f} us/op, {rate / 1e9:.2f} GFLOP/s"
                             + (f" (busy machine: waited {burst.busy:.0%})" if burst.busy > QUIET else ""))
            done = sum(1 for bs in bursts.values() if any(x.busy <= QUIET for x in bs))
            self.say(f"pass {passes}: {done}/{len(benches)} benchmarks have a quiet measurement")
        out = []
        for i, bs in bursts.items():
            if bs:
                best = _best(bs, by_median=benches[i].chain > 1)
                out.append(Result(benches[i], best.per_op_s, best.busy))
        return out


def _round_robin(benches: Sequence[Bench]) -> list[Bench]:
    """Benches interleaved across op classes (each class smallest first): a budget that runs out
    part-way through the first pass still leaves every class measured at several sizes."""
    by_class: dict[str, list[Bench]] = {}
    for b in benches:
        by_class.setdefault(b.op_class, []).append(b)
    out = []
    for rank in range(max((len(v) for v in by_class.values()), default=0)):
        out += [v[rank] for v in by_class.values() if rank < len(v)]
    return out


def _best(bursts: Sequence[Burst], by_median: bool = False) -> Burst:
    """The figure of a bench: the fastest quiet burst (load only ever adds time), or with
    ``by_median`` (differences of two chains, whose noise goes both ways) the median quiet burst;
    the least busy burst when none was quiet."""
    from ha_bot.measure import QUIET

    quiet = sorted((b for b in bursts if b.busy <= QUIET), key=lambda b: b.per_op_s)
    if not quiet:
        return min(bursts, key=lambda b: b.busy)
    return quiet[(len(quiet) - 1) // 2] if by_median else quiet[0]


# --- from measurements to a target document ------------------------------------------------------


def curve_points(results: Sequence[Result], overhead_s: float, op_class: str, *,
                 bandwidth: float | None = None, cap: float | None = None) -> list[tuple[float, float]]:
    """(op FLOPs, achieved FLOP/s) of one class: factor-4 size bins, geometric means.

    A point is the compute rate that makes the cost model's roofline reproduce the benchmark:
    ``flops / (per-op time - per-op overhead)``. For fusible classes (elementwise) a benchmark whose
    time its bytes already explain at ``bandwidth`` is memory-bound, not compute-bound: its point is
    ``cap`` (the vector rate), so that the cost model charges such an op its bytes when it runs on
    its own and next to nothing when it is fused into its producer.
    """
    bins: dict[int, list[tuple[float, float]]] = {}
    for r in results:
        if r.bench.op_class != op_class:
            continue
        busy = max(r.per_op_s - overhead_s, 0.25 * r.per_op_s)
        rate = r.bench.flops / busy
        if op_class in FUSIBLE_CLASSES and bandwidth and cap and busy <= r.bench.bytes / bandwidth:
            rate = max(rate, cap)
        bins.setdefault(round(math.log2(r.bench.flops) / 2), []).append((r.bench.flops, rate))
    points = []
    for key in sorted(bins):
        group = bins[key]
        f = math.exp(statistics.fmean(math.log(x) for x, _ in group))
        y = math.exp(statistics.fmean(math.log(v) for _, v in group))
        points.append((f, y))
    return points


def usable(results: Sequence[Result]) -> list[Result]:
    """The results curves are made of: per class, only the quiet ones when it has two or more
    (a figure taken while a neighbour held a core describes the neighbour), else all of them."""
    from ha_bot.measure import QUIET

    out = []
    for c in {r.bench.op_class for r in results}:
        mine = [r for r in results if r.bench.op_class == c]
        quiet = [r for r in mine if r.busy <= QUIET]
        out += quiet if len(quiet) >= 2 else mine
    return out


def _sig(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}")


def _bandwidth(results: Sequence[Result]) -> tuple[float, list[tuple[float, float]]]:
    """Main-memory bandwidth (B/s) from the largest add; and (bytes, B/s) for every add size."""
    adds = sorted((r for r in results if r.bench.kind == "add"), key=lambda r: r.bench.bytes)
    per_size = [(r.bench.bytes, r.bench.bytes / r.per_op_s) for r in adds]
    if not per_size:
        return 10e9, []
    return per_size[-1][1], per_size


def _mem_gb(device: str = "cpu") -> float | None:
    if device == "cuda":
        try:
            import torch

            return float(torch.cuda.get_device_properties(0).total_memory) / 1e9
        except Exception:
            return None
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def _device_name(engine: Engine) -> str:
    if engine.device == "cuda":
        try:
            import torch

            return str(torch.cuda.get_device_name())
        except Exception:
            return "CUDA GPU"
    from ha_bot.measure import cpu_threads

    return f"{cpu_model()}, {cpu_threads()} cores"


def _fusion_check(engine: Engine, timer: Timer) -> tuple[bool, str]:
    """Does the runtime fold an activation into the conv before it? (conv+relu vs conv and relu)."""
    if not isinstance(engine, OrtEngine):
        return False, "eager PyTorch runs every op as its own kernel"
    from onnx import helper

    conv = Bench("conv", "conv", (64, 64, 28, 3, 1), 0.0, 0.0, 4)
    model, feeds = onnx_chain(conv)
    tries = 6 if timer.budget_s >= 20 else 1
    t_conv = timer.quiet_burst(engine.prepare_model(model, feeds), 10, tries)
    nodes = list(model.graph.node)
    fused_nodes = []
    for i, n in enumerate(nodes):
        fused_nodes.append(n)
        out = n.output[0]
        n.output[0] = f"{out}_pre"
        fused_nodes.append(helper.make_node("Relu", [f"{out}_pre"], [out]))
        nodes[i] = n
    del model.graph.node[:]
    model.graph.node.extend(fused_nodes)
    t_both = timer.quiet_burst(engine.prepare_model(model, feeds), 10, tries)
    adds = Bench("elementwise", "add", (64 * 28, 28), 0.0, 0.0, 4)
    t_adds = timer.quiet_burst(engine.prepare(adds), 10, tries)
    t_add = timer.quiet_burst(engine.prepare(adds._replace(chain=1)), 10, tries)
    alone = max((t_adds - t_add) / 3, timer.overhead_s)  # one standalone elementwise op, same size
    extra = max(0.0, t_both - t_conv) / 4
    fuses = extra < 0.5 * alone
    return fuses, (f"a ReLU after a 64x28x28 3x3 conv added {extra * 1e6:.1f} us per op, a standalone "
                   f"elementwise op of that size takes {alone * 1e6:.1f} us: "
                   + ("the runtime folds activations into their producer (FusedConv/FusedGemm), and batch "
                      "norm is folded into the conv weights at export" if fuses else "no fusion seen"))


def build_document(*, name: str, engine: Engine, results: Sequence[Result], overhead_s: float,
                   fuses: tuple[bool, str], busy_note: str, wall_s: float) -> dict[str, Any]:
    """The target document (human units, schema of :mod:`ha_bot.targets`) from the measurements."""
    bw, per_size = _bandwidth(results)
    results = usable(results)
    gemm = curve_points(results, overhead_s, "matmul")
    peak = max((y for _, y in gemm), default=0.0) or max(r.bench.flops / r.per_op_s for r in results)
    vector = peak
    curves = {c: curve_points(results, overhead_s, c, bandwidth=bw, cap=vector) for c in CURVE_CLASSES}
    curves = {c: pts for c, pts in curves.items() if pts}
    best = {c: max(y for _, y in pts) for c, pts in curves.items()}
    bandwidth_curve = [(b, bps) for b, bps in per_size if bps > 0]
    copies: dict[float, list[float]] = {}
    for r in results:
        if r.bench.kind == "transpose" and r.per_op_s > 0:
            copies.setdefault(r.bench.bytes, []).append(r.bench.bytes / r.per_op_s)
    copy_curve = [(b, math.exp(statistics.fmean(math.log(v) for v in vs))) for b, vs in sorted(copies.items())]
    efficiency = {c: _sig(min(1.0, best[c] / (peak if c in MATRIX else vector)), 3) for c in best}
    efficiency["memory"] = 1.0
    grouped = [r for r in results if r.bench.kind == "conv" and r.bench.op_class == ""]
    grouped_note = ""
    if grouped and "conv" in curves:
        from ha_bot.cost import _interp

        dense = tuple(curves["conv"])
        ratios = [(r.bench.flops / max(r.per_op_s - overhead_s, 1e-9)) / _interp(dense, r.bench.flops) for r in grouped]
        grouped_note = (f"grouped 3x3 convolutions (32 groups) ran at {min(ratios):.2f}-{max(ratios):.2f} x the "
                        "dense conv curve at the same FLOPs; the cost model has one conv class, so grouped "
                        "convolutions are estimated at the dense rate")
    half = _half_size(curves.get("matmul", []))
    today = datetime.date.today().isoformat()
    host = socket.gethostname()
    where = _device_name(engine)
    bw_sizes = ", ".join(f"{b / 1e6:.3g} MB: {v / 1e9:.3g} GB/s" for b, v in per_size)
    doc: dict[str, Any] = {
        "id": name,
        "name": f"{where} ({engine.name}, calibrated)",
        "kind": "gpu" if engine.device == "cuda" else "cpu",
        "peak_tflops": {"fp32": _sig(peak / 1e12)},
        "vector_tflops": _sig(vector / 1e12),
        "mem_bw_gbps": _sig(bw / 1e9),
        "mem_gb": _sig(_mem_gb(engine.device) or 0.0, 3) or None,
        "tdp_w": None,
        "kernel_overhead_us": _sig(overhead_s * 1e6, 3),
        # onnxruntime's CPU graph optimisations fold these into Conv/Gemm (FusedConv, FusedGemm) and
        # batch norm into the conv weights; other elementwise ops (GELU, SiLU, adds) run on their own
        "fuses_elementwise": ["relu", "clamp", "sigmoid", "tanh", "leaky_relu", "hardsigmoid", "batch_norm"] if fuses[0] else False,
        # an exported permute/transpose is an ONNX Transpose node: a real copy in onnxruntime
        "copies_views": ["permute", "transpose"] if engine.name == "onnxruntime" else [],
        "efficiency": dict(sorted(efficiency.items())),
        "half_efficiency_gflop": _sig(half / 1e9, 3) if half else None,
        "curves": {**{c: [[_sig(f), _sig(y / 1e9)] for f, y in pts] for c, pts in curves.items()},
                   **({"bandwidth": [[_sig(b), _sig(bps / 1e9)] for b, bps in bandwidth_curve]} if bandwidth_curve else {}),
                   **({"copy": [[_sig(b), _sig(bps / 1e9)] for b, bps in copy_curve]} if copy_curve else {})},
        "sources": {"calibration": [f"ha-bot calibrate on {host} ({where}) {today}: {engine.describe()}"]},
        "notes": (f"Measured by `ha-bot calibrate` in {wall_s:.0f} s: {len(results)} micro-benchmarks. "
                  "Peaks and bandwidth are what this machine achieved, not datasheet figures." + busy_note),
        "assumptions": [
            "peak_tflops.fp32 is the best GEMM rate measured (fp32, all cores), not a datasheet peak; "
            "matmul efficiency is therefore 1 by construction",
            "vector_tflops = the measured GEMM peak: on a CPU matrix and vector work share the SIMD FMA "
            "units; non-matrix classes are described by their own measured curves",
            f"mem_bw_gbps: the largest elementwise add ({per_size[-1][0] / 1e6:.0f} MB moved per op: main memory, "
            f"beyond the caches); smaller working sets run faster from cache, which a single bandwidth "
            f"cannot say, so activation-heavy ops come out pessimistic. All sizes: {bw_sizes}" if per_size else
            "mem_bw_gbps: no add was measured; 10 GB/s assumed",
            "efficiency.memory 1: the bandwidth above is already an achieved figure",
            f"kernel_overhead_us: per-op dispatch of the runtime, from a chain of {OVERHEAD_CHAIN} one-element adds",
            f"fuses_elementwise {'true' if fuses[0] else 'false'}: {fuses[1]}",
            "curves: per-op time = (chain of K identical ops - chain of 1) / (K - 1), minus the per-op "
            "overhead (which the cost model adds back); factor-4 size bins, geometric means over generic "
            "shape families (GEMMs square, wide, tall and with odd row counts; convs 3x3 and 1x1 over a "
            "channels x resolution grid; softmax/layer norm over short and long rows)",
            "curves.elementwise: where an add's time is explained by its bytes at mem_bw_gbps the point is "
            "the vector rate: the op is memory-bound, and fused into a producer it costs next to nothing",
            "reduction = softmax over the last axis (3 FLOPs per element); norm = layer norm (6 per "
            "element); pool = 3x3/2 max pool and global average pool; attention = the exporter's "
            "scale, Q K^T, softmax, x V subgraph",
            "tdp_w null: the power of this machine is not known, so energy is not estimated",
        ] + ([grouped_note] if grouped_note else []),
    }
    if doc["half_efficiency_gflop"] is None:
        del doc["half_efficiency_gflop"]
    if doc["mem_gb"] is None:
        del doc["mem_gb"]
    return doc


def _half_size(points: Sequence[tuple[float, float]]) -> float | None:
    """The op size where a curve first reaches half its best rate (log-interpolated)."""
    if not points:
        return None
    half = max(y for _, y in points) / 2
    prev = None
    for f, y in points:
        if y >= half:
            if prev is None or prev[1] <= 0:
                return f
            (f0, y0) = prev
            t = (math.log(half) - math.log(y0)) / (math.log(y) - math.log(y0)) if y != y0 else 0.0
            return math.exp(math.log(f0) + t * (math.log(f) - math.log(f0)))
        prev = (f, y)
    return points[-1][0]


def calibrate(*, name: str, budget_s: float = 60, progress: Progress | None = None,
              engine: str = "onnxruntime", device: str = "cpu") -> dict[str, Any]:
    """Run the micro-benchmarks on this machine and return a target document (YAML-ready dict)."""
    from ha_bot.measure import QUIET, LoadMeter

    started = time.perf_counter()
    eng = make_engine(engine, device)
    with LoadMeter() as load:
        timer = Timer(eng, budget_s, progress)
        timer.say(f"calibrating {name!r} with {eng.describe()}, budget {budget_s:g} s")
        timer.measure_overhead()
        rough = 1e12 if device == "cuda" else 50e9
        benches = plan(bench_specs(thin=budget_s < 20), rough, 20e9 if device == "cpu" else 500e9)
        fuses = _fusion_check(eng, timer)
        timer.say(f"fusion: {fuses[1]}")
        results = timer.run(benches)
    wall = time.perf_counter() - started
    noisy = [r for r in results if r.busy > QUIET]
    busy_note = ""
    if noisy:
        busy_note = (f" {len(noisy)} of {len(results)} benchmarks never ran while the machine was quiet "
                     f"(other processes used {load.others:.0%} of the CPU over the calibration): their "
                     "figures are pessimistic; re-run on a quieter machine or with a larger --budget.")
    timer.say(f"done in {wall:.1f} s; other processes used {load.others:.0%} of the CPU meanwhile"
              + (f"; {len(noisy)} benchmarks without a quiet measurement" if noisy else ""))
    return build_document(name=name, engine=eng, results=results, overhead_s=timer.overhead_s,
                          fuses=fuses, busy_note=busy_note, wall_s=wall)


# --- carrying calibration to other targets -------------------------------------------------------


def _ceiling(t: Target, op_class: str) -> float:
    peak = t.peak_flops.get("fp32", t.vector_flops) if op_class in MATRIX else t.vector_flops
    return peak * t.efficiency.get(op_class, t.efficiency.get("other", 0.5))


def derive_for(target: Target, calibrated: Target) -> Target:
    """``target`` with curves derived from ``calibrated``'s for every class it has none of.

    See the module docstring: each curve is shifted diagonally in log-log by
    ``k = ceiling(target) / ceiling(calibrated)``.
    """
    curves = dict(target.curves)
    bw_ratio = (target.mem_bw * target.efficiency.get("memory", 0.8)) / \
        (calibrated.mem_bw * calibrated.efficiency.get("memory", 0.8))
    derived = []
    for c, pts in calibrated.curves.items():
        if c in curves or not pts or c in ("bandwidth", "copy"):  # cache sizes are the calibrated machine's own
            continue
        top = max(y for _, y in pts)
        ceiling = _ceiling(target, c)
        if c in BANDWIDTH_CLASSES:
            ceiling = min(ceiling, top * bw_ratio)
        k = ceiling / top
        curves[c] = tuple((f * k, y * k) for f, y in pts)
        derived.append(c)
    if not derived:
        return target
    note = (f"Curves for {', '.join(derived)} derived from the calibration of {calibrated.id} "
            "(ha-bot calibrate), shifted to this target's peaks, efficiencies and bandwidth.")
    sources = dict(target.sources)
    sources["calibration"] = tuple(dict.fromkeys((*sources.get("calibration", ()), *calibrated.sources.get("calibration", ()))))
    return target._replace(curves=curves, notes=(target.notes + "\n\n" + note).strip(), sources=sources)


# --- command line ------------------------------------------------------------------------------


def dump_yaml(doc: dict[str, Any], stream: Any) -> None:
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.default_flow_style = None
    yaml.width = 120
    stream.write("# ha-bot calibrated target (schema: ha_bot/targets.py). Measured, not datasheet figures.\n")
    yaml.dump(doc, stream)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ha_bot.errors import HaBotError
    from ha_bot.targets import parse_target

    name = args.name or ("calibrated_" + "".join(c if c.isalnum() else "_" for c in socket.gethostname()).strip("_"))
    try:
        doc = calibrate(name=name, budget_s=args.budget, engine=args.engine, device=args.device,
                        progress=lambda msg: print(f"ha-bot: {msg}", file=sys.stderr, flush=True))
    except (RuntimeError, ValueError) as e:
        raise HaBotError(str(e)) from None
    parse_target(doc, origin=args.out)  # what we write must load
    with open(args.out, "w", encoding="utf-8") as f:
        dump_yaml(doc, f)
    print(f"ha-bot: wrote {args.out}; use it with --targets-file {args.out} --target {name}", file=sys.stderr)
    return 0


def register(subparsers: Any) -> None:
    """Add ``ha-bot calibrate`` to the CLI's subparsers."""
    c = subparsers.add_parser("calibrate", help="measure this machine and write a calibrated target file")
    c.add_argument("--out", required=True, metavar="FILE", help="YAML file to write the target to")
    c.add_argument("--name", metavar="ID", help="target id (default: calibrated_<hostname>)")
    c.add_argument("--budget", type=float, default=60.0, metavar="SECONDS", help="time budget (default: 60)")
    c.add_argument("--engine", choices=ENGINES, default="onnxruntime", help="runtime to calibrate (default: onnxruntime)")
    c.add_argument("--device", choices=DEVICES, default="cpu", help="cpu, or cuda (a CUDA GPU)")
    c.set_defaults(func=cmd_calibrate)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ha_bot.calibrate --out FILE ...``: the same as ``ha-bot calibrate``."""
    parser = argparse.ArgumentParser(prog="python -m ha_bot.calibrate")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["calibrate", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args))
    except Exception as e:  # HaBotError and friends: one line, like the CLI
        print(f"ha-bot: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
