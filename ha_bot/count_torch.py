"""Count a PyTorch module: one :class:`OpRecord` per traced op, via fvcore's ``JitModelAnalysis``.

fvcore provides the trace with module scopes; ha-bot walks every node of it itself so that each op
gets a record (ops without a FLOP rule too), bytes are counted for all of them, and views and
in-place ops are tracked as storage aliases for the liveness analysis. This is the only module that
knows about TorchScript: swapping the tracer later touches nothing downstream.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator
from typing import Any

from ha_bot import handles
from ha_bot.records import ModelCount, OpRecord

# prim:: nodes that only build the graph's structure (no kernel runs)
_STRUCTURAL = frozenset(
    {
        "prim::Constant",
        "prim::ListConstruct",
        "prim::TupleConstruct",
        "prim::TupleUnpack",
        "prim::GetAttr",
        "prim::NumToTensor",
        "prim::device",
        "prim::dtype",
        "prim::ListIndex",
    }
)
_LIST_SPLITS = frozenset({"prim::ListUnpack"})


@contextlib.contextmanager
def _inference_mode(model: Any) -> Iterator[None]:
    """eval(), no grad, and PyTorch's fused MHA/encoder fast path off so attention stays visible."""
    import torch

    was_training = model.training
    mha = getattr(torch.backends, "mha", None)
    fast = mha.get_fastpath_enabled() if mha else None
    model.eval()
    if mha:
        mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        model.train(was_training)
        if mha and fast is not None:
            mha.set_fastpath_enabled(fast)


def _flatten(obj: Any) -> list[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _flatten(item)]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _flatten(v)]
    return []


def _is_float_dtype(scalar_type: str | None) -> bool:
    return scalar_type in {"Float", "Half", "BFloat16", "Double", "ComplexFloat", "Float8_e4m3fn", "Float8_e5m2"}


