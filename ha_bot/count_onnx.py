"""Count an ONNX model: one :class:`OpRecord` per graph node, with the torch engine's conventions.

No model code runs: the file is parsed with ``onnx.load`` (external weight files are never read,
only the tensors' declared shapes are needed), checked with ``onnx.checker``, its free dimensions
are pinned (``input_shapes``, else 1) and shapes are inferred with ``onnx.shape_inference``; where
its data propagation stops (integer ``Div`` in shape arithmetic), small shape tensors are folded
with numpy and inference runs again. Large initializers are handed to the checker and to shape inference as typed graph inputs, so
their bytes are never copied and models above protobuf's 2 GiB limit still work.

Each ``op_type`` has a small rule (``_RULES``) giving its class, MACs and FLOPs, and how it reads
its data input; bytes follow generically from the inferred shapes. ONNX-specific choices, beyond
docs/conventions.md:

- ``Transpose``, ``Slice``, ``Concat``, ``Split``, ``Pad``, ``Expand``, ``Tile``, ``Gather`` on
  activations, ... are real copies in ONNX runtimes: class "memory" (bytes, no FLOPs). ``Slice`` and
  the gathers read only what they write. ``Reshape``/``Flatten``/``Squeeze``/``Unsqueeze``/
  ``Identity``/``Dropout``/``Constant`` are views: no bytes, their output aliases the input storage.
- ``Gather`` from an initializer is an embedding lookup: it reads the gathered rows, not the table.
- ``Shape``/``Size`` read only metadata (class "other"); fills (``ConstantOfShape``, ``Range``) write.
- ``Resize``/``GridSample``: nearest 0, linear 2^d, cubic 4^d FLOPs per output element (d = resized
  axes); ``RNN``/``GRU``/``LSTM``: the gate matmuls are MACs, plus 3 FLOPs per gate element.
- Parameters are unique float initializers by name. An ``Identity`` of an initializer is counted as
  a parameter of its own: the TorchScript exporter merges equal-valued weights that way.
  ``BatchNormalization`` mean/var, single-element float constants (folded Python scalars),
  control inputs (``Resize`` scales, ``Clip`` bounds, ...) and ``Constant`` nodes are buffers.
- Ops without a rule (custom domains, control flow) get ``supported=False``, class "other", and
  bytes for every tensor they read and write.
"""

from __future__ import annotations

import ast
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import onnx
import onnx.inliner
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper, shape_inference

from ha_bot.errors import ModelError
from ha_bot.records import ModelCount, OpRecord

log = logging.getLogger(__name__)

Shape = tuple[int, ...]

_FLOAT_TYPES = frozenset(
    getattr(TensorProto, n)
    for n in (
        "FLOAT", "FLOAT16", "BFLOAT16", "DOUBLE", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
        "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "FLOAT4E2M1",
    )
    if hasattr(TensorProto, n)
)
# Initializers at or below this many elements keep their values for shape inference (shape
# tensors, scales); larger ones become typed graph inputs.
_KEEP_VALUES = 4096


def _itemsize(elem_type: int) -> int:
    try:
        return max(1, int(helper.tensor_dtype_to_np_dtype(elem_type).itemsize))
    except Exception:  # STRING, UNDEFINED: no fixed size
        return 1


def _numel(shape: Shape | None) -> int:
    return math.prod(shape) if shape else (0 if shape is None else 1)


class _Work(NamedTuple):
    """A rule's verdict for one node."""

    op_class: str
    macs: int = 0
    flops: int = 0
    reads: str = "all"  # "all": every input; "out": input 0 read as much as output 0; "none": metadata only


