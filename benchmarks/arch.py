"""More reference architectures built from code, for the accuracy benchmark.

Written from the papers and torchvision's / Hugging Face's layer layouts (torchvision itself is not
installed beside CPU torch here). Pretrained weights do not matter for latency: every model is
randomly initialised. tests/models/zoo.py holds ResNet, VGG, MobileNetV2, ViT, BERT; they are
reused here by import.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.models import zoo


def _div(v: float, divisor: int = 8) -> int:
    return zoo._make_divisible(v, divisor)


# ----------------------------------------------------------------------------- ResNet family
def resnet34() -> nn.Module:
    return zoo.ResNet(zoo.BasicBlock, [3, 4, 6, 3])


def resnet101() -> nn.Module:
    return zoo.ResNet(zoo.Bottleneck, [3, 4, 23, 3])


def wide_resnet50_2() -> nn.Module:
    return zoo.ResNet(zoo.Bottleneck, [3, 4, 6, 3], width_per_group=128)


def resnext50_32x4d() -> nn.Module:
    return zoo.ResNet(zoo.Bottleneck, [3, 4, 6, 3], groups=32, width_per_group=4)


# ----------------------------------------------------------------------------- MobileNetV2 with a width multiplier
def mobilenet_v2(width: float = 1.0) -> nn.Module:
    cfg = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
    cin = _div(32 * width)
    last = _div(1280 * max(1.0, width))
    feats: list[nn.Module] = [zoo._cbr(3, cin, 3, 2)]
    for t, c, n, s in cfg:
        cout = _div(c * width)
        for i in range(n):
            feats.append(zoo.InvertedResidual(cin, cout, s if i == 0 else 1, t))
            cin = cout
    feats.append(zoo._cbr(cin, last, 1, 1))
    return nn.Sequential(nn.Sequential(*feats), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(last, 1000))


# ----------------------------------------------------------------------------- MobileNetV3
class SqueezeExcite(nn.Module):
    def __init__(self, c: int, squeeze: int, act: type = nn.ReLU, gate: type = nn.Hardsigmoid) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, c, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.act(self.fc1(self.avgpool(x)))))


def _cba(cin: int, cout: int, k: int, s: int, groups: int = 1, act: type | None = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, (k - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class V3Block(nn.Module):
    def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, hs: bool, stride: int) -> None:
        super().__init__()
        act = nn.Hardswish if hs else nn.ReLU
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if exp != cin:
            layers.append(_cba(cin, exp, 1, 1, act=act))
        layers.append(_cba(exp, exp, k, stride, groups=exp, act=act))
        if se:
            layers.append(SqueezeExcite(exp, _div(exp // 4)))
        layers.append(_cba(exp, cout, 1, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.use_res else y


V3_LARGE = [
    (16, 3, 16, 16, False, False, 1), (16, 3, 64, 24, False, False, 2), (24, 3, 72, 24, False, False, 1),
    (24, 5, 72, 40, True, False, 2), (40, 5, 120, 40, True, False, 1), (40, 5, 120, 40, True, False, 1),
    (40, 3, 240, 80, False, True, 2), (80, 3, 200, 80, False, True, 1), (80, 3, 184, 80, False, True, 1),
    (80, 3, 184, 80, False, True, 1), (80, 3, 480, 112, True, True, 1), (112, 3, 672, 112, True, True, 1),
    (112, 5, 672, 160, True, True, 2), (160, 5, 960, 160, True, True, 1), (160, 5, 960, 160, True, True, 1),
]
V3_SMALL = [
    (16, 3, 16, 16, True, False, 2), (16, 3, 72, 24, False, False, 2), (24, 3, 88, 24, False, False, 1),
    (24, 5, 96, 40, True, True, 2), (40, 5, 240, 40, True, True, 1), (40, 5, 240, 40, True, True, 1),
    (40, 5, 120, 48, True, True, 1), (48, 5, 144, 48, True, True, 1), (48, 5, 288, 96, True, True, 2),
    (96, 5, 576, 96, True, True, 1), (96, 5, 576, 96, True, True, 1),
]


def _mobilenet_v3(cfg: list[tuple[int, int, int, int, bool, bool, int]], last: int) -> nn.Module:
    layers: list[nn.Module] = [_cba(3, 16, 3, 2, act=nn.Hardswish)]
    layers += [V3Block(*c) for c in cfg]
    cin = cfg[-1][3]
    layers.append(_cba(cin, 6 * cin, 1, 1, act=nn.Hardswish))
    return nn.Sequential(
        nn.Sequential(*layers), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(6 * cin, last), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(last, 1000),
    )


def mobilenet_v3_large() -> nn.Module:
    return _mobilenet_v3(V3_LARGE, 1280)


def mobilenet_v3_small() -> nn.Module:
    return _mobilenet_v3(V3_SMALL, 1024)


# ----------------------------------------------------------------------------- EfficientNet-B0
class MBConv(nn.Module):
    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_cba(cin, hidden, 1, 1, act=nn.SiLU))
        layers.append(_cba(hidden, hidden, k, stride, groups=hidden, act=nn.SiLU))
        layers.append(SqueezeExcite(hidden, max(1, cin // 4), act=nn.SiLU, gate=nn.Sigmoid))
        layers.append(_cba(hidden, cout, 1, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.use_res else y


def efficientnet_b0() -> nn.Module:
    cfg = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
           (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1)]
    layers: list[nn.Module] = [_cba(3, 32, 3, 2, act=nn.SiLU)]
    for e, k, s, cin, cout, n in cfg:
        for i in range(n):
            layers.append(MBConv(cin if i == 0 else cout, cout, k, s if i == 0 else 1, e))
    layers.append(_cba(320, 1280, 1, 1, act=nn.SiLU))
    return nn.Sequential(nn.Sequential(*layers), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(1280, 1000))


# ----------------------------------------------------------------------------- DenseNet-121
class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.norm1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2, self.conv2 = nn.BatchNorm2d(bn_size * growth), nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False)

    def forward(self, feats: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(feats, 1)
        x = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(x)))


class DenseBlock(nn.Module):
    def __init__(self, n: int, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(cin + i * growth, growth, bn_size) for i in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = [x]
        for layer in self.layers:
            feats.append(layer(feats))
        return torch.cat(feats, 1)


def densenet121() -> nn.Module:
    growth, blocks, c = 32, (6, 12, 24, 16), 64
    layers: list[nn.Module] = [nn.Conv2d(3, c, 7, 2, 3, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    for i, n in enumerate(blocks):
        layers.append(DenseBlock(n, c, growth, 4))
        c += n * growth
        if i != len(blocks) - 1:
            layers += [nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2, 2)]
            c //= 2
    layers += [nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
    return nn.Sequential(nn.Sequential(*layers), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 1000))


# ----------------------------------------------------------------------------- SqueezeNet 1.1
class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, e1: int, e3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.expand1x1(x)), F.relu(self.expand3x3(x))], 1)


def squeezenet1_1() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256),
        nn.Dropout(0.5), nn.Conv2d(512, 1000, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )


# ----------------------------------------------------------------------------- ShuffleNetV2 x1.0
def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.shape
    x = x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous()
    return x.view(b, c, h, w)


class ShuffleBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        half = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(_cba(cin, cin, 3, stride, groups=cin, act=None), _cba(cin, half, 1, 1))
        else:
            self.branch1 = nn.Sequential()
        c2 = cin if stride > 1 else half
        self.branch2 = nn.Sequential(_cba(c2, half, 1, 1), _cba(half, half, 3, stride, groups=half, act=None), _cba(half, half, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, repeats: tuple[int, ...] = (4, 8, 4), channels: tuple[int, ...] = (24, 116, 232, 464, 1024)) -> None:
        super().__init__()
        self.conv1 = _cba(3, channels[0], 3, 2)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages: list[nn.Module] = []
        cin = channels[0]
        for n, cout in zip(repeats, channels[1:-1]):
            stages.append(nn.Sequential(*[ShuffleBlock(cin if i == 0 else cout, cout, 2 if i == 0 else 1) for i in range(n)]))
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.conv5 = _cba(cin, channels[-1], 1, 1)
        self.fc = nn.Linear(channels[-1], 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv5(self.stages(self.maxpool(self.conv1(x))))
        return self.fc(x.mean([2, 3]))


def shufflenet_v2_x1_0() -> nn.Module:
    return ShuffleNetV2()


# ----------------------------------------------------------------------------- ConvNeXt-T
class LayerNorm2d(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.layer_scale = nn.Parameter(torch.full((dim, 1, 1), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.fc2(F.gelu(self.fc1(self.norm(y)))).permute(0, 3, 1, 2)
        return x + self.layer_scale * y


def convnext_tiny() -> nn.Module:
    depths, dims = (3, 3, 9, 3), (96, 192, 384, 768)
    layers: list[nn.Module] = [nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0], eps=1e-6))]
    for i, (n, d) in enumerate(zip(depths, dims)):
        layers.append(nn.Sequential(*[CNBlock(d) for _ in range(n)]))
        if i < 3:
            layers.append(nn.Sequential(LayerNorm2d(d, eps=1e-6), nn.Conv2d(d, dims[i + 1], 2, 2)))
    return nn.Sequential(nn.Sequential(*layers), nn.AdaptiveAvgPool2d(1), LayerNorm2d(dims[-1], eps=1e-6),
                         nn.Flatten(1), nn.Linear(dims[-1], 1000))


# ----------------------------------------------------------------------------- Swin-T
def _rel_index(w: int) -> torch.Tensor:
    coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (w - 1)
    return (rel[:, :, 0] * (2 * w - 1) + rel[:, :, 1]).flatten()


class WindowAttention(nn.Module):
    def __init__(self, dim: int, heads: int, window: int, shift: int) -> None:
        super().__init__()
        self.heads, self.window, self.shift = heads, window, shift
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.zeros((2 * window - 1) ** 2, heads))
        self.register_buffer("index", _rel_index(window), persistent=False)

    def _mask(self, h: int, w: int, device: torch.device) -> torch.Tensor:
        ws, s = self.window, self.shift
        img = torch.zeros((h, w), device=device)
        cnt = 0
        for hs in ((0, -ws), (-ws, -s), (-s, None)):
            for wsl in ((0, -ws), (-ws, -s), (-s, None)):
                img[hs[0]:hs[1], wsl[0]:wsl[1]] = cnt
                cnt += 1
        win = img.view(h // ws, ws, w // ws, ws).permute(0, 2, 1, 3).reshape(-1, ws * ws)
        mask = win.unsqueeze(1) - win.unsqueeze(2)
        return mask.masked_fill(mask != 0, -100.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        ws, heads = self.window, self.heads
        shift = self.shift if h > ws else 0
        if shift:
            x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
        x = x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)
        qkv = self.qkv(x).reshape(x.shape[0], ws * ws, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * (c // heads) ** -0.5) @ k.transpose(-2, -1)
        bias = self.table[self.index].view(ws * ws, ws * ws, heads).permute(2, 0, 1)
        attn = attn + bias.unsqueeze(0)
        if shift:
            nw = (h // ws) * (w // ws)
            attn = attn.view(-1, nw, heads, ws * ws, ws * ws) + self._mask(h, w, x.device).unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, heads, ws * ws, ws * ws)
        x = (attn.softmax(-1) @ v).transpose(1, 2).reshape(-1, ws * ws, c)
        x = self.proj(x)
        x = x.view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        if shift:
            x = torch.roll(x, shifts=(shift, shift), dims=(1, 2))
        return x


class SwinBlock(nn.Module):
    def __init__(self, dim: int, heads: int, window: int, shift: int) -> None:
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim), WindowAttention(dim, heads, window, shift)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm, self.reduction = nn.LayerNorm(4 * dim), nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.reduction(self.norm(x))


class Swin(nn.Module):
    def __init__(self, dim: int = 96, depths: tuple[int, ...] = (2, 2, 6, 2), heads: tuple[int, ...] = (3, 6, 12, 24), window: int = 7) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, 4)
        self.patch_norm = nn.LayerNorm(dim)
        stages: list[nn.Module] = []
        for i, (n, h) in enumerate(zip(depths, heads)):
            d = dim * 2 ** i
            stages += [SwinBlock(d, h, window, 0 if j % 2 == 0 else window // 2) for j in range(n)]
            if i < len(depths) - 1:
                stages.append(PatchMerging(d))
        self.stages = nn.Sequential(*stages)
        self.norm = nn.LayerNorm(dim * 2 ** (len(depths) - 1))
        self.head = nn.Linear(dim * 2 ** (len(depths) - 1), 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_norm(self.patch(x).permute(0, 2, 3, 1))
        x = self.norm(self.stages(x))
        return self.head(x.mean((1, 2)))


def swin_t() -> nn.Module:
    return Swin()


# ----------------------------------------------------------------------------- MLP-Mixer S/16
class MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int, token_mlp: int, channel_mlp: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.token = nn.Sequential(nn.Linear(tokens, token_mlp), nn.GELU(), nn.Linear(token_mlp, tokens))
        self.channel = nn.Sequential(nn.Linear(dim, channel_mlp), nn.GELU(), nn.Linear(channel_mlp, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self, dim: int = 512, depth: int = 8, patch: int = 16, image: int = 224, token_mlp: int = 256, channel_mlp: int = 2048) -> None:
        super().__init__()
        tokens = (image // patch) ** 2
        self.stem = nn.Conv2d(3, dim, patch, patch)
        self.blocks = nn.Sequential(*[MixerBlock(tokens, dim, token_mlp, channel_mlp) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.blocks(x)).mean(1))


def mixer_s16() -> nn.Module:
    return Mixer()


# ----------------------------------------------------------------------------- GPT-2 small
class GPT2Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.c_fc, self.mlp_proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab: int = 50257, dim: int = 768, depth: int = 12, heads: int = 12, ctx: int = 1024) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(ctx, dim)
        self.h = nn.ModuleList(GPT2Block(dim, heads) for _ in range(depth))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def gpt2_small() -> nn.Module:
    return GPT2()


# ----------------------------------------------------------------------------- a small UNet
class DoubleConv(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(_cba(cin, cout, 3, 1), _cba(cout, cout, 3, 1))


class UNet(nn.Module):
    def __init__(self, cin: int = 3, classes: int = 2, base: int = 32, levels: int = 4) -> None:
        super().__init__()
        chans = [base * 2 ** i for i in range(levels + 1)]
        self.inc = DoubleConv(cin, chans[0])
        self.downs = nn.ModuleList(DoubleConv(chans[i], chans[i + 1]) for i in range(levels))
        self.ups = nn.ModuleList(nn.ConvTranspose2d(chans[i + 1], chans[i], 2, 2) for i in reversed(range(levels)))
        self.dec = nn.ModuleList(DoubleConv(2 * chans[i], chans[i]) for i in reversed(range(levels)))
        self.out = nn.Conv2d(chans[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(F.max_pool2d(skips[-1], 2)))
        x = skips.pop()
        for up, dec in zip(self.ups, self.dec):
            x = dec(torch.cat([skips.pop(), up(x)], 1))
        return self.out(x)


def unet_small() -> nn.Module:
    return UNet()


# ----------------------------------------------------------------------------- AlexNet
def alexnet() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.AdaptiveAvgPool2d(6), nn.Flatten(), nn.Dropout(), nn.Linear(256 * 36, 4096), nn.ReLU(inplace=True),
        nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Linear(4096, 1000),
    )


# ----------------------------------------------------------------------------- the benchmark's model list
def image(size: int = 224) -> tuple[torch.Tensor, ...]:
    return (torch.randn(1, 3, size, size),)


def tokens(length: int = 128, vocab: int = 1000) -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, vocab, (1, length)),)


class Case:
    """One benchmark model: a name, a builder, its example inputs and what they are."""

    def __init__(self, name: str, build: Callable[[], nn.Module], inputs: Callable[[], tuple[torch.Tensor, ...]], shape: str) -> None:
        self.name, self.build, self.inputs, self.shape = name, build, inputs, shape


def cases() -> list[Case]:
    """The accuracy benchmark's models at batch 1 (images 224x224 unless stated; text 128 tokens)."""
    img, tok = "1x3x224x224", "1x128 tokens"
    return [
        Case("alexnet", alexnet, image, img),
        Case("vgg16", zoo.vgg16, image, img),
        Case("resnet18", zoo.resnet18, image, img),
        Case("resnet34", resnet34, image, img),
        Case("resnet50", zoo.resnet50, image, img),
        Case("resnet101", resnet101, image, img),
        Case("wide_resnet50_2", wide_resnet50_2, image, img),
        Case("resnext50_32x4d", resnext50_32x4d, image, img),
        Case("densenet121", densenet121, image, img),
        Case("squeezenet1_1", squeezenet1_1, image, img),
        Case("shufflenet_v2_x1_0", shufflenet_v2_x1_0, image, img),
        Case("mobilenet_v2_050", lambda: mobilenet_v2(0.5), image, img),
        Case("mobilenet_v2", mobilenet_v2, image, img),
        Case("mobilenet_v3_small", mobilenet_v3_small, image, img),
        Case("mobilenet_v3_large", mobilenet_v3_large, image, img),
        Case("efficientnet_b0", efficientnet_b0, image, img),
        Case("convnext_tiny", convnext_tiny, image, img),
        Case("swin_t", swin_t, image, img),
        Case("vit_b_16_6l", lambda: zoo.ViT(depth=6), image, img),
        Case("vit_b_16", zoo.vit_b_16, image, img),
        Case("mixer_s16", mixer_s16, image, img),
        Case("bert_base_6l", lambda: zoo.Bert(depth=6), lambda: tokens(128), tok),
        Case("bert_base", zoo.bert_base, lambda: tokens(128), tok),
        Case("gpt2_small", gpt2_small, lambda: tokens(128), tok),
        Case("unet_small", unet_small, lambda: image(256), "1x3x256x256"),
    ]


PAIRS = [
    ("resnet18", "resnet34"), ("resnet18", "resnet50"), ("resnet50", "resnet101"), ("resnet50", "wide_resnet50_2"),
    ("resnet50", "resnext50_32x4d"), ("mobilenet_v2_050", "mobilenet_v2"), ("mobilenet_v3_small", "mobilenet_v3_large"),
    ("mobilenet_v2", "efficientnet_b0"), ("vit_b_16_6l", "vit_b_16"), ("bert_base_6l", "bert_base"),
    ("convnext_tiny", "swin_t"),
]

if __name__ == "__main__":  # quick self-check: every model runs
    for case in cases():
        with torch.no_grad():
            y = case.build().eval()(*case.inputs())
        print(f"{case.name:22s} {tuple(y.shape)} params {sum(p.numel() for p in case.build().parameters()) / 1e6:.1f}M")

