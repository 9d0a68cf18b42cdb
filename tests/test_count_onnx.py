"""The ONNX counting engine: hand-computed per-op numbers, torch agreement, and bad files."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from ha_bot.count_onnx import count_onnx
from ha_bot.errors import ModelError
from ha_bot.records import OP_CLASSES, ModelCount, OpRecord

F = TensorProto.FLOAT


# ---- tiny hand-built graphs -----------------------------------------------------------------


def vi(name: str, shape: Sequence[int | str] | None, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def init(
    name: str, shape: Sequence[int], dtype: type = np.float32, value: np.ndarray | None = None
) -> TensorProto:
    arr = np.ones(shape, dtype) if value is None else np.asarray(value, dtype)
    return numpy_helper.from_array(arr, name)


def save(
    tmp_path: Path,
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: Sequence[str],
    inits: Sequence[TensorProto] = (),
    *,
    opset: int = 21,
    value_info: Sequence[onnx.ValueInfoProto] = (),
    domains: Sequence[str] = (),
) -> Path:
    graph = helper.make_graph(
        nodes, "g", inputs, [vi(o, None) for o in outputs], list(inits), value_info=list(value_info)
    )
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=opsets), path)
    return path


def only(count: ModelCount, op: str) -> OpRecord:
    (rec,) = [r for r in count.ops if r.op == op]
    return rec


def test_conv_groups_and_bias(tmp_path: Path) -> None:
    # X [1,4,8,8], W [8,2,3,3] groups=2, pad 1 -> Y [1,8,8,8] = 512 elements
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=2, pads=[1, 1, 1, 1])
    c = count_onnx(
        save(
            tmp_path,
            [node],
            [vi("x", [1, 4, 8, 8])],
            ["y"],
            [init("w", [8, 2, 3, 3]), init("b", [8])],
        )
    )
    r = only(c, "onnx::Conv")
    assert (r.op_class, r.macs, r.flops) == ("conv", 512 * 2 * 9, 2 * 512 * 18 + 512)
    assert (r.act_in, r.w_in, r.out, r.fixed_bytes) == (256, 144 + 8, 512, 0)
    assert (c.params, c.buffers, c.input_elems, c.batch) == (152, 0, 256, 1)


def test_depthwise_conv_class(tmp_path: Path) -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=4, pads=[1, 1, 1, 1])
    c = count_onnx(
        save(tmp_path, [node], [vi("x", [1, 4, 8, 8])], ["y"], [init("w", [4, 1, 3, 3])])
    )
    r = only(c, "onnx::Conv")
    assert (r.op_class, r.macs, r.flops) == ("dwconv", 256 * 9, 2 * 256 * 9)


def test_conv_transpose(tmp_path: Path) -> None:
    # X [1,4,5,5], W [4,3,2,2] stride 2 -> Y [1,3,10,10]; each input element feeds 3 x 2 x 2 outputs
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])
    c = count_onnx(
        save(tmp_path, [node], [vi("x", [1, 4, 5, 5])], ["y"], [init("w", [4, 3, 2, 2])])
    )
    r = only(c, "onnx::ConvTranspose")
    assert (r.op_class, r.macs, r.out) == ("conv", 100 * 12, 300)


@pytest.mark.parametrize(
    ("alpha", "beta", "extra"), [(1.0, 1.0, 8), (0.5, 1.0, 16), (1.0, 2.0, 16)]
)
def test_gemm_transb_bias(tmp_path: Path, alpha: float, beta: float, extra: int) -> None:
    # A [2,3] x B^T with B [4,3] + C [4] -> [2,4]: 2 x 4 x 3 MACs
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=alpha, beta=beta)
    c = count_onnx(
        save(tmp_path, [node], [vi("a", [2, 3])], ["y"], [init("b", [4, 3]), init("c", [4])])
    )
    r = only(c, "onnx::Gemm")
    assert (r.op_class, r.macs, r.flops) == ("matmul", 24, 48 + extra)
    assert (r.act_in, r.w_in, r.out) == (6, 16, 8)


def test_gemm_transa(tmp_path: Path) -> None:
    node = helper.make_node("Gemm", ["a", "b"], ["y"], transA=1)  # A [3,2]^T x B [3,4]
    c = count_onnx(save(tmp_path, [node], [vi("a", [3, 2])], ["y"], [init("b", [3, 4])]))
    assert only(c, "onnx::Gemm").macs == 2 * 4 * 3


@pytest.mark.parametrize(
    ("a", "b", "macs"),
    [
        ([2, 3, 4, 5], [5, 6], 2 * 3 * 4 * 6 * 5),  # batched x matrix
        ([2, 1, 4, 5], [3, 5, 6], 2 * 3 * 4 * 6 * 5),  # broadcast batch dims
        ([5], [2, 5, 6], 2 * 6 * 5),  # 1-D left operand
        ([4, 5], [5], 4 * 5),  # 1-D right operand
    ],
)
def test_matmul_batched(tmp_path: Path, a: list[int], b: list[int], macs: int) -> None:
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    c = count_onnx(save(tmp_path, [node], [vi("a", a), vi("b", b)], ["y"]))
    r = only(c, "onnx::MatMul")
    assert (r.op_class, r.macs, r.flops) == ("matmul", macs, 2 * macs)
    assert (r.act_in, r.w_in) == (math.prod(a) + math.prod(b), 0)


def test_einsum(tmp_path: Path) -> None:
    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")
    c = count_onnx(save(tmp_path, [node], [vi("a", [2, 3, 4]), vi("b", [2, 4, 5])], ["y"]))
    assert only(c, "onnx::Einsum").macs == 2 * 3 * 4 * 5


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax(tmp_path: Path, op: str) -> None:
    c = count_onnx(save(tmp_path, [helper.make_node(op, ["x"], ["y"])], [vi("x", [2, 10])], ["y"]))
    r = only(c, f"onnx::{op}")
    assert (r.op_class, r.macs, r.flops, r.act_in, r.out) == ("reduction", 0, 60, 20, 20)


@pytest.mark.parametrize(("with_bias", "per_elem"), [(True, 6), (False, 5)])
def test_layer_norm(tmp_path: Path, with_bias: bool, per_elem: int) -> None:
    ins = ["x", "s", "b"] if with_bias else ["x", "s"]
    inits = [init("s", [8]), init("b", [8])] if with_bias else [init("s", [8])]
    node = helper.make_node("LayerNormalization", ins, ["y"], axis=-1)
    c = count_onnx(save(tmp_path, [node], [vi("x", [2, 5, 8])], ["y"], inits))
    r = only(c, "onnx::LayerNormalization")
    assert (r.op_class, r.flops, r.w_in) == ("norm", per_elem * 80, 8 * len(inits))


def test_batch_norm_stats_are_buffers(tmp_path: Path) -> None:
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    inits = [init(n, [3]) for n in ("s", "b", "m", "v")]
    c = count_onnx(save(tmp_path, [node], [vi("x", [1, 3, 4, 4])], ["y"], inits))
    r = only(c, "onnx::BatchNormalization")
    assert (r.op_class, r.flops, r.w_in) == ("norm", 2 * 48, 12)
    assert (c.params, c.buffers) == (6, 6)


def test_max_pool(tmp_path: Path) -> None:
    # [1,2,8,8], kernel 3, stride 2, pad 1 -> [1,2,4,4] = 32 outputs, 9 reads each
    node = helper.make_node(
        "MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
    )
    c = count_onnx(save(tmp_path, [node], [vi("x", [1, 2, 8, 8])], ["y"]))
    r = only(c, "onnx::MaxPool")
    assert (r.op_class, r.flops, r.act_in, r.out) == ("pool", 32 * 9, 128, 32)


def test_global_average_pool(tmp_path: Path) -> None:
    node = helper.make_node("GlobalAveragePool", ["x"], ["y"])
    c = count_onnx(save(tmp_path, [node], [vi("x", [1, 2, 8, 8])], ["y"]))
    assert only(c, "onnx::GlobalAveragePool").flops == 128


@pytest.mark.parametrize(("mode", "per_out"), [("nearest", 0), ("linear", 4), ("cubic", 16)])
def test_resize(tmp_path: Path, mode: str, per_out: int) -> None:
    # [1,2,4,4] x2 -> [1,2,8,8] = 128 outputs
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode)
    c = count_onnx(
        save(
            tmp_path,
            [node],
            [vi("x", [1, 2, 4, 4])],
            ["y"],
            [init("scales", [4], value=[1, 1, 2, 2])],
        )
    )
    r = only(c, "onnx::Resize")
    assert (r.op_class, r.flops, r.out) == ("pool", per_out * 128, 128)
    assert (c.params, c.buffers) == (0, 4)  # scales are a constant, not a parameter


def test_gather_embedding_reads_rows_not_table(tmp_path: Path) -> None:
    node = helper.make_node("Gather", ["table", "ids"], ["y"])
    c = count_onnx(
        save(
            tmp_path,
            [node],
            [vi("ids", [2, 3], TensorProto.INT64)],
            ["y"],
            [init("table", [100, 16])],
        )
    )
    r = only(c, "onnx::Gather")
    assert (r.op_class, r.flops, r.act_in, r.w_in, r.out) == ("embedding", 0, 0, 96, 96)
    assert r.fixed_bytes == 6 * 8  # the int64 indices
    assert c.params == 1600 and c.input_elems == 0
    assert c.tensors[0] == 48 and 0 not in c.float_tensors  # indices storage holds bytes


def test_gather_on_activations_is_memory(tmp_path: Path) -> None:
    node = helper.make_node("Gather", ["x", "idx"], ["y"])
    c = count_onnx(
        save(tmp_path, [node], [vi("x", [5, 16])], ["y"], [init("idx", [3], np.int64, [0, 2, 4])])
    )
    r = only(c, "onnx::Gather")
    assert (r.op_class, r.act_in, r.w_in, r.out, r.fixed_bytes) == ("memory", 48, 0, 48, 24)
    assert c.weight_fixed_bytes == 24


def test_views_alias_and_copies_move_bytes(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
        helper.make_node("Relu", ["t"], ["y"]),
    ]
    c = count_onnx(
        save(tmp_path, nodes, [vi("x", [2, 3, 4])], ["y"], [init("shape", [2], np.int64, [6, 4])])
    )
    reshape, transpose, relu = c.ops
    assert reshape == OpRecord("onnx::Reshape", "", "view", 0, 0, 0, 0, 0, 0, True, (0,), ())
    assert (transpose.op_class, transpose.act_in, transpose.out, transpose.flops) == (
        "memory",
        24,
        24,
        0,
    )
    assert transpose.inputs == (0,)  # reads the reshape's storage: the model input
    assert relu.inputs == transpose.outputs and relu.flops == 24
    assert c.tensors == {0: 24, 1: 24, 2: 24} and c.float_tensors == {0, 1, 2}


def test_slice_reads_what_it_writes(tmp_path: Path) -> None:
    node = helper.make_node("Slice", ["x", "st", "en"], ["y"])
    c = count_onnx(
        save(
            tmp_path,
            [node],
            [vi("x", [10, 4])],
            ["y"],
            [init("st", [1], np.int64, [0]), init("en", [1], np.int64, [3])],
        )
    )
    r = only(c, "onnx::Slice")
    assert (r.op_class, r.act_in, r.out, r.fixed_bytes) == ("memory", 12, 12, 16)


def test_elementwise_and_reduction(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["a"]),
        helper.make_node("Gelu", ["a"], ["g"]),
        helper.make_node("ReduceMean", ["g", "axes"], ["y"]),
    ]
    c = count_onnx(
        save(
            tmp_path,
            nodes,
            [vi("x", [2, 8])],
            ["y"],
            [init("bias", [8]), init("axes", [1], np.int64, [1])],
        )
    )
    add, gelu, mean = c.ops
    assert (add.op_class, add.flops, add.act_in, add.w_in) == ("elementwise", 16, 16, 8)
    assert (gelu.op_class, gelu.flops) == ("elementwise", 16)
    assert (mean.op_class, mean.flops, mean.out) == ("reduction", 16, 2)


def test_attention_op_causal(tmp_path: Path) -> None:
    # B=2, H=4, L=8, E=16, causal: 36 of 64 query/key pairs
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)
    ins = [vi(n, [2, 4, 8, 16]) for n in "qkv"]
    c = count_onnx(save(tmp_path, [node], ins, ["y"], opset=23))
    r = only(c, "onnx::Attention")
    assert (r.op_class, r.macs, r.flops) == (
        "attention",
        2 * 4 * 36 * 32,
        2 * 2 * 4 * 36 * 32 + 4 * 2 * 4 * 36,
    )


def test_unknown_custom_op_is_unsupported_with_bytes(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Fancy", ["x"], ["f"], domain="my.ops", name="fancy1"),
        helper.make_node("Relu", ["f"], ["y"]),
    ]
    c = count_onnx(
        save(
            tmp_path,
            nodes,
            [vi("x", [2, 3])],
            ["y"],
            value_info=[vi("f", [2, 3, 2])],
            domains=["my.ops"],
        )
    )
    fancy, relu = c.ops
    assert fancy == OpRecord(
        "onnx::my.ops.Fancy", "", "other", 0, 0, 6, 0, 12, 0, False, (0,), (1,)
    )
    assert relu.supported and relu.flops == 12


def test_custom_op_without_shapes_names_the_node(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Fancy", ["x"], ["f"], domain="my.ops", name="fancy1"),
        helper.make_node("Relu", ["f"], ["y"]),
    ]
    path = save(tmp_path, nodes, [vi("x", [2, 3])], ["y"], domains=["my.ops"])
    with pytest.raises(ModelError, match=r"m\.onnx.*'f'.*fancy1.*my\.ops\.Fancy"):
        count_onnx(path)


def test_every_node_gets_a_record_and_valid_class(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node(
            "Constant", [], ["c"], value=numpy_helper.from_array(np.array([1.5], np.float32))
        ),
        helper.make_node("ConstantOfShape", ["s"], ["z"]),
        helper.make_node("Mul", ["z", "c"], ["y"]),
    ]
    c = count_onnx(save(tmp_path, nodes, [vi("x", [2, 3])], ["y"]))
    assert [r.op for r in c.ops] == [
        "onnx::Shape",
        "onnx::Constant",
        "onnx::ConstantOfShape",
        "onnx::Mul",
    ]
    assert all(r.op_class in OP_CLASSES and r.supported for r in c.ops)
    shape, _const, _fill, mul = c.ops
    assert (shape.act_in, shape.fixed_bytes) == (0, 16)  # metadata only; writes 2 int64
    assert (mul.act_in, mul.w_in, mul.flops) == (6, 1, 6)  # the Constant is a weight read
    assert (c.params, c.buffers) == (0, 1)


# ---- free dimensions ------------------------------------------------------------------------


def test_symbolic_dims_default_to_one_or_input_shapes(tmp_path: Path) -> None:
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    path = save(tmp_path, [node], [vi("x", ["batch", "seq", 8])], ["y"], [init("w", [8, 4])])
    one = count_onnx(path)
    assert (one.batch, one.macs, one.input_elems) == (1, 32, 8)
    big = count_onnx(path, input_shapes={"x": [3, 5, 8]})
    assert (big.batch, big.macs, big.input_elems) == (3, 3 * 5 * 32, 120)
    with pytest.raises(ModelError, match="unknown input"):
        count_onnx(path, input_shapes={"nope": [1]})
    with pytest.raises(ModelError, match="rank"):
        count_onnx(path, input_shapes={"x": [3, 8]})


def test_shape_arithmetic_beyond_onnx_data_propagation(tmp_path: Path) -> None:
    # reshape(x, (x.shape[0], x.shape[1] // 4, 4)): ONNX's own data propagation stops at Div
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
        helper.make_node("Div", ["n", "four"], ["q"]),
        helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
        helper.make_node("Unsqueeze", ["q", "ax"], ["q1"]),
        helper.make_node("Concat", ["b1", "q1", "four1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["y"]),
    ]
    inits = [
        init("zero", [], np.int64, 0),
        init("one", [], np.int64, 1),
        init("four", [], np.int64, 4),
        init("four1", [1], np.int64, [4]),
        init("ax", [1], np.int64, [0]),
        init("w", [4, 5]),
    ]
    path = save(tmp_path, nodes, [vi("x", ["batch", 8])], ["y"], inits)
    c = count_onnx(path, input_shapes={"x": [3, 8]})
    assert only(c, "onnx::MatMul").macs == 3 * 2 * 5 * 4
    assert only(c, "onnx::Div").fixed_bytes == 3 * 8


# ---- bad files ------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.onnx"
    with pytest.raises(ModelError, match=r"absent\.onnx"):
        count_onnx(path)


RANDOM_BYTES = np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("content", [RANDOM_BYTES, b""], ids=["random", "empty"])
def test_garbage_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(content)
    with pytest.raises(ModelError, match=r"garbage\.onnx"):
        count_onnx(path)


def test_parsable_but_invalid_model(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [vi("x", [2])], [vi("y", [2])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    del model.opset_import[:]  # what a file cut right after its graph looks like
    path = tmp_path / "cut.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelError, match=r"cut\.onnx: invalid ONNX model"):
        count_onnx(path)


# ---- agreement with PyTorch -----------------------------------------------------------------


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()
        )
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.pw = nn.Conv2d(16, 64, 1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Conv2d(64, 128, 3, padding=1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.pool(torch.relu(self.pw(torch.relu(self.bn(self.dw(x))))))
        return self.fc(torch.flatten(self.gap(torch.relu(self.head(x))), 1))


class Attention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = ((q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attention(d, heads), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyEncoder(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4, depth: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


class EmbedLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.fc = nn.Embedding(100, 16), nn.Linear(16, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.fc(self.emb(ids))


def _trained_like(model: nn.Module) -> nn.Module:
    """Distinct weights, as a trained model has: exporters merge equal-valued initializers."""
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.1)
    return model.eval()


def _export(model: nn.Module, x: torch.Tensor, path: Path, *, dynamo: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(model, (x,), path, dynamo=True, input_names=["x"], verbose=False)
        else:  # the TorchScript exporter: deprecated in torch 2.9+, still present in 2.13
            torch.onnx.export(
                model, (x,), path, dynamo=False, input_names=["x"], dynamic_axes={"x": {0: "batch"}}
            )


def _torch_macs(model: nn.Module, x: torch.Tensor) -> int:
    from fvcore.nn import FlopCountAnalysis  # fvcore's "flop" is a MAC for these ops

    fca = FlopCountAnalysis(model, (x,))
    fca.unsupported_ops_warnings(False)
    fca.uncalled_modules_warnings(False)
    by_op = fca.by_operator()
    return sum(by_op.get(k, 0) for k in ("conv", "linear", "matmul", "bmm", "einsum", "addmm"))


CASES = {
    "cnn": (SmallCNN, lambda: torch.randn(2, 3, 32, 32)),
    "encoder": (TinyEncoder, lambda: torch.randn(2, 8, 32)),
    "embedding": (EmbedLinear, lambda: torch.randint(0, 100, (2, 7))),
}


@pytest.mark.parametrize(
    ("name", "dynamo"),
    [
        ("cnn", False),
        ("encoder", False),
        ("embedding", False),
        ("encoder", True),
    ],
)
def test_agrees_with_torch(tmp_path: Path, name: str, dynamo: bool) -> None:
    factory, make_input = CASES[name]
    model, x = _trained_like(factory()), make_input()
    path = tmp_path / f"{name}.onnx"
    _export(model, x, path, dynamo=dynamo)
    count = count_onnx(path, input_shapes={"x": list(x.shape)})

    torch_macs = _torch_macs(model, x)
    torch_params = sum(p.numel() for p in model.parameters())
    assert torch_macs > 0
    assert count.macs == pytest.approx(torch_macs, rel=0.01)
    assert count.params == pytest.approx(torch_params, rel=0.01)
    if name != "cnn":  # the CNN's BatchNorms are folded into its convs by the exporter
        assert count.params == torch_params
    assert count.batch == x.shape[0]
    assert all(r.op_class in OP_CLASSES and r.supported for r in count.ops)
    if name == "encoder":  # module scopes: TorchScript node names, or dynamo's name_scopes metadata
        scopes = {r.scope for r in count.ops if r.op == "onnx::MatMul"}
        assert {"blocks.0.attn.qkv", "blocks.1.mlp.0", "blocks.0.attn"} <= scopes


def test_merged_equal_weights_still_count(tmp_path: Path) -> None:
    # Untrained: every LayerNorm weight is ones. The TorchScript exporter keeps one initializer
    # and turns the others into Identity nodes; PyTorch counts each of them.
    model, x = TinyEncoder().eval(), torch.randn(1, 8, 32)
    _export(model, x, tmp_path / "enc.onnx", dynamo=False)
    count = count_onnx(tmp_path / "enc.onnx")
    assert any(r.op == "onnx::Identity" for r in count.ops)
    assert count.params == sum(p.numel() for p in model.parameters())


def test_hand_computed_encoder_macs(tmp_path: Path) -> None:
    model, x = _trained_like(TinyEncoder()), torch.randn(2, 8, 32)
    _export(model, x, tmp_path / "enc.onnx", dynamo=False)
    count = count_onnx(tmp_path / "enc.onnx", input_shapes={"x": [2, 8, 32]})
    tokens, d, heads, seq = 16, 32, 4, 8
    linear = tokens * (d * 3 * d + d * d + d * 4 * d + 4 * d * d)
    attention = 2 * heads * seq * seq * (d // heads) * 2  # q@k^T and a@v, batch 2
    assert count.macs == 2 * (linear + attention)
    softmax = [r for r in count.ops if r.op == "onnx::Softmax"]
    assert len(softmax) == 2 and all(r.flops == 3 * 2 * heads * seq * seq for r in softmax)


def test_torchscript_scopes_and_classes(tmp_path: Path) -> None:
    model, x = _trained_like(SmallCNN()), torch.randn(1, 3, 16, 16)
    _export(model, x, tmp_path / "cnn.onnx", dynamo=False)
    count = count_onnx(tmp_path / "cnn.onnx")
    convs = {r.scope: r.op_class for r in count.ops if r.op == "onnx::Conv"}
    assert convs == {"stem.0": "conv", "dw": "dwconv", "pw": "conv", "head": "conv"}
    # a free batch dimension: 1 by default, or as given
    four = count_onnx(tmp_path / "cnn.onnx", input_shapes={"x": [4, 3, 16, 16]})
    assert four.macs == 4 * count.macs and four.batch == 4

    enc = tmp_path / "enc.onnx"
    _export(_trained_like(TinyEncoder()), torch.randn(1, 8, 32), enc, dynamo=False)
    scopes = {r.scope for r in count_onnx(enc).ops if r.op == "onnx::MatMul"}
    assert {"blocks.0.attn.qkv", "blocks.1.mlp.0", "blocks.0.attn"} <= scopes


def test_truncated_real_model(tmp_path: Path) -> None:
    path = tmp_path / "cnn.onnx"
    _export(_trained_like(SmallCNN()), torch.randn(1, 3, 16, 16), path, dynamo=False)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 1, 100):
        path.write_bytes(data[:cut])
        with pytest.raises(ModelError, match=r"cnn\.onnx"):
            count_onnx(path)


def test_deterministic_and_fast(tmp_path: Path) -> None:
    path = tmp_path / "enc.onnx"
    _export(_trained_like(TinyEncoder(d=64, depth=4)), torch.randn(1, 16, 64), path, dynamo=False)
    start = time.perf_counter()
    first = count_onnx(path)
    assert time.perf_counter() - start < 1.0
    assert first.to_json() == count_onnx(path).to_json()
    assert ModelCount.from_json(first.to_json()) == first
