"""More reference architectures, written from their papers with torchvision's module layout.

torchvision cannot be imported beside the CPU torch here, so each builder reproduces the layer
structure of ``torchvision.models`` (same modules, same widths, same biases) so that its parameter
count matches torchvision's to the unit and its MACs can be compared with the figures published
with torchvision's ImageNet weights. Only inference behaviour is reproduced: dropout and stochastic
depth are identities (as they are in ``eval()``), and initialisation is PyTorch's default.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from tests.models.zoo import Bottleneck, ResNet, _make_divisible

Act = Callable[..., nn.Module]


# ----------------------------------------------------------------------------- shared pieces
class Permute(nn.Module):
    def __init__(self, dims: list[int]) -> None:
        super().__init__()
        self.dims = dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.permute(x, self.dims)


class StochasticDepth(nn.Module):
    """torchvision.ops.StochasticDepth at inference: the identity."""

    def __init__(self, p: float, mode: str = "row") -> None:
        super().__init__()
        self.p, self.mode = p, mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def conv_norm_act(
    cin: int,
    cout: int,
    k: int = 3,
    stride: int = 1,
    groups: int = 1,
    norm: Callable[[int], nn.Module] | None = nn.BatchNorm2d,
    act: Act | None = nn.ReLU,
    padding: int | None = None,
    bias: bool | None = None,
) -> nn.Sequential:
    """torchvision.ops.Conv2dNormActivation: conv (bias only without a norm), norm, activation."""
    padding = (k - 1) // 2 if padding is None else padding
    bias = norm is None if bias is None else bias
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, padding, groups=groups, bias=bias)]
    if norm is not None:
        layers.append(norm(cout))
    if act is not None:
        layers.append(act(inplace=True))
    return nn.Sequential(*layers)


class SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation: pool, 1x1 conv, act, 1x1 conv, gate, scale."""

    def __init__(
        self, channels: int, squeeze: int, act: Act = nn.ReLU, gate: Act = nn.Sigmoid
    ) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = act()
        self.scale_activation = gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return scale * x


# ----------------------------------------------------------------------------- MobileNetV3-Large
def _bn_v3(c: int) -> nn.Module:
    return nn.BatchNorm2d(c, eps=0.001, momentum=0.01)