_ITEMSIZE = {"Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1, "Bool": 1, "Double": 8}


def count_module(model: Any, inputs: tuple[Any, ...]) -> ModelCount:
    """Trace ``model(*inputs)`` once and return per-op records at the inputs' shapes."""
    import torch
    from fvcore.nn.jit_analysis import JitModelAnalysis, _get_scoped_trace_graph

    with _inference_mode(model):
        analysis = JitModelAnalysis(model, inputs)
        graph = _get_scoped_trace_graph(model, inputs, analysis._aliases)
    flat_inputs = _flatten(inputs)
    weights = list(torch.jit._unique_state_dict(model, keep_vars=True).values())
    param_ids = {id(p) for p in model.parameters()}
    return _walk(graph, flat_inputs, weights, param_ids, model)


class _Walker:
    """Walks a trace graph once, assigning storages and building records."""

    def __init__(self) -> None:
        self.storage: dict[int, int] = {}  # jit value unique -> storage id
        self.sizes: dict[int, int] = {}  # storage id -> elements (float) or bytes (other)
        self.floats: set[int] = set()
        self.weights: set[int] = set()  # value uniques that are parameters/buffers

    def new_storage(self, value: Any, elems: int, is_float: bool, itemsize: int) -> int:
        sid = len(self.sizes)
        self.storage[value.unique()] = sid
        self.sizes[sid] = elems if is_float else elems * itemsize
        if is_float:
            self.floats.add(sid)
        return sid


def _tensor_info(value: Any) -> tuple[int, bool, int] | None:
    """(elements, is_float, itemsize) of a tensor value with known sizes; None otherwise."""
    t = value.type()
    if t.kind() != "TensorType":
        return None
    sizes = t.sizes()
    if sizes is None:
        return None
    st = t.scalarType()
    return math.prod(sizes), _is_float_dtype(st), _ITEMSIZE.get(st or "", 4)


def _is_contiguous(value: Any) -> bool:
    t = value.type()
    sizes, strides = t.sizes(), t.strides()
    if sizes is None or strides is None:
        return False
    expected = 1
    for size, stride in zip(reversed(sizes), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _walk(graph: Any, flat_inputs: list[Any], weights: list[Any], param_ids: set[int], model: Any) -> ModelCount:
    w = _Walker()
    graph_inputs = list(graph.inputs())
    n_user = len(flat_inputs)
    input_elems = 0
    for value, tensor in zip(graph_inputs[:n_user], flat_inputs):
        is_float = tensor.is_floating_point()
        w.new_storage(value, tensor.numel(), is_float, tensor.element_size())
        input_elems += tensor.numel() if is_float else 0
    weight_shapes: dict[int, tuple[int, bool, int]] = {}
    for value, tensor in zip(graph_inputs[n_user:], weights):
        w.weights.add(value.unique())
        weight_shapes[value.unique()] = (tensor.numel(), tensor.is_floating_point(), tensor.element_size())

    records: list[OpRecord] = []
    for node in graph.nodes():
        kind = node.kind()
        if kind in _STRUCTURAL:
            continue
        outs = list(node.outputs())
        ins = list(node.inputs())
        if kind in _LIST_SPLITS:  # pieces of a list produced by chunk/split/unbind: same storage
            src = w.storage.get(ins[0].unique()) if ins else None
            for o in outs:
                if src is not None:
                    w.storage[o.unique()] = src
            continue
        out_infos = [(o, _tensor_info(o)) for o in outs]
        if not any(info for _, info in out_infos) and not any(o.type().kind() == "ListType" for o in outs):
            continue  # host-side scalar op (aten::size, aten::Int, ...): no kernel
        if kind.startswith("prim::") and not kind.startswith(("prim::PythonOp", "prim::CallFunction")):
            continue
        scope = node.scopeName().split("/")[-1]
        if scope.startswith("__module."):
            scope = scope[len("__module.") :]
        records.append(_record(w, node, kind, ins, out_infos, weight_shapes, scope))

    params = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() for b in model.buffers() if b.is_floating_point())
    fixed = sum(t.numel() * t.element_size() for t in weights if not t.is_floating_point())
    batch = int(flat_inputs[0].shape[0]) if flat_inputs and flat_inputs[0].dim() > 0 else 1
    return ModelCount(
        engine="torch",
        batch=batch,
        params=params,
        buffers=buffers,
        weight_fixed_bytes=fixed,
        input_elems=input_elems,
        tensors=w.sizes,
        float_tensors=frozenset(w.floats),
        ops=tuple(records),
    )


def _record(
    w: _Walker,
    node: Any,
    kind: str,
    ins: list[Any],
    out_infos: list[tuple[Any, tuple[int, bool, int] | None]],
    weight_shapes: dict[int, tuple[int, bool, int]],
    scope: str,
) -> OpRecord:
    name = handles.base_name(kind)
    if kind.startswith("prim::PythonOp"):
        name = kind = f"{kind}.{node.pyname()}"
    in_place = kind.endswith("_") and not kind.endswith("__")
    first = ins[0] if ins else None
    is_view = name in handles.VIEW_OPS
    if name == "contiguous" and first is not None and _is_contiguous(first):
        is_view = True
    # reshape/flatten of a non-contiguous tensor into a contiguous result is a copy, not a view
    copies = (
        name in ("reshape", "flatten") and first is not None and out_infos and out_infos[0][1] is not None
        and not _is_contiguous(first) and _is_contiguous(out_infos[0][0])
    )
    if copies:
        is_view = False
    if name in ("to", "type_as", "float", "half") and first is not None and out_infos[0][1] is not None:
        if first.type().kind() == "TensorType" and first.type().scalarType() == out_infos[0][0].type().scalarType():
            is_view = True

    act_in = w_in = fixed = 0
    in_sids: list[int] = []
    for v in ins:
        uid = v.unique()
        if uid in w.weights:
            elems, is_float, itemsize = weight_shapes[uid]
            if is_float:
                w_in += elems
            else:
                fixed += elems * itemsize
            continue
        info = _tensor_info(v)
        if info is None:
            continue
        sid = w.storage.get(uid)
        if sid is None:  # produced by something we skipped: give it a storage now
            sid = w.new_storage(v, info[0], info[1], info[2])
        in_sids.append(sid)
        if info[1]:
            act_in += info[0]
        else:
            fixed += info[0] * info[2]

    if is_view:
        src = in_sids[0] if in_sids else None
        for o, _ in out_infos:
            if src is not None:
                w.storage[o.unique()] = src
        # no kernel and no bytes here; `out` keeps the elements a runtime that materialises this
        # view (onnxruntime's Transpose) would copy, for targets with `copies_views`
        moved = sum(info[0] for _, info in out_infos if info is not None and info[1]) if name in ("permute", "transpose") else 0
        return OpRecord(kind, scope, "view", 0, 0, 0, 0, moved, 0, True, tuple(in_sids), ())

    out = 0
    out_sids: list[int] = []
    for o, info in out_infos:
        if info is None:
            if o.type().kind() == "ListType" and in_sids:  # list outputs of real ops: alias input
                w.storage[o.unique()] = in_sids[0]
            continue
        elems, is_float, itemsize = info
        if in_place and in_sids:
            w.storage[o.unique()] = in_sids[0]
        else:
            out_sids.append(w.new_storage(o, elems, is_float, itemsize))
        if is_float:
            out += elems
        else:
            fixed += elems * itemsize

    if copies:
        return OpRecord(kind, scope, "memory", 0, 0, act_in, w_in, out, fixed, True, tuple(in_sids), tuple(out_sids))
    rule = handles.RULES.get(name)
    if rule is None:
        return OpRecord(kind, scope, "other", 0, 0, act_in, w_in, out, fixed, False, tuple(in_sids), tuple(out_sids))
    result = rule(ins, [o for o, _ in out_infos])
    op_class, macs, flops = result[:3]
    unit = result[3] if len(result) > 3 else 0
    if op_class == "embedding":  # reads only the gathered rows of the table
        w_in = out
    return OpRecord(kind, scope, op_class, int(macs), int(flops), act_in, w_in, out, fixed, True, tuple(in_sids),
                    tuple(out_sids), int(unit))