class _Node:
    """One node with its tensors' inferred shapes, as the rules see it."""

    __slots__ = ("attrs", "const", "ins", "outs", "proto")

    def __init__(self, proto: onnx.NodeProto, ins: list[Shape | None], outs: list[Shape | None],
                 const: list[bool]) -> None:
        self.proto, self.ins, self.outs, self.const = proto, ins, outs, const
        self.attrs = {a.name: a for a in proto.attribute}

    def attr(self, name: str, default: Any = None) -> Any:
        a = self.attrs.get(name)
        if a is None:
            return default
        value = helper.get_attribute_value(a)
        return value.decode() if isinstance(value, bytes) else value

    def has(self, i: int) -> bool:
        return i < len(self.ins) and self.ins[i] is not None

    def numel_in(self, i: int) -> int:
        return _numel(self.ins[i]) if self.has(i) else 0

    @property
    def out(self) -> int:
        return _numel(self.outs[0]) if self.outs else 0


Rule = Callable[[_Node], _Work]


# ---- rules ------------------------------------------------------------------------------------

def _conv(w: int = 1, b: int | None = 2) -> Rule:
    def rule(n: _Node) -> _Work:
        wshape = n.ins[w] or ()
        macs = n.out * math.prod(wshape[1:])  # out_elems x C_in/g x prod(kernel)
        g, c_in = int(n.attr("group", 1)), (n.ins[0] or (0, 0))[1]
        cls = "dwconv" if g > 1 and g == c_in else "conv"
        return _Work(cls, macs, 2 * macs + (n.out if b is not None and n.has(b) else 0))
    return rule


def _conv_transpose(n: _Node) -> _Work:
    macs = n.numel_in(0) * math.prod((n.ins[1] or ())[1:])  # in_elems x C_out/g x prod(kernel)
    return _Work("conv", macs, 2 * macs + (n.out if n.has(2) else 0))


def _gemm(n: _Node) -> _Work:
    a = n.ins[0] or (1, 1)
    macs = n.out * (a[0] if n.attr("transA", 0) else a[1])
    flops = 2 * macs
    if n.has(2):
        flops += n.out
    if n.attr("alpha", 1.0) != 1.0 or (n.has(2) and n.attr("beta", 1.0) != 1.0):
        flops += n.out
    return _Work("matmul", macs, flops)


def _matmul(n: _Node) -> _Work:
    macs = n.out * (n.ins[0] or (1,))[-1]  # batch x M x N x K, broadcasting and 1-D included
    return _Work("matmul", macs, 2 * macs)


def _einsum(n: _Node) -> _Work:
    eq = str(n.attr("equation", "")).replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    shapes = [s or () for s in n.ins]
    if len(terms) != len(shapes):
        return _Work("matmul")
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes, strict=True):
        if "..." in term:  # broadcast dims: digits, aligned from the right
            k = len(shape) - (len(term) - 3)
            term = term.replace("...", "".join(str(9 - i) for i in reversed(range(k))))
        for ch, dim in zip(term, shape, strict=False):
            sizes[ch] = max(sizes.get(ch, 1), dim)
    total = math.prod(sizes.values())
    if len(shapes) == 1:  # transpose/diagonal (a copy) or a reduction
        summed = "->" in eq and len(set(rhs.replace("...", ""))) < len(set(terms[0].replace("...", "")))
        return _Work("reduction", 0, n.numel_in(0)) if summed else _Work("memory")
    if len(shapes) > 2:  # best effort: numpy's optimal pairwise contraction order
        views = [np.lib.stride_tricks.as_strided(np.zeros(1), s, [0] * len(s)) for s in shapes]
        path = np.einsum_path(eq, *views, optimize="optimal")[1]
        total = int(float(path.split("Optimized FLOP count:")[1].split()[0]) / 2)
    return _Work("matmul", total, 2 * total)