class InvertedResidualV3(nn.Module):
    def __init__(
        self, cin: int, k: int, exp: int, cout: int, se: bool, hs: bool, stride: int
    ) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        act: Act = nn.Hardswish if hs else nn.ReLU
        layers: list[nn.Module] = []
        if exp != cin:
            layers.append(conv_norm_act(cin, exp, 1, norm=_bn_v3, act=act))
        layers.append(conv_norm_act(exp, exp, k, stride, groups=exp, norm=_bn_v3, act=act))
        if se:
            layers.append(SqueezeExcitation(exp, _make_divisible(exp // 4, 8), gate=nn.Hardsigmoid))
        layers.append(conv_norm_act(exp, cout, 1, norm=_bn_v3, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return out + x if self.use_res_connect else out


class MobileNetV3(nn.Module):
    # input, kernel, expanded, output, SE, hard-swish, stride (torchvision's "large" table)
    LARGE = (
        (16, 3, 16, 16, False, False, 1),
        (16, 3, 64, 24, False, False, 2),
        (24, 3, 72, 24, False, False, 1),
        (24, 5, 72, 40, True, False, 2),
        (40, 5, 120, 40, True, False, 1),
        (40, 5, 120, 40, True, False, 1),
        (40, 3, 240, 80, False, True, 2),
        (80, 3, 200, 80, False, True, 1),
        (80, 3, 184, 80, False, True, 1),
        (80, 3, 184, 80, False, True, 1),
        (80, 3, 480, 112, True, True, 1),
        (112, 3, 672, 112, True, True, 1),
        (112, 5, 672, 160, True, True, 2),
        (160, 5, 960, 160, True, True, 1),
        (160, 5, 960, 160, True, True, 1),
    )

    def __init__(
        self, setting: tuple[tuple, ...], last_channel: int = 1280, num_classes: int = 1000
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            conv_norm_act(3, setting[0][0], 3, 2, norm=_bn_v3, act=nn.Hardswish)
        ]
        layers += [InvertedResidualV3(*cfg) for cfg in setting]
        last_in = setting[-1][3]
        layers.append(conv_norm_act(last_in, 6 * last_in, 1, norm=_bn_v3, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(6 * last_in, last_channel),
            nn.Hardswish(inplace=True),
            nn.Dropout(0.2, inplace=True),
            nn.Linear(last_channel, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def mobilenet_v3_large() -> nn.Module:
    return MobileNetV3(MobileNetV3.LARGE)


# ----------------------------------------------------------------------------- EfficientNet-B0
class MBConv(nn.Module):
    def __init__(
        self, expand: int, k: int, stride: int, cin: int, cout: int, sd_prob: float
    ) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        exp = _make_divisible(cin * expand, 8)
        layers: list[nn.Module] = []
        if exp != cin:
            layers.append(conv_norm_act(cin, exp, 1, act=nn.SiLU))
        layers.append(conv_norm_act(exp, exp, k, stride, groups=exp, act=nn.SiLU))
        layers.append(SqueezeExcitation(exp, max(1, cin // 4), act=nn.SiLU))
        layers.append(conv_norm_act(exp, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(sd_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        if self.use_res_connect:
            out = self.stochastic_depth(out) + x
        return out


class EfficientNet(nn.Module):
    # expand ratio, kernel, stride, input, output, layers (B0: width and depth multipliers 1.0)
    B0 = (
        (1, 3, 1, 32, 16, 1),
        (6, 3, 2, 16, 24, 2),
        (6, 5, 2, 24, 40, 2),
        (6, 3, 2, 40, 80, 3),
        (6, 5, 1, 80, 112, 3),
        (6, 5, 2, 112, 192, 4),
        (6, 3, 1, 192, 320, 1),
    )

    def __init__(
        self,
        setting: tuple[tuple, ...],
        dropout: float = 0.2,
        sd_prob: float = 0.2,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [conv_norm_act(3, setting[0][3], 3, 2, act=nn.SiLU)]
        total = sum(cfg[-1] for cfg in setting)
        block_id = 0
        for expand, k, stride, cin, cout, n in setting:
            stage: list[nn.Module] = []
            for i in range(n):
                p = sd_prob * block_id / total
                stage.append(
                    MBConv(expand, k, stride if i == 0 else 1, cin if i == 0 else cout, cout, p)
                )
                block_id += 1
            layers.append(nn.Sequential(*stage))
        last_in = setting[-1][4]
        layers.append(conv_norm_act(last_in, 4 * last_in, 1, act=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout, inplace=True), nn.Linear(4 * last_in, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def efficientnet_b0() -> nn.Module:
    return EfficientNet(EfficientNet.B0)


# ----------------------------------------------------------------------------- DenseNet-121
class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(self.relu1(self.norm1(x)))
        return self.conv2(self.relu2(self.norm2(x)))


class DenseBlock(nn.ModuleDict):
    def __init__(self, n: int, cin: int, bn_size: int, growth: int) -> None:
        super().__init__()
        for i in range(n):
            self.add_module(f"denselayer{i + 1}", DenseLayer(cin + i * growth, growth, bn_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(cin)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(cin, cout, 1, bias=False)
        self.pool = nn.AvgPool2d(2, 2)


class DenseNet(nn.Module):
    def __init__(
        self,
        growth: int = 32,
        blocks: tuple[int, ...] = (6, 12, 24, 16),
        init: int = 64,
        bn_size: int = 4,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict(
                [
                    ("conv0", nn.Conv2d(3, init, 7, 2, 3, bias=False)),
                    ("norm0", nn.BatchNorm2d(init)),
                    ("relu0", nn.ReLU(inplace=True)),
                    ("pool0", nn.MaxPool2d(3, 2, 1)),
                ]
            )
        )
        c = init
        for i, n in enumerate(blocks):
            self.features.add_module(f"denseblock{i + 1}", DenseBlock(n, c, bn_size, growth))
            c += n * growth
            if i != len(blocks) - 1:
                self.features.add_module(f"transition{i + 1}", Transition(c, c // 2))
                c //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(c))
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.features(x), inplace=True)
        out = torch.flatten(F.adaptive_avg_pool2d(out, (1, 1)), 1)
        return self.classifier(out)


def densenet121() -> nn.Module:
    return DenseNet()


# ----------------------------------------------------------------------------- ConvNeXt-Tiny
class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over channels of an NCHW tensor, via permutes (torchvision.models.convnext)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


def _ln2d(c: int) -> nn.Module:
    return LayerNorm2d(c, eps=1e-6)


class CNBlock(nn.Module):
    def __init__(self, dim: int, layer_scale: float, sd_prob: float) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, 7, padding=3, groups=dim, bias=True),
            Permute([0, 2, 3, 1]),
            nn.LayerNorm(dim, eps=1e-6),
            nn.Linear(dim, 4 * dim),
            nn.GELU(),
            nn.Linear(4 * dim, dim),
            Permute([0, 3, 1, 2]),
        )
        self.layer_scale = nn.Parameter(torch.ones(dim, 1, 1) * layer_scale)
        self.stochastic_depth = StochasticDepth(sd_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.stochastic_depth(self.layer_scale * self.block(x))
        result += x
        return result


class ConvNeXt(nn.Module):
    # (input channels, output channels or None, blocks)
    TINY = ((96, 192, 3), (192, 384, 3), (384, 768, 9), (768, None, 3))

    def __init__(
        self,
        setting: tuple[tuple, ...],
        sd_prob: float = 0.1,
        layer_scale: float = 1e-6,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        first = setting[0][0]
        layers: list[nn.Module] = [
            conv_norm_act(3, first, 4, 4, norm=_ln2d, act=None, padding=0, bias=True)
        ]
        total = sum(cfg[2] for cfg in setting)
        block_id = 0
        for cin, cout, n in setting:
            stage: list[nn.Module] = []
            for _ in range(n):
                stage.append(CNBlock(cin, layer_scale, sd_prob * block_id / (total - 1.0)))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if cout is not None:
                layers.append(nn.Sequential(_ln2d(cin), nn.Conv2d(cin, cout, 2, 2)))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        last = setting[-1][1] if setting[-1][1] is not None else setting[-1][0]
        self.classifier = nn.Sequential(_ln2d(last), nn.Flatten(1), nn.Linear(last, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.avgpool(self.features(x)))


def convnext_tiny() -> nn.Module:
    return ConvNeXt(ConvNeXt.TINY)


# ----------------------------------------------------------------------------- Swin-T (v1)
def _patch_merging_pad(x: torch.Tensor) -> torch.Tensor:
    h, w, _ = x.shape[-3:]
    x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
    x0 = x[..., 0::2, 0::2, :]
    x1 = x[..., 1::2, 0::2, :]
    x2 = x[..., 0::2, 1::2, :]
    x3 = x[..., 1::2, 1::2, :]
    return torch.cat([x0, x1, x2, x3], -1)


class PatchMerging(nn.Module):
    def __init__(self, dim: int, norm: Callable[[int], nn.Module]) -> None:
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm(4 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.reduction(self.norm(_patch_merging_pad(x)))


def shifted_window_attention(
    x: torch.Tensor,
    qkv_weight: torch.Tensor,
    proj_weight: torch.Tensor,
    relative_position_bias: torch.Tensor,
    window_size: list[int],
    num_heads: int,
    shift_size: list[int],
    qkv_bias: torch.Tensor | None = None,
    proj_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """torchvision's functional shifted-window attention (Swin v1, inference: no dropout)."""
    b, h, w, c = x.shape
    pad_r = (window_size[1] - w % window_size[1]) % window_size[1]
    pad_b = (window_size[0] - h % window_size[0]) % window_size[0]
    x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    _, pad_h, pad_w, _ = x.shape
    shift_size = list(shift_size)
    if window_size[0] >= pad_h:
        shift_size[0] = 0
    if window_size[1] >= pad_w:
        shift_size[1] = 0
    if sum(shift_size) > 0:
        x = torch.roll(x, shifts=(-shift_size[0], -shift_size[1]), dims=(1, 2))

    num_windows = (pad_h // window_size[0]) * (pad_w // window_size[1])
    x = x.view(
        b, pad_h // window_size[0], window_size[0], pad_w // window_size[1], window_size[1], c
    )
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(b * num_windows, window_size[0] * window_size[1], c)

    qkv = F.linear(x, qkv_weight, qkv_bias)
    qkv = qkv.reshape(x.size(0), x.size(1), 3, num_heads, c // num_heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    q = q * (c // num_heads) ** -0.5
    attn = q.matmul(k.transpose(-2, -1))
    attn = attn + relative_position_bias

    if sum(shift_size) > 0:
        attn_mask = x.new_zeros((pad_h, pad_w))
        h_slices = ((0, -window_size[0]), (-window_size[0], -shift_size[0]), (-shift_size[0], None))
        w_slices = ((0, -window_size[1]), (-window_size[1], -shift_size[1]), (-shift_size[1], None))
        count = 0
        for hs in h_slices:
            for ws in w_slices:
                attn_mask[hs[0] : hs[1], ws[0] : ws[1]] = count
                count += 1
        attn_mask = attn_mask.view(
            pad_h // window_size[0], window_size[0], pad_w // window_size[1], window_size[1]
        )
        attn_mask = attn_mask.permute(0, 2, 1, 3).reshape(
            num_windows, window_size[0] * window_size[1]
        )
        attn_mask = attn_mask.unsqueeze(1) - attn_mask.unsqueeze(2)
        attn_mask = attn_mask.masked_fill(attn_mask != 0, -100.0).masked_fill(attn_mask == 0, 0.0)
        attn = attn.view(x.size(0) // num_windows, num_windows, num_heads, x.size(1), x.size(1))
        attn = attn + attn_mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, num_heads, x.size(1), x.size(1))

    attn = F.softmax(attn, dim=-1)
    x = attn.matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), c)
    x = F.linear(x, proj_weight, proj_bias)

    # reverse windows, shift back, crop the padding
    x = x.view(
        b, pad_h // window_size[0], pad_w // window_size[1], window_size[0], window_size[1], c
    )
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(b, pad_h, pad_w, c)
    if sum(shift_size) > 0:
        x = torch.roll(x, shifts=(shift_size[0], shift_size[1]), dims=(1, 2))
    return x[:, :h, :w, :].contiguous()


class ShiftedWindowAttention(nn.Module):
    def __init__(
        self, dim: int, window_size: list[int], shift_size: list[int], num_heads: int
    ) -> None:
        super().__init__()
        self.window_size, self.shift_size, self.num_heads = window_size, shift_size, num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim, bias=True)
        wh, ww = window_size
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * wh - 1) * (2 * ww - 1), num_heads)
        )
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(wh), torch.arange(ww), indexing="ij"))
        flat = torch.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += wh - 1
        rel[:, :, 1] += ww - 1
        rel[:, :, 0] *= 2 * ww - 1
        self.register_buffer("relative_position_index", rel.sum(-1).flatten())

    def get_relative_position_bias(self) -> torch.Tensor:
        n = self.window_size[0] * self.window_size[1]
        bias = self.relative_position_bias_table[self.relative_position_index]
        return bias.view(n, n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return shifted_window_attention(
            x,
            self.qkv.weight,
            self.proj.weight,
            self.get_relative_position_bias(),
            self.window_size,
            self.num_heads,
            shift_size=self.shift_size,
            qkv_bias=self.qkv.bias,
            proj_bias=self.proj.bias,
        )


def mlp(dim: int, hidden: int) -> nn.Sequential:
    """torchvision.ops.MLP(dim, [hidden, dim], activation_layer=nn.GELU, dropout=0.0)."""
    return nn.Sequential(
        nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(0.0), nn.Linear(hidden, dim), nn.Dropout(0.0)
    )


class SwinTransformerBlock(nn.Module):
    def __init__(
        self,
        dim: int,
        heads: int,
        window_size: list[int],
        shift_size: list[int],
        mlp_ratio: float,
        sd_prob: float,
        norm: Callable[[int], nn.Module],
    ) -> None:
        super().__init__()
        self.norm1 = norm(dim)
        self.attn = ShiftedWindowAttention(dim, window_size, shift_size, heads)
        self.stochastic_depth = StochasticDepth(sd_prob)
        self.norm2 = norm(dim)
        self.mlp = mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinTransformer(nn.Module):
    def __init__(
        self,
        patch: int = 4,
        embed_dim: int = 96,
        depths: tuple[int, ...] = (2, 2, 6, 2),
        heads: tuple[int, ...] = (3, 6, 12, 24),
        window: int = 7,
        mlp_ratio: float = 4.0,
        sd_prob: float = 0.2,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()

        def norm(c: int) -> nn.Module:
            return nn.LayerNorm(c, eps=1e-5)

        layers: list[nn.Module] = [
            nn.Sequential(
                nn.Conv2d(3, embed_dim, patch, patch), Permute([0, 2, 3, 1]), norm(embed_dim)
            )
        ]
        total = sum(depths)
        block_id = 0
        for i, depth in enumerate(depths):
            dim = embed_dim * 2**i
            stage: list[nn.Module] = []
            for j in range(depth):
                shift = [0 if j % 2 == 0 else window // 2] * 2
                p = sd_prob * block_id / (total - 1)
                stage.append(
                    SwinTransformerBlock(dim, heads[i], [window, window], shift, mlp_ratio, p, norm)
                )
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if i < len(depths) - 1:
                layers.append(PatchMerging(dim, norm))
        self.features = nn.Sequential(*layers)
        last = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm(last)
        self.permute = Permute([0, 3, 1, 2])
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(last, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.permute(self.norm(self.features(x)))
        return self.head(self.flatten(self.avgpool(x)))


def swin_t() -> nn.Module:
    return SwinTransformer()


# ----------------------------------------------------------------------------- ResNeXt / Wide ResNet
def resnext50_32x4d() -> nn.Module:
    return ResNet(Bottleneck, [3, 4, 6, 3], groups=32, width_per_group=4)


def wide_resnet50_2() -> nn.Module:
    return ResNet(Bottleneck, [3, 4, 6, 3], width_per_group=128)


# ----------------------------------------------------------------------------- SqueezeNet 1.1
class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, e1: int, e3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat(
            [
                self.expand1x1_activation(self.expand1x1(x)),
                self.expand3x3_activation(self.expand3x3(x)),
            ],
            1,
        )


class SqueezeNet11(nn.Module):
    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(0.5),
            nn.Conv2d(512, num_classes, 1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


def squeezenet1_1() -> nn.Module:
    return SqueezeNet11()


# ----------------------------------------------------------------------------- ShuffleNetV2 x1.0
def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        bf = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False),
                nn.BatchNorm2d(cin),
                nn.Conv2d(cin, bf, 1, bias=False),
                nn.BatchNorm2d(bf),
                nn.ReLU(inplace=True),
            )
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(cin if stride > 1 else bf, bf, 1, bias=False),
            nn.BatchNorm2d(bf),
            nn.ReLU(inplace=True),
            nn.Conv2d(bf, bf, 3, stride, 1, groups=bf, bias=False),
            nn.BatchNorm2d(bf),
            nn.Conv2d(bf, bf, 1, bias=False),
            nn.BatchNorm2d(bf),
            nn.ReLU(inplace=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(
        self,
        repeats: tuple[int, ...] = (4, 8, 4),
        channels: tuple[int, ...] = (24, 116, 232, 464, 1024),
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, channels[0], 3, 2, 1, bias=False),
            nn.BatchNorm2d(channels[0]),
            nn.ReLU(inplace=True),
        )
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = channels[0]
        for name, n, cout in zip(("stage2", "stage3", "stage4"), repeats, channels[1:]):
            setattr(
                self,
                name,
                nn.Sequential(
                    ShuffleUnit(cin, cout, 2), *[ShuffleUnit(cout, cout, 1) for _ in range(n - 1)]
                ),
            )
            cin = cout
        self.conv5 = nn.Sequential(
            nn.Conv2d(cin, channels[-1], 1, bias=False),
            nn.BatchNorm2d(channels[-1]),
            nn.ReLU(inplace=True),
        )
        self.fc = nn.Linear(channels[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean([2, 3]))


def shufflenet_v2_x1_0() -> nn.Module:
    return ShuffleNetV2()


# ----------------------------------------------------------------------------- RegNetY-400MF
def regnet_block_params(
    depth: int, w_0: int, w_a: float, w_m: float, group_width: int, bottleneck: float = 1.0
) -> list[tuple[int, int, int, int]]:
    """RegNet's quantised linear widths -> per stage (width, depth, group width, stride 2)."""
    quant = 8
    widths_cont = [i * w_a + w_0 for i in range(depth)]
    capacity = [round(math.log(w / w_0) / math.log(w_m)) for w in widths_cont]
    widths = [int(round(w_0 * w_m**c / quant) * quant) for c in capacity]
    stage_widths: list[int] = []
    stage_depths: list[int] = []
    for w in widths:
        if stage_widths and stage_widths[-1] == w:
            stage_depths[-1] += 1
        else:
            stage_widths.append(w)
            stage_depths.append(1)
    out = []
    for w, d in zip(stage_widths, stage_depths):
        w_bot = int(w * bottleneck)
        g = min(group_width, w_bot)
        w = int(_make_divisible(w_bot, g) / bottleneck)
        out.append((w, d, g, 2))
    return out


class RegNetBottleneck(nn.Module):
    def __init__(
        self,
        cin: int,
        cout: int,
        stride: int,
        group_width: int,
        bottleneck: float,
        se_ratio: float | None,
    ) -> None:
        super().__init__()
        self.proj = None
        if cin != cout or stride != 1:
            self.proj = conv_norm_act(cin, cout, 1, stride, act=None)
        w_b = int(round(cout * bottleneck))
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        layers["a"] = conv_norm_act(cin, w_b, 1)
        layers["b"] = conv_norm_act(w_b, w_b, 3, stride, groups=w_b // group_width)
        if se_ratio:
            layers["se"] = SqueezeExcitation(w_b, int(round(se_ratio * cin)))
        layers["c"] = conv_norm_act(w_b, cout, 1, act=None)
        self.f = nn.Sequential(layers)
        self.activation = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.proj is None else self.proj(x)
        return self.activation(idt + self.f(x))


class RegNet(nn.Module):
    def __init__(
        self,
        stages: list[tuple[int, int, int, int]],
        se_ratio: float | None,
        stem: int = 32,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        self.stem = conv_norm_act(3, stem, 3, 2)
        blocks: OrderedDict[str, nn.Module] = OrderedDict()
        c = stem
        for i, (w, d, g, s) in enumerate(stages):
            stage = nn.Sequential()
            for j in range(d):
                stage.add_module(
                    f"block{i + 1}-{j}",
                    RegNetBottleneck(c if j == 0 else w, w, s if j == 0 else 1, g, 1.0, se_ratio),
                )
            blocks[f"block{i + 1}"] = stage
            c = w
        self.trunk_output = nn.Sequential(blocks)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.trunk_output(self.stem(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def regnet_y_400mf() -> nn.Module:
    return RegNet(regnet_block_params(16, 48, 27.89, 2.09, 8), se_ratio=0.25)
