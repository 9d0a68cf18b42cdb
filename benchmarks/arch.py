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
from tests.models.zoo_more import (  # the torchvision layouts the reference tests verify
    convnext_tiny,
    densenet121,
    efficientnet_b0,
    mobilenet_v3_large,
    resnext50_32x4d,
    shufflenet_v2_x1_0,
    squeezenet1_1,
    swin_t,
    wide_resnet50_2,
)


def _div(v: float, divisor: int = 8) -> int:
    return zoo._make_divisible(v, divisor)


# ----------------------------------------------------------------------------- ResNet family
def resnet34() -> nn.Module:
    return zoo.ResNet(zoo.BasicBlock, [3, 4, 6, 3])


def resnet101() -> nn.Module:
    return zoo.ResNet(zoo.Bottleneck, [3, 4, 23, 3])


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


def mobilenet_v3_small() -> nn.Module:
    return _mobilenet_v3(V3_SMALL, 1024)


# ----------------------------------------------------------------------------- EfficientNet-B0


# ----------------------------------------------------------------------------- DenseNet-121


# ----------------------------------------------------------------------------- SqueezeNet 1.1


# ----------------------------------------------------------------------------- ShuffleNetV2 x1.0


# ----------------------------------------------------------------------------- ConvNeXt-T


# ----------------------------------------------------------------------------- Swin-T


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

