"""Per-op rules against hand-computed numbers on tiny modules, and whole-model reference figures."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from ha_bot.count_torch import count_module
from tests.models import zoo


class Fn(nn.Module):
    def __init__(self, fn, *mods: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        self.mods = nn.ModuleList(mods)

    def forward(self, *xs):
        return self.fn(self, *xs)


def ops_of(model, *inputs):
    c = count_module(model, inputs)
    return c, [o for o in c.ops if o.op_class != "view"]


def test_conv2d_with_bias_hand_computed():
    conv = nn.Conv2d(3, 8, 3, padding=1)
    c, ops = ops_of(conv, torch.randn(2, 3, 10, 10))
    (op,) = ops
    out = 2 * 8 * 10 * 10
    assert op.op_class == "conv"
    assert op.macs == out * 3 * 9
    assert op.flops == 2 * out * 27 + out
    assert op.act_in == 2 * 3 * 100 and op.w_in == 8 * 3 * 9 + 8 and op.out == out
    assert c.params == 8 * 27 + 8


def test_depthwise_and_grouped_conv():
    dw = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
    _, (op,) = ops_of(dw, torch.randn(1, 16, 8, 8))
    assert op.op_class == "dwconv" and op.macs == 16 * 64 * 9
    grouped = nn.Conv2d(16, 32, 3, padding=1, groups=4, bias=False)
    _, (op,) = ops_of(grouped, torch.randn(1, 16, 8, 8))
    assert op.op_class == "conv" and op.macs == 32 * 64 * 4 * 9


def test_linear_on_3d_input():
    _, (op,) = ops_of(nn.Linear(64, 32), torch.randn(2, 5, 64))
    assert op.macs == 2 * 5 * 32 * 64
    assert op.flops == 2 * op.macs + 2 * 5 * 32


@pytest.mark.parametrize(
    ("fn", "shapes", "macs", "extra"),
    [
        (lambda m, a, b: a @ b, [(4, 8, 16), (4, 16, 32)], 4 * 8 * 32 * 16, 0),
        (lambda m, a, b: torch.bmm(a, b), [(4, 8, 16), (4, 16, 32)], 4 * 8 * 32 * 16, 0),
        (
            lambda m, c, a, b: torch.baddbmm(c, a, b),
            [(4, 8, 32), (4, 8, 16), (4, 16, 32)],
            4 * 8 * 32 * 16,
            4 * 8 * 32,
        ),
        (
            lambda m, c, a, b: torch.baddbmm(c, a, b, alpha=0.5),
            [(4, 8, 32), (4, 8, 16), (4, 16, 32)],
            4 * 8 * 32 * 16,
            2 * 4 * 8 * 32,
        ),
        (
            lambda m, a, b: torch.einsum("bij,bjk->bik", a, b),
            [(4, 8, 16), (4, 16, 32)],
            4 * 8 * 32 * 16,
            0,
        ),
    ],
)
def test_matmul_family(fn, shapes, macs, extra):
    _, ops = ops_of(Fn(fn), *[torch.randn(*s) for s in shapes])
    mm = [o for o in ops if o.op_class == "matmul"]
    assert len(mm) == 1
    assert mm[0].macs == macs
    assert mm[0].flops == 2 * macs + extra


@pytest.mark.parametrize(
    ("causal", "hq", "hkv", "lq", "lk"),
    [(False, 8, 8, 16, 16), (True, 8, 8, 16, 16), (True, 8, 2, 16, 16), (False, 4, 4, 4, 10)],
)
def test_sdpa_causal_and_grouped_query(causal, hq, hkv, lq, lk):
    b, e = 2, 32
    q, k, v = torch.randn(b, hq, lq, e), torch.randn(b, hkv, lk, e), torch.randn(b, hkv, lk, e)
    model = Fn(
        lambda m, q, k, v: F.scaled_dot_product_attention(
            q, k, v, is_causal=causal, enable_gqa=hq != hkv
        )
    )
    _, ops = ops_of(model, q, k, v)
    (op,) = [o for o in ops if o.op_class == "attention"]
    pairs = sum(min(i + 1, lk) for i in range(lq)) if causal else lq * lk
    assert op.macs == b * hq * pairs * (e + e)
    assert op.flops == 2 * op.macs + 4 * b * hq * pairs


def test_transformer_encoder_fast_path_is_made_visible():
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    c, ops = ops_of(layer, torch.randn(2, 10, 64))
    kinds = {o.op for o in ops}
    assert "aten::_transformer_encoder_layer_fwd" not in kinds
    assert (
        "aten::scaled_dot_product_attention" in kinds
        or "aten::bmm" in kinds
        or "aten::matmul" in kinds
    )
    tokens = 20
    linear_macs = tokens * (3 * 64 * 64 + 64 * 64 + 2 * 64 * 128)
    attn_macs = 2 * 4 * 10 * 10 * 16 * 2
    assert c.macs == linear_macs + attn_macs
    assert all(o.supported for o in ops)


@pytest.mark.parametrize(
    ("module", "shape", "cls", "flops"),
    [
        (nn.ReLU(), (2, 8, 4, 4), "elementwise", 256),
        (nn.GELU(), (2, 8, 4, 4), "elementwise", 256),
        (nn.SiLU(), (2, 8, 4, 4), "elementwise", 256),
        (nn.Softmax(dim=-1), (2, 8, 4, 4), "reduction", 3 * 256),
        (nn.BatchNorm2d(8), (2, 8, 4, 4), "norm", 2 * 256),
        (nn.LayerNorm(4), (2, 8, 4, 4), "norm", 6 * 256),
        (nn.LayerNorm(4, elementwise_affine=False), (2, 8, 4, 4), "norm", 4 * 256),
        (nn.GroupNorm(2, 8), (2, 8, 4, 4), "norm", 6 * 256),
        (nn.RMSNorm(4), (2, 8, 4, 4), "norm", 5 * 256),
        (nn.MaxPool2d(2), (2, 8, 4, 4), "pool", 64 * 4),
        (nn.AvgPool2d(2), (2, 8, 4, 4), "pool", 64 * 4),
        (nn.AdaptiveAvgPool2d(1), (2, 8, 4, 4), "pool", 256),
        (nn.Upsample(scale_factor=2, mode="nearest"), (2, 8, 4, 4), "pool", 0),
        (nn.Upsample(scale_factor=2, mode="bilinear"), (2, 8, 4, 4), "pool", 4 * 1024),
    ],
)
def test_non_matrix_rules(module, shape, cls, flops):
    _, ops = ops_of(module, torch.randn(*shape))
    real = [o for o in ops if o.op_class == cls]
    assert real, [o.op for o in ops]
    assert sum(o.flops for o in real) == flops
    assert all(o.supported for o in ops)


def test_embedding_counts_gathered_rows_not_the_table():
    emb = nn.Embedding(50_000, 64)
    _, (op,) = ops_of(emb, torch.zeros(2, 7, dtype=torch.long))
    assert op.op_class == "embedding"
    assert op.w_in == 2 * 7 * 64  # the rows read, not 50 000 x 64
    assert op.fixed_bytes == 2 * 7 * 8  # int64 indices
    assert op.flops == 0


def test_unknown_op_gets_a_record_with_bytes():
    model = Fn(lambda m, x: torch.special.bessel_j0(x))
    _, ops = ops_of(model, torch.randn(4, 4))
    (op,) = ops
    assert not op.supported and op.op_class == "other"
    assert op.act_in == 16 and op.out == 16


def test_shared_module_params_once_work_per_call():
    lin = nn.Linear(8, 8, bias=False)
    model = Fn(lambda m, x: m.mods[0](m.mods[0](x)), lin)
    c, ops = ops_of(model, torch.randn(1, 8))
    assert c.params == 64
    assert c.macs == 2 * 64
    assert [o.w_in for o in ops] == [64, 64]


def test_repeated_analyses_do_not_accumulate():
    model = zoo.tiny_decoder()
    ids = torch.zeros(1, 16, dtype=torch.long)
    first, second = count_module(model, (ids,)), count_module(model, (ids,))
    assert first == second


def test_views_alias_storage_and_contiguous_after_permute_copies():
    model = Fn(lambda m, x: x.view(4, 8).t().contiguous() + 1)
    _, ops = ops_of(model, torch.randn(32))
    assert [o.op_class for o in ops] == ["memory", "elementwise"]


def test_meta_device_trace():
    with torch.device("meta"):
        model = zoo.tiny_decoder()
    c = count_module(model, (torch.zeros(1, 16, dtype=torch.long, device="meta"),))
    ref = count_module(zoo.tiny_decoder(), (torch.zeros(1, 16, dtype=torch.long),))
    assert c.macs == ref.macs and c.params == ref.params


# torchvision's published figures (its "GFLOPS" column counts MACs) and BERT-base's 22.35 GFLOPs
REFERENCE = [
    ("resnet18", (1, 3, 224, 224), 1.81e9, 11_689_512),
    ("resnet50", (1, 3, 224, 224), 4.09e9, 25_557_032),
    ("mobilenet_v2", (1, 3, 224, 224), 0.30e9, 3_504_872),
    ("vgg16", (1, 3, 224, 224), 15.47e9, 138_357_544),
    ("vit_b_16", (1, 3, 224, 224), 17.56e9, 86_567_656),
]


@pytest.mark.parametrize(("name", "shape", "macs", "params"), REFERENCE)
def test_reference_architectures_within_one_percent(name, shape, macs, params):
    c = count_module(getattr(zoo, name)(), (torch.randn(*shape),))
    assert abs(c.macs - macs) / macs < 0.01
    assert abs(c.params - params) / params < 0.01
    assert all(o.supported for o in c.ops)


def test_bert_base_seq128_flops():
    c = count_module(zoo.bert_base(), (torch.zeros(1, 128, dtype=torch.long),))
    assert abs(c.flops - 22.35e9) / 22.35e9 < 0.01
    assert abs(2 * c.macs - 22.35e9) / 22.35e9 < 0.01


def test_reshape_of_a_non_contiguous_tensor_is_a_copy():
    model = Fn(lambda m, x: x.transpose(1, 2).reshape(2, -1) + 1)
    _, ops = ops_of(model, torch.randn(2, 3, 4))
    assert [o.op_class for o in ops] == ["memory", "elementwise"]
    model = Fn(lambda m, x: x.reshape(2, -1) + 1)  # contiguous: a view, no kernel
    _, ops = ops_of(model, torch.randn(2, 3, 4))
    assert [o.op_class for o in ops] == ["elementwise"]


def test_batched_matmul_and_attention_record_the_size_of_one_product():
    _, ops = ops_of(Fn(lambda m, a, b: a @ b), torch.randn(4, 8, 16), torch.randn(4, 16, 32))
    assert ops[0].unit_flops == 2 * 8 * 32 * 16
    _, ops = ops_of(nn.Linear(16, 8), torch.randn(4, 5, 16))
    assert ops[0].unit_flops == 0  # one GEMM over all rows
    q = torch.randn(2, 4, 10, 8)
    _, ops = ops_of(Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v)), q, q, q)
    (att,) = [o for o in ops if o.op_class == "attention"]
    assert att.unit_flops * 2 * 4 == att.flops