def _attention(n: _Node) -> _Work:
    q, k, v = (n.ins[i] or (1, 1, 1) for i in range(3))
    if len(q) == 4:
        b, h, lq, e = q
        lk, ev = k[-2], v[-1]
    else:
        h = int(n.attr("q_num_heads", 1))
        b, lq, e = q[0], q[1], q[2] // h
        lk, ev = k[1], v[2] // int(n.attr("kv_num_heads", 1))
    if n.has(4):
        lk += (n.ins[4] or (0, 0))[-2]
    pairs = lq * lk
    if n.attr("is_causal", 0):
        pairs = int(np.clip(np.arange(lq) + 1 + lk - lq, 0, lk).sum())
    macs = b * h * pairs * (e + ev)
    return _Work("attention", macs, 2 * macs + 4 * b * h * pairs)


def _rnn(n: _Node) -> _Work:
    x, w, r = (n.ins[i] or (1, 1, 1) for i in range(3))  # W: [dirs, gates x hidden, input]
    steps = x[0] * x[1]  # seq x batch (either layout)
    macs = steps * (math.prod(w) + math.prod(r))
    return _Work("matmul", macs, 2 * macs + 3 * steps * w[0] * w[1])


def _per_out(op_class: str, per: int = 1) -> Rule:
    return lambda n: _Work(op_class, 0, per * n.out)


def _per_in(op_class: str) -> Rule:
    return lambda n: _Work(op_class, 0, n.numel_in(0))


def _variadic(n: _Node) -> _Work:
    return _Work("elementwise", 0, max(1, sum(map(n.has, range(len(n.ins)))) - 1) * n.out)


def _norm(*affine: int) -> Rule:
    return lambda n: _Work("norm", 0, (4 + sum(map(n.has, affine))) * n.out)


def _pool(n: _Node) -> _Work:
    return _Work("pool", 0, n.out * math.prod(n.attr("kernel_shape", [1])))


def _interpolate(n: _Node) -> _Work:
    mode = str(n.attr("mode", "nearest"))
    axes = n.attr("axes")
    d = len(axes) if axes else max(len(n.outs[0] or ()) - 2, 1)
    per = 0 if "nearest" in mode else (4 if "cubic" in mode else 2) ** d
    return _Work("pool", 0, per * n.out)


def _gather(n: _Node) -> _Work:
    return _Work("embedding" if n.const[0] else "memory", reads="out")


