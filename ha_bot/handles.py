"""Counting rules for TorchScript-traced ATen ops, registered by name in plain dicts (fvcore style).

A rule takes the node's input and output ``torch._C.Value`` lists and returns ``(op_class, macs,
flops)``. Bytes are counted generically by :mod:`ha_bot.count_torch` for every op, so a rule only
states the arithmetic. The conventions are those of ``docs/conventions.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

Rule = Callable[[Sequence[Any], Sequence[Any]], tuple[str, int, int] | tuple[str, int, int, int]]


def shape(v: Any) -> list[int]:
    """Sizes of a tensor value (empty list for scalars / unknown)."""
    try:
        sizes = v.type().sizes()
    except (RuntimeError, AttributeError):
        return []
    return [int(s) for s in sizes] if sizes is not None else []


def numel(v: Any) -> int:
    return math.prod(shape(v))


def const(v: Any) -> Any:
    """The constant value of an input (None when it is not a constant)."""
    node = v.node()
    kind = node.kind()
    if kind == "prim::Constant":
        return v.toIValue()
    if kind == "prim::ListConstruct":
        return [const(i) for i in node.inputs()]
    return None


# ------------------------------------------------------------------ matrix work


def _conv(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
    x, w = shape(inputs[0]), shape(inputs[1])
    out = numel(outputs[0])
    transposed = bool(const(inputs[6])) if len(inputs) > 6 else False
    groups = int(const(inputs[8]) or 1) if len(inputs) > 8 else 1
    has_bias = inputs[2].type().kind() != "NoneType"
    # weight: (C_out, C_in/g, *k) normally, (C_in, C_out/g, *k) when transposed
    if transposed:
        macs = numel(inputs[0]) * w[1] * math.prod(w[2:])
    else:
        macs = out * w[1] * math.prod(w[2:])
    c_in = x[1] if len(x) > 1 else 0
    cls = "dwconv" if groups > 1 and groups == c_in else "conv"
    return cls, macs, 2 * macs + (out if has_bias else 0)


def _conv_simple(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
    """aten::conv1d/2d/3d(input, weight, bias, stride, padding, dilation, groups)."""
    w, x = shape(inputs[1]), shape(inputs[0])
    out = numel(outputs[0])
    groups = int(const(inputs[6]) or 1) if len(inputs) > 6 else 1
    macs = out * w[1] * math.prod(w[2:])
    has_bias = inputs[2].type().kind() != "NoneType"
    cls = "dwconv" if groups > 1 and len(x) > 1 and groups == x[1] else "conv"
    return cls, macs, 2 * macs + (out if has_bias else 0)


def _linear(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
    out = numel(outputs[0])
    k = shape(inputs[1])[-1]
    has_bias = len(inputs) > 2 and inputs[2].type().kind() != "NoneType"
    macs = out * k
    return "matmul", macs, 2 * macs + (out if has_bias else 0)


def _matmul(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int, int]:
    a, b, out = shape(inputs[0]), shape(inputs[1]), shape(outputs[0])
    k = a[-1] if a else 1
    macs = numel(outputs[0]) * k
    # one product: a batched matmul of activations (both operands >= 3-D) is many small products
    unit = 2 * math.prod(out[-2:]) * k if len(a) >= 3 and len(b) >= 3 else 0
    return "matmul", macs, 2 * macs, unit


def _addmm(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int, int]:
    # addmm(bias, a, b, beta, alpha) / baddbmm(input, b1, b2, beta, alpha)
    k = shape(inputs[1])[-1]
    out = numel(outputs[0])
    macs = out * k
    extra = out
    for scale in inputs[3:5]:
        c = const(scale)
        if c is not None and c != 1:
            extra += out
    dims = shape(outputs[0])
    unit = 2 * math.prod(dims[-2:]) * k if len(dims) >= 3 else 0
    return "matmul", macs, 2 * macs + extra, unit


def _einsum(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
    equation = str(const(inputs[0])).replace(" ", "")
    operands = inputs[1].node().inputs() if inputs[1].node().kind() == "prim::ListConstruct" else []
    lhs = equation.split("->")[0].split(",")
    dims: dict[str, int] = {}
    for letters, op in zip(lhs, operands):
        for letter, size in zip(letters.replace("...", ""), shape(op)[-len(letters.replace("...", "")) :]):
            dims[letter] = size
    macs = math.prod(dims.values()) if len(lhs) > 1 else 0
    return "matmul", macs, 2 * macs if macs else numel(outputs[0])


def attention_pairs(lq: int, lk: int, causal: bool) -> int:
    """Query-key pairs actually computed; causal keeps key j <= i + (lk - lq) (bottom-right aligned
    as in PyTorch when lq != lk uses the top-left convention: j <= i)."""
    if not causal:
        return lq * lk
    # PyTorch's is_causal uses a top-left aligned lower-triangular mask: key j visible iff j <= i.
    return sum(min(i + 1, lk) for i in range(lq)) if lq <= 4096 else _causal_closed(lq, lk)


def _causal_closed(lq: int, lk: int) -> int:
    m = min(lq, lk)
    return m * (m + 1) // 2 + (lq - m) * lk


def sdpa_counts(q: list[int], k: list[int], v: list[int], causal: bool) -> tuple[int, int]:
    """MACs and extra FLOPs of scaled-dot-product attention, per query head (grouped-query aware)."""
    batch_heads = math.prod(q[:-2])
    lq, e = q[-2], q[-1]
    lk, ev = k[-2], v[-1]
    pairs = attention_pairs(lq, lk, causal)
    macs = batch_heads * pairs * (e + ev)
    # scale (1) + softmax (3) per computed score
    return macs, 4 * batch_heads * pairs


def _sdpa(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int, int]:
    q, k, v = shape(inputs[0]), shape(inputs[1]), shape(inputs[2])
    causal = bool(const(inputs[5])) if len(inputs) > 5 else False
    macs, extra = sdpa_counts(q, k, v, causal)
    if len(inputs) > 3 and inputs[3].type().kind() != "NoneType":
        extra += math.prod(q[:-2]) * q[-2] * k[-2]  # adding the mask
    flops = 2 * macs + extra
    return "attention", macs, flops, flops // max(1, math.prod(q[:-2]))  # one head of one sample


def _mha_fused(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
    """aten::_native_multi_head_attention(q, k, v, embed_dim, num_heads, qkv_w, qkv_b, proj_w, proj_b, ...)."""
    q, k = shape(inputs[0]), shape(inputs[1])
    e = int(const(inputs[3]))
    heads = int(const(inputs[4]))
    b, lq, lk = q[0], q[1], k[1]
    proj = b * (lq + 2 * lk) * e * e + b * lq * e * e
    att_macs, att_extra = sdpa_counts([b, heads, lq, e // heads], [b, heads, lk, e // heads], [b, heads, lk, e // heads], False)
    macs = proj + att_macs
    return "attention", macs, 2 * macs + att_extra + 4 * b * (lq + 2 * lk) * e // 4


def _encoder_layer_fused(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
    """aten::_transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_w, qkv_b, proj_w, proj_b,
    use_gelu, norm_first, eps, n1_w, n1_b, n2_w, n2_b, ffn1_w, ffn1_b, ffn2_w, ffn2_b, mask, mask_type)."""
    src = shape(inputs[0])
    e, heads = int(const(inputs[1])), int(const(inputs[2]))
    ffn = shape(inputs[14])[0]
    tokens = math.prod(src[:-1])
    b, length = (src[0], src[1]) if len(src) == 3 else (1, src[0])
    att_macs, att_extra = sdpa_counts([b, heads, length, e // heads], [b, heads, length, e // heads], [b, heads, length, e // heads], False)
    macs = tokens * (4 * e * e + 2 * e * ffn) + att_macs
    extra = att_extra + tokens * (4 * e + ffn + 2 * e + 2 * 6 * e)  # biases, activation, residuals, norms
    return "attention", macs, 2 * macs + extra


# ------------------------------------------------------------------ non-matrix work


def _per_out(cls: str, factor: int = 1) -> Rule:
    def rule(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
        return cls, 0, factor * numel(outputs[0])

    return rule


def _per_in(cls: str, factor: int = 1) -> Rule:
    def rule(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
        return cls, 0, factor * numel(inputs[0])

    return rule


def _norm(weight_idx: int, bias_idx: int) -> Rule:
    def rule(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
        n = numel(outputs[0])
        per = 4
        for idx in (weight_idx, bias_idx):
            if idx < len(inputs) and inputs[idx].type().kind() != "NoneType":
                per += 1
        return "norm", 0, per * n

    return rule


def _pool(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
    kernel = const(inputs[1]) or [1]
    kernel = kernel if isinstance(kernel, list) else [kernel]
    dims = len(shape(outputs[0])) - 2
    if len(kernel) == 1 and dims > 1:
        kernel = kernel * dims
    return "pool", 0, numel(outputs[0]) * math.prod(int(k) for k in kernel)


def _interpolate(factor: int) -> Rule:
    return _per_out("pool", factor)


def _embedding(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, int, int]:
    return "embedding", 0, 0


ELEMENTWISE = (
    "add sub rsub mul div neg abs relu relu6 leaky_relu elu selu celu gelu silu mish sigmoid tanh "
    "hardswish hardsigmoid hardtanh softplus exp exp2 log log2 log1p sqrt rsqrt pow reciprocal sin cos "
    "erf erfc clamp clamp_min clamp_max where masked_fill floor ceil round sign square prelu glu "
    "maximum minimum fmod remainder floor_divide div_floor true_divide lerp addcmul addcdiv logical_and logical_or logical_not "
    "eq ne lt le gt ge bitwise_and bitwise_or bitwise_not threshold tril triu to type_as "
    "float half bfloat16 int long bool __and__ __or__ fill"
).split()

REDUCTIONS = "sum mean amax amin max min prod var std norm linalg_vector_norm logsumexp cumsum argmax argmin all any".split()

# real copies: bytes moved, no arithmetic
MEMORY_OPS = (
    "cat stack pad constant_pad_nd reflection_pad1d reflection_pad2d replication_pad2d clone "
    "contiguous index index_select gather scatter index_put roll repeat repeat_interleave tile flip "
    "copy zeros_like ones_like full_like zeros ones full empty arange new_zeros new_ones rand randn "
    "pixel_shuffle pixel_unshuffle im2col col2im"
).split()

# aliasing ops: no kernel, no bytes; outputs share their first input's storage
VIEW_OPS = frozenset(
    (
        "view reshape flatten unflatten permute transpose t select slice narrow expand expand_as "
        "squeeze unsqueeze unbind split chunk split_with_sizes detach alias view_as dropout "
        "feature_dropout alpha_dropout lift_fresh movedim numpy_T swapaxes unfold as_strided "
        "_unsafe_view identity"
    ).split()
)

RULES: dict[str, Rule] = {
    "_convolution": _conv,
    "conv1d": _conv_simple,
    "conv2d": _conv_simple,
    "conv3d": _conv_simple,
    "linear": _linear,
    "matmul": _matmul,
    "mm": _matmul,
    "bmm": _matmul,
    "addmm": _addmm,
    "baddbmm": _addmm,
    "addbmm": _addmm,
    "einsum": _einsum,
    "scaled_dot_product_attention": _sdpa,
    "_native_multi_head_attention": _mha_fused,
    "_transformer_encoder_layer_fwd": _encoder_layer_fused,
    "softmax": _per_out("reduction", 3),
    "log_softmax": _per_out("reduction", 3),
    "_softmax": _per_out("reduction", 3),
    "batch_norm": _per_out("norm", 2),
    "_native_batch_norm_legit_no_training": _per_out("norm", 2),
    "layer_norm": _norm(2, 3),
    "group_norm": _norm(2, 3),
    "instance_norm": _norm(1, 2),
    "rms_norm": _norm(2, 99),
    "max_pool1d": _pool,
    "max_pool2d": _pool,
    "max_pool3d": _pool,
    "avg_pool1d": _pool,
    "avg_pool2d": _pool,
    "avg_pool3d": _pool,
    "adaptive_avg_pool1d": _per_in("pool"),
    "adaptive_avg_pool2d": _per_in("pool"),
    "adaptive_avg_pool3d": _per_in("pool"),
    "adaptive_max_pool2d": _per_in("pool"),
    "upsample_nearest1d": _interpolate(0),
    "upsample_nearest2d": _interpolate(0),
    "upsample_nearest3d": _interpolate(0),
    "upsample_linear1d": _interpolate(2),
    "upsample_bilinear2d": _interpolate(4),
    "upsample_trilinear3d": _interpolate(8),
    "upsample_bicubic2d": _interpolate(16),
    "embedding": _embedding,
}
for _name in ELEMENTWISE:
    RULES.setdefault(_name, _per_out("elementwise"))
for _name in REDUCTIONS:
    RULES.setdefault(_name, _per_in("reduction"))
for _name in MEMORY_OPS:
    RULES.setdefault(_name, _per_out("memory", 0))


def base_name(kind: str) -> str:
    """'aten::relu_' -> 'relu' (in-place variants share the rule of the out-of-place op)."""
    name = kind.split("::", 1)[-1]
    if name.endswith("_") and not name.endswith("__") and name[:-1] in _KNOWN:
        return name[:-1]
    return name


_KNOWN = frozenset(RULES) | VIEW_OPS
