"""Count an ONNX model: one :class:`OpRecord` per graph node, with the torch engine's conventions.

No model code runs: the file is parsed with ``onnx.load`` (external weight files are never read,
only the tensors' declared shapes are needed), checked with ``onnx.checker``, its free dimensions
are pinned (``input_shapes``, else 1) and shapes are inferred with ``onnx.shape_inference``.
Large initializers are handed to the checker and to shape inference as typed graph inputs, so
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
from onnx import TensorProto, helper, shape_inference

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
    # Declared intermediate shapes were written for the export-time inputs: re-infer them, except
    # for outputs of ops that have no schema (custom domains), whose shapes only the file knows.
    no_schema = {o for n in g.node if not onnx.defs.has(n.op_type, n.domain) for o in n.output}
    sg.value_info.extend(v for v in g.value_info if v.name in no_schema)
    for o in g.output:
        out = sg.output.add()
        out.CopyFrom(o)
        if o.name not in no_schema:
            for d in out.type.tensor_type.shape.dim:
                d.Clear()
    return skel


def _pin_inputs(graph: onnx.GraphProto, weights: Mapping[str, TensorProto], path: str,
                input_shapes: Mapping[str, Sequence[int]] | None) -> list[onnx.ValueInfoProto]:
    """Give every real graph input a concrete shape; returns those inputs in order."""
    real = [i for i in graph.input if i.name not in weights]
    given = dict(input_shapes or {})
    unknown = sorted(set(given) - {i.name for i in real})
    if unknown:
        names = ", ".join(i.name for i in real)
        raise ModelError(f"{path}: input_shapes names unknown input(s) {unknown}; the inputs are: {names}")
    defaulted = []
    for inp in real:
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
            defaulted += [f"{inp.name}[{k}]={d.dim_param or '?'}" for k, d in enumerate(tt.shape.dim)
                          if not d.HasField("dim_value")]
        tt.ClearField("shape")
        tt.shape.SetInParent()
        for d in dims:
            tt.shape.dim.add().dim_value = d
    if defaulted:
        log.info("%s: free input dimensions set to 1: %s", path, ", ".join(defaulted))
    return real


def _shapes(model: onnx.ModelProto, path: str) -> dict[str, tuple[Shape | None, int]]:
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError, RuntimeError) as e:
        raise ModelError(f"{path}: invalid ONNX model: {str(e).strip().splitlines()[0]}") from e
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

def count_onnx(path: str | os.PathLike[str], *,
               input_shapes: Mapping[str, Sequence[int]] | None = None) -> ModelCount:
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

    const: set[str] = set(weights)  # names whose values are fixed: initializers, Constant outputs
    storage: dict[str, int] = {}  # activation name -> storage id
    tensors: dict[int, int] = {}
    floats: set[int] = set()

    def new_storage(name: str) -> int:
        shape, et = info[name]
        sid = storage[name] = len(tensors)
        if et in _FLOAT_TYPES:
            tensors[sid] = _numel(shape)
            floats.add(sid)
        else:
            tensors[sid] = _numel(shape) * _itemsize(et)
        return sid

    for inp in real_inputs:
        new_storage(inp.name)

    params = buffers = weight_fixed = 0
    weight_names = dict.fromkeys(weights)  # initializers + Identity aliases the exporter merged
    buffer_names = {n for n in weights if n.endswith(_BUFFER_SUFFIXES)}
    records: list[OpRecord] = []

    for node in graph.node:
        op = node.op_type
        label = op if node.domain in ("", "ai.onnx") else f"{node.domain}.{op}"
        for k, name in enumerate((*node.input, *node.output)):
            if name and (name not in info or info[name][0] is None):
                where = "input" if k < len(node.input) else "output"
                raise ModelError(
                    f"{path}: cannot infer the shape of {where} '{name}' of node "
                    f"'{node.name or '(unnamed)'}' ({label}); pass input_shapes or add value_info")
        slots = _BUFFER_SLOTS.get(op, ())
        for i, name in enumerate(node.input):
            if i in slots and name in weight_names:
                buffer_names.add(name)

        n = _Node(node, [info[x][0] if x else None for x in node.input],
                  [info[x][0] if x else None for x in node.output],
                  [x in const for x in node.input])
        rule = _RULES.get(op) if node.domain in ("", "ai.onnx") else None
        work = rule(n) if rule is not None else _Work("other")

        if work.op_class == "view":
            src = node.input[0] if node.input else ""
            for name in node.output:
                if op == "Constant" or src in const:
                    const.add(name)
                    if op == "Identity" and src in weight_names:
                        weight_names[name] = None
                elif src in storage:
                    storage[name] = storage[src]
            ins = (storage[src],) if src in storage else ()
            records.append(OpRecord(f"onnx::{label}", _scope(node), "view", 0, 0, 0, 0, 0, 0,
                                    rule is not None, ins))
            continue

        act_in = w_in = out = fixed = 0
        ins_ids: list[int] = []
        out0 = n.out
        for k, name in enumerate(node.input):
            if not name or work.reads == "none" or name in node.input[:k]:
                continue
            shape, et = info[name]
            elems = out0 if (work.reads == "out" and k == 0) else _numel(shape)
            if et not in _FLOAT_TYPES:
                fixed += elems * _itemsize(et)
            elif name in const:
                w_in += elems
            else:
                act_in += elems
            if name in storage:
                ins_ids.append(storage[name])
        outs_ids: list[int] = []
        for name in node.output:
            if not name:
                continue
            shape, et = info[name]
            if et in _FLOAT_TYPES:
                out += _numel(shape)
            else:
                fixed += _numel(shape) * _itemsize(et)
            outs_ids.append(new_storage(name))
        records.append(OpRecord(
            f"onnx::{label}", _scope(node), work.op_class, work.macs, work.flops, act_in, w_in, out,
            fixed, rule is not None, tuple(dict.fromkeys(ins_ids)), tuple(outs_ids)))

    # Constant-node tensors are buffers too; every merged-weight alias counts as its own tensor.
    for node in graph.node:
        if node.op_type == "Constant":
            for name in node.output:
                buffer_names.add(name)
                weight_names.setdefault(name, None)
    for name in weight_names:
        shape, et = info.get(name, (None, 0))
        if name in weights:
            t = weights[name]
            shape, et = tuple(t.dims), t.data_type
        size = _numel(shape)
        if et not in _FLOAT_TYPES:
            weight_fixed += size * _itemsize(et)
        elif name in buffer_names or size <= 1:
            buffers += size
        else:
            params += size

    first = real_inputs[0].type.tensor_type.shape.dim if real_inputs else []
    batch = first[0].dim_value if len(first) else 1
    input_elems = sum(tensors[storage[i.name]] for i in real_inputs if storage[i.name] in floats)
    return ModelCount("onnx", max(batch, 1), params, buffers, weight_fixed, input_elems, tensors,
                      frozenset(floats), tuple(records))