_VIEW = _Work("view")
_RULES: dict[str, Rule] = {
    "Conv": _conv(), "ConvInteger": _conv(b=None), "QLinearConv": _conv(w=3, b=8),
    "ConvTranspose": _conv_transpose,
    "Gemm": _gemm, "MatMul": _matmul, "MatMulInteger": _matmul, "QLinearMatMul": _matmul,
    "Einsum": _einsum, "Attention": _attention,
    "RNN": _rnn, "GRU": _rnn, "LSTM": _rnn,
    "Softmax": _per_out("reduction", 3), "LogSoftmax": _per_out("reduction", 3),
    "BatchNormalization": _per_out("norm", 2),
    "LayerNormalization": _norm(1, 2), "GroupNormalization": _norm(1, 2),
    "InstanceNormalization": _norm(1, 2), "RMSNormalization": _norm(1),
    "MeanVarianceNormalization": _norm(),
    "MaxPool": _pool, "AveragePool": _pool, "LpPool": _pool,
    "Resize": _interpolate, "Upsample": _interpolate, "GridSample": _interpolate,
    "Gather": _gather,
    "GatherElements": lambda n: _Work("memory", reads="out"),
    "GatherND": lambda n: _Work("memory", reads="out"),
    "Slice": lambda n: _Work("memory", reads="out"),
    "Shape": lambda n: _Work("other", reads="none"), "Size": lambda n: _Work("other", reads="none"),
    "Sum": _variadic, "Max": _variadic, "Min": _variadic, "Mean": _variadic,
}
_RULES.update(dict.fromkeys((
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Neg", "Abs", "Reciprocal", "Sqrt", "Exp", "Log",
    "Erf", "Tanh", "Sigmoid", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Gelu",
    "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Mish", "ThresholdedRelu", "Shrink", "Clip",
    "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
    "Ceil", "Floor", "Round", "Sign", "Where", "Equal", "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN", "IsInf", "BitShift", "BitwiseAnd",
    "BitwiseOr", "BitwiseXor", "BitwiseNot", "Cast", "CastLike", "QuantizeLinear",
    "DequantizeLinear", "DynamicQuantizeLinear", "Trilu",
), _per_out("elementwise")))
_RULES.update(dict.fromkeys((
    "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "TopK", "CumSum",
    "Hardmax",
), _per_in("reduction")))
_RULES.update(dict.fromkeys(
    ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"), _per_in("pool")))
_RULES.update(dict.fromkeys((
    "Concat", "Split", "Pad", "Expand", "Tile", "Transpose", "ScatterND", "ScatterElements",
    "DepthToSpace", "SpaceToDepth", "ReverseSequence", "Compress", "NonZero", "OneHot", "Unique",
    "CenterCropPad", "ConstantOfShape", "Range", "EyeLike",
), lambda n: _Work("memory")))
_RULES.update(dict.fromkeys(
    ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Constant"),
    lambda n: _VIEW))

# Float initializers read at these input slots are constants or statistics, not parameters.
_BUFFER_SLOTS = {
    "BatchNormalization": (3, 4), "Resize": (1, 2), "Upsample": (1,), "Clip": (1, 2),
    "Pad": (2,), "Dropout": (1,), "OneHot": (2,), "Range": (0, 1, 2),
}
_BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")


# ---- loading ----------------------------------------------------------------------------------

def _load(path: str) -> onnx.ModelProto:
    try:
        model = onnx.load(path, load_external_data=False)
    except FileNotFoundError as e:
        raise ModelError(f"{path}: no such ONNX file") from e
    except (DecodeError, OSError, ValueError, RuntimeError) as e:
        raise ModelError(f"{path}: not a readable ONNX model ({type(e).__name__}: {e})") from e
    if not model.graph.node:
        raise ModelError(f"{path}: not a readable ONNX model (no graph nodes; empty or truncated file?)")
    return model


def _skeleton(model: onnx.ModelProto, weights: Mapping[str, TensorProto]) -> onnx.ModelProto:
    """The model without large initializer payloads: those become typed graph inputs."""
    g = model.graph
    inputs = {i.name for i in g.input}
    skel = onnx.ModelProto()
    for field in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        setattr(skel, field, getattr(model, field))
    skel.opset_import.extend(model.opset_import)
    skel.functions.extend(model.functions)
    sg = skel.graph
    sg.name = g.name
    sg.node.extend(g.node)
    sg.input.extend(g.input)
    for t in weights.values():
        small = math.prod(t.dims) <= _KEEP_VALUES and t.data_location != TensorProto.EXTERNAL
        if small:
            sg.initializer.append(t)
        elif t.name not in inputs:
            sg.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    sg.sparse_initializer.extend(g.sparse_initializer)
    # Declared shapes were written for the export-time inputs: re-infer them all, except the
    # outputs of ops without a schema (custom domains), whose shapes only the file knows. Graph
    # outputs are left out (inference reports them as value_info), so the checker cannot reject
    # an output that declares no shape.
    no_schema = {o for n in g.node if not onnx.defs.has(n.op_type, n.domain) for o in n.output}
    sg.value_info.extend(v for v in (*g.value_info, *g.output) if v.name in no_schema)
    return skel


def _pin_inputs(graph: onnx.GraphProto, weights: Mapping[str, TensorProto], path: str,
                input_shapes: Mapping[str, Sequence[int]] | Sequence[Sequence[int]] | None,
                ) -> list[onnx.ValueInfoProto]:
    """Give every real graph input a concrete shape; returns those inputs in order.
    ``input_shapes``: by input name, or a list in the graph's input order (a config's `inputs:`)."""
    real = [i for i in graph.input if i.name not in weights]
    if input_shapes is not None and not isinstance(input_shapes, Mapping):
        if len(input_shapes) > len(real):
            raise ModelError(f"{path}: {len(input_shapes)} input shapes given, the model takes {len(real)} "
                             f"({', '.join(i.name for i in real)})")
        input_shapes = {i.name: shape for i, shape in zip(real, input_shapes)}
    given = dict(input_shapes or {})
    unknown = sorted(set(given) - {i.name for i in real})
    if unknown:
        names = ", ".join(i.name for i in real)
        raise ModelError(f"{path}: input_shapes names unknown input(s) {unknown}; the inputs are: {names}")
    defaulted: list[tuple[str, int, str]] = []
    for inp in real:
        if not inp.type.HasField("tensor_type"):
            raise ModelError(f"{path}: input '{inp.name}' is not a tensor; only tensor inputs are supported")
        tt = inp.type.tensor_type
        if inp.name in given:
            dims = [int(d) for d in given[inp.name]]
            if tt.HasField("shape") and len(tt.shape.dim) != len(dims):
                raise ModelError(f"{path}: input '{inp.name}' has rank {len(tt.shape.dim)}, "
                                 f"input_shapes gives {dims}")
        elif not tt.HasField("shape"):
            raise ModelError(f"{path}: input '{inp.name}' declares no shape; pass input_shapes")
        else:
            dims = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
            defaulted += [(inp.name, k, d.dim_param or "?") for k, d in enumerate(tt.shape.dim)
                          if not d.HasField("dim_value")]
        tt.ClearField("shape")
        tt.shape.SetInParent()
        for d in dims:
            tt.shape.dim.add().dim_value = d
    if defaulted:  # a free batch dim is expected; a free sequence length deserves a warning
        level = logging.WARNING if any(k > 0 for _, k, _ in defaulted) else logging.INFO
        log.log(level, "%s: free input dimensions set to 1 (pass input_shapes to choose): %s",
                path, ", ".join(f"{name}[{k}]={p}" for name, k, p in defaulted))
    return real


def _infer(model: onnx.ModelProto, path: str) -> dict[str, tuple[Shape | None, int]]:
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as e:
        raise ModelError(f"{path}: shape inference failed: {str(e).strip().splitlines()[0]}") from e
    g = inferred.graph
    info: dict[str, tuple[Shape | None, int]] = {}
    for v in (*g.input, *g.value_info, *g.output):
        tt = v.type.tensor_type
        dims = tt.shape.dim if tt.HasField("shape") else None
        ok = dims is not None and all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims)
        info[v.name] = (tuple(d.dim_value for d in dims) if ok and dims is not None else None,
                        tt.elem_type)
    for t in g.initializer:
        info[t.name] = (tuple(t.dims), t.data_type)
    return info


def _shapes(model: onnx.ModelProto, path: str) -> dict[str, tuple[Shape | None, int]]:
    """Inferred (shape, elem_type) per tensor name; ``model`` is a skeleton and gets modified.

    ONNX's data propagation stops at some shape arithmetic (``Div``, which the TorchScript exporter
    emits for ``d // heads``). When shapes stay unknown, the small tensors that became computable
    are folded here with numpy, pinned as initializers, and inference runs again.
    """
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError, RuntimeError) as e:
        raise ModelError(f"{path}: invalid ONNX model: {str(e).strip().splitlines()[0]}") from e
    nodes = list(model.graph.node)
    values: dict[str, np.ndarray] | None = None
    while True:
        info = _infer(model, path)
        if all(info.get(o, (None,))[0] is not None for n in nodes for o in n.output if o):
            return info
        if values is None:
            values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        folded = _fold(nodes, info, values)
        if not folded:
            return info
        g = model.graph
        kept = [n for n in g.node if not all(o in values for o in n.output if o)]
        del g.node[:]
        g.node.extend(kept)
        g.initializer.extend(numpy_helper.from_array(values[name], name) for name in folded)


def _fold(nodes: Sequence[onnx.NodeProto], info: Mapping[str, tuple[Shape | None, int]],
          values: dict[str, np.ndarray]) -> list[str]:
    """Compute the small tensors whose inputs are now known; returns the new names."""
    new: list[str] = []
    for node in nodes:
        fn = _FOLD.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if fn is None or len(node.output) != 1 or node.output[0] in values:
            continue
        if node.op_type in ("Shape", "Size"):
            shape = info.get(node.input[0], (None,))[0]
            if shape is None:
                continue
            args: list[Any] = [shape]
        elif all(x in values for x in node.input if x):
            args = [values[x] if x else None for x in node.input]
        else:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        try:
            result = np.asarray(fn(attrs, *args))
        except Exception:  # a value we cannot compute stays unknown
            continue
        if result.size <= _KEEP_VALUES:
            values[node.output[0]] = result
            new.append(node.output[0])
    return new


def _constant(attrs: dict[str, Any]) -> np.ndarray:
    if "value" in attrs:
        return numpy_helper.to_array(attrs["value"])
    for key, dtype in (("value_int", np.int64), ("value_ints", np.int64),
                       ("value_float", np.float32), ("value_floats", np.float32)):
        if key in attrs:
            return np.array(attrs[key], dtype)
    raise ValueError("unsupported Constant")


def _div(attrs: dict[str, Any], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):  # ONNX integer division truncates toward zero
        return (np.abs(a) // np.abs(b)) * np.sign(a) * np.sign(b)
    return a / b


def _axes(attrs: dict[str, Any], given: np.ndarray | None) -> list[int] | None:
    axes = given if given is not None else attrs.get("axes")
    return None if axes is None else [int(x) for x in np.ravel(axes)]


def _unsqueeze(attrs: dict[str, Any], a: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    ax = _axes(attrs, axes) or []
    rank = a.ndim + len(ax)
    for k in sorted(x % rank for x in ax):
        a = np.expand_dims(a, k)
    return a


def _squeeze(attrs: dict[str, Any], a: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    ax = _axes(attrs, axes)
    return np.squeeze(a) if ax is None else np.squeeze(a, tuple(x % a.ndim for x in ax))


def _slice(attrs: dict[str, Any], a: np.ndarray, starts: Any = None, ends: Any = None,
           axes: Any = None, steps: Any = None) -> np.ndarray:
    starts = attrs["starts"] if starts is None else starts
    ends = attrs["ends"] if ends is None else ends
    axes = attrs.get("axes", range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * a.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps, strict=True):
        index[int(ax)] = slice(int(s), int(e), int(st))
    return a[tuple(index)]


def _reshape(attrs: dict[str, Any], a: np.ndarray, shape: np.ndarray) -> np.ndarray:
    keep = not attrs.get("allowzero", 0)
    return a.reshape([a.shape[i] if d == 0 and keep else int(d) for i, d in enumerate(shape)])


def _constant_of_shape(attrs: dict[str, Any], shape: np.ndarray) -> np.ndarray:
    fill = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
    return np.full([int(x) for x in shape], fill.ravel()[0], fill.dtype)


def _expand(attrs: dict[str, Any], a: np.ndarray, shape: np.ndarray) -> np.ndarray:
    return np.broadcast_to(a, np.broadcast_shapes(a.shape, tuple(int(x) for x in shape))).copy()


_FOLD: dict[str, Callable[..., Any]] = {
    "Constant": _constant,
    "Shape": lambda at, s: np.array(s[at.get("start", 0):at.get("end", len(s))], np.int64),
    "Size": lambda at, s: np.array(math.prod(s), np.int64),
    "Identity": lambda at, a: a,
    "Cast": lambda at, a: a.astype(helper.tensor_dtype_to_np_dtype(at["to"])),
    "CastLike": lambda at, a, b: a.astype(b.dtype),
    "Gather": lambda at, a, i: np.take(a, i, axis=at.get("axis", 0)),
    "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Slice": _slice, "Reshape": _reshape,
    "Concat": lambda at, *xs: np.concatenate(xs, axis=at["axis"]),
    "Add": lambda at, a, b: a + b, "Sub": lambda at, a, b: a - b, "Mul": lambda at, a, b: a * b,
    "Div": _div, "Neg": lambda at, a: -a, "Abs": lambda at, a: np.abs(a),
    "Floor": lambda at, a: np.floor(a), "Ceil": lambda at, a: np.ceil(a),
    "Sqrt": lambda at, a: np.sqrt(a),
    "Max": lambda at, *xs: np.maximum.reduce(np.broadcast_arrays(*xs)),
    "Min": lambda at, *xs: np.minimum.reduce(np.broadcast_arrays(*xs)),
    "Equal": lambda at, a, b: a == b, "Less": lambda at, a, b: a < b,
    "Greater": lambda at, a, b: a > b, "Not": lambda at, a: ~a,
    "Where": lambda at, c, a, b: np.where(c, a, b),
    "Range": lambda at, start, limit, delta: np.arange(start, limit, delta, dtype=start.dtype),
    "ConstantOfShape": _constant_of_shape, "Expand": _expand,
}


# ---- scopes -----------------------------------------------------------------------------------

def _scope(node: onnx.NodeProto) -> str:
    """Module path: dynamo exports carry name scopes; TorchScript ones encode it in the node name."""
    for p in node.metadata_props:
        if p.key == "pkg.torch.onnx.name_scopes" and len(p.value) < 4096:
            try:
                scopes = ast.literal_eval(p.value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                break
            if isinstance(scopes, list) and len(scopes) >= 2:
                return str(scopes[-2])
            return ""
    parts: list[str] = []  # "/layer1/layer1.0/conv1/Conv" -> layer1.0.conv1
    for seg in node.name.split("/")[1:-1]:
        if parts and seg.startswith(parts[-1] + "."):
            parts[-1] = seg
        elif seg:
            parts.append(seg)
    return ".".join(parts)


# ---- counting ---------------------------------------------------------------------------------

class _Tensors:
    """Names -> storage ids. Activations get storage; views alias it; weights/constants get none."""

    def __init__(self, info: Mapping[str, tuple[Shape | None, int]], const: set[str]) -> None:
        self.info, self.const = info, const
        self.ids: dict[str, int] = {}
        self.sizes: dict[int, int] = {}  # storage id -> float elements, or bytes if not float
        self.floats: set[int] = set()

    def new(self, name: str) -> int:
        shape, et = self.info[name]
        sid = self.ids[name] = len(self.sizes)
        if et in _FLOAT_TYPES:
            self.sizes[sid] = _numel(shape)
            self.floats.add(sid)
        else:
            self.sizes[sid] = _numel(shape) * _itemsize(et)
        return sid


def _record(node: onnx.NodeProto, label: str, work: _Work, supported: bool, n: _Node,
            t: _Tensors) -> OpRecord:
    """Bytes of one non-view node: float activations/weights read, float written, other bytes."""
    act_in = w_in = out = fixed = 0
    ins: list[int] = []
    for k, name in enumerate(node.input):
        if not name or work.reads == "none" or name in node.input[:k]:
            continue
        shape, et = t.info[name]
        elems = n.out if (work.reads == "out" and k == 0) else _numel(shape)
        if et not in _FLOAT_TYPES:
            fixed += elems * _itemsize(et)
        elif name in t.const:
            w_in += elems
        else:
            act_in += elems
        if name in t.ids:
            ins.append(t.ids[name])
    outs: list[int] = []
    for name in filter(None, node.output):
        shape, et = t.info[name]
        if et in _FLOAT_TYPES:
            out += _numel(shape)
        else:
            fixed += _numel(shape) * _itemsize(et)
        outs.append(t.new(name))
    return OpRecord(f"onnx::{label}", _scope(node), work.op_class, work.macs, work.flops, act_in,
                    w_in, out, fixed, supported, tuple(dict.fromkeys(ins)), tuple(outs))


def _weight_totals(graph: onnx.GraphProto, weights: Mapping[str, TensorProto],
                   aliases: Sequence[str], info: Mapping[str, tuple[Shape | None, int]],
                   ) -> tuple[int, int, int]:
    """(params, buffers, weight_fixed_bytes) over unique initializers and merged-weight aliases."""
    buffers_at = {name for n in graph.node for i, name in enumerate(n.input)
                  if i in _BUFFER_SLOTS.get(n.op_type, ())}
    constants = [o for n in graph.node if n.op_type == "Constant" for o in n.output]
    params = buffers = fixed = 0
    for name in (*weights, *aliases, *constants):
        t = weights.get(name)
        shape, et = (tuple(t.dims), t.data_type) if t is not None else info[name]
        size = _numel(shape)
        if et not in _FLOAT_TYPES:
            fixed += size * _itemsize(et)
        elif name in buffers_at or name in constants or name.endswith(_BUFFER_SUFFIXES) or size <= 1:
            buffers += size
        else:
            params += size
    return params, buffers, fixed


def count_onnx(path: str | os.PathLike[str], *,
               input_shapes: Mapping[str, Sequence[int]] | Sequence[Sequence[int]] | None = None) -> ModelCount:
    """Count every node of the ONNX model at ``path`` (free input dims: ``input_shapes`` or 1)."""
    path = os.fspath(path)
    model = _load(path)
    if model.functions:
        try:
            model = onnx.inliner.inline_local_functions(model)
        except Exception as e:
            raise ModelError(f"{path}: cannot inline local functions: {e}") from e
    graph = model.graph
    weights = {t.name: t for t in graph.initializer}  # unique by name
    skel = _skeleton(model, weights)
    real_inputs = _pin_inputs(skel.graph, weights, path, input_shapes)
    info = _shapes(skel, path)

    t = _Tensors(info, set(weights))  # const: initializers, Constant outputs, views of those
    for inp in real_inputs:
        t.new(inp.name)
    aliases: list[str] = []  # Identity(initializer): a weight the exporter merged with an equal one
    records: list[OpRecord] = []
    for node in graph.node:
        label = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        for k, name in enumerate((*node.input, *node.output)):
            if name and (name not in info or info[name][0] is None):
                where = "input" if k < len(node.input) else "output"
                raise ModelError(
                    f"{path}: cannot infer the shape of {where} '{name}' of node "
                    f"'{node.name or '(unnamed)'}' ({label}); pass input_shapes or add value_info")
        n = _Node(node, [info[x][0] if x else None for x in node.input],
                  [info[x][0] if x else None for x in node.output],
                  [x in t.const for x in node.input])
        rule = _RULES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        work = rule(n) if rule is not None else _Work("other")
        if work.op_class != "view":
            records.append(_record(node, label, work, rule is not None, n, t))
            continue
        src = node.input[0] if node.input else ""
        for name in filter(None, node.output):
            if node.op_type == "Constant" or src in t.const:
                t.const.add(name)
                if node.op_type == "Identity" and (src in weights or src in aliases):
                    aliases.append(name)
            elif src in t.ids:
                t.ids[name] = t.ids[src]
        records.append(OpRecord(f"onnx::{label}", _scope(node), "view", 0, 0, 0, 0, 0, 0, True,
                                (t.ids[src],) if src in t.ids else ()))

    params, buffers, weight_fixed = _weight_totals(graph, weights, aliases, info)
    first = real_inputs[0].type.tensor_type.shape.dim if real_inputs else []
    batch = first[0].dim_value if len(first) else 1
    input_elems = sum(t.sizes[t.ids[i.name]] for i in real_inputs if t.ids[i.name] in t.floats)
    return ModelCount("onnx", max(batch, 1), params, buffers, weight_fixed, input_elems, t.sizes,
                      frozenset(t.floats), tuple(records))
