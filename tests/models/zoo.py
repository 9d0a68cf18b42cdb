"""Reference architectures written from their papers (torchvision does not import beside CPU torch here).

Each builder matches torchvision's layer layout so that MACs and parameters can be compared with the
figures published with torchvision's weights.
"""

from __future__ import annotations

import torch
from torch import nn


# ----------------------------------------------------------------------------- ResNet
class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, planes, 1, stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + idt)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(
        self, cin: int, planes: int, stride: int = 1, groups: int = 1, width_per_group: int = 64
    ) -> None:
        super().__init__()
        width = int(planes * (width_per_group / 64.0)) * groups
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != planes * 4:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, planes * 4, 1, stride, bias=False), nn.BatchNorm2d(planes * 4)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + idt)


class ResNet(nn.Module):
    def __init__(self, block: type, layers: list[int], num_classes: int = 1000, **kw: int) -> None:
        super().__init__()
        self.cin = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make(block, 64, layers[0], 1, kw)
        self.layer2 = self._make(block, 128, layers[1], 2, kw)
        self.layer3 = self._make(block, 256, layers[2], 2, kw)
        self.layer4 = self._make(block, 512, layers[3], 2, kw)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _make(self, block: type, planes: int, n: int, stride: int, kw: dict) -> nn.Sequential:
        mods = []
        for i in range(n):
            mods.append(block(self.cin, planes, stride if i == 0 else 1, **kw))
            self.cin = planes * block.expansion
        return nn.Sequential(*mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18() -> nn.Module:
    return ResNet(BasicBlock, [2, 2, 2, 2])


def resnet50() -> nn.Module:
    return ResNet(Bottleneck, [3, 4, 6, 3])


# ----------------------------------------------------------------------------- VGG
def vgg16() -> nn.Module:
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    layers: list[nn.Module] = []
    cin = 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(cin, int(v), 3, padding=1), nn.ReLU(inplace=True)]
            cin = int(v)
    return nn.Sequential(
        nn.Sequential(*layers),
        nn.AdaptiveAvgPool2d(7),
        nn.Flatten(),
        nn.Linear(512 * 49, 4096),
        nn.ReLU(True),
        nn.Dropout(),
        nn.Linear(4096, 4096),
        nn.ReLU(True),
        nn.Dropout(),
        nn.Linear(4096, 1000),
    )


# ----------------------------------------------------------------------------- MobileNetV2
def _cbr(
    cin: int, cout: int, k: int, s: int, groups: int = 1, act: type = nn.ReLU6
) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, s, (k - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        act(inplace=True),
    )


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = int(round(cin * expand))
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_cbr(cin, hidden, 1, 1))
        layers += [
            _cbr(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


def mobilenet_v2() -> nn.Module:
    cfg = [
        [1, 16, 1, 1],
        [6, 24, 2, 2],
        [6, 32, 3, 2],
        [6, 64, 4, 2],
        [6, 96, 3, 1],
        [6, 160, 3, 2],
        [6, 320, 1, 1],
    ]
    feats: list[nn.Module] = [_cbr(3, 32, 3, 2)]
    cin = 32
    for t, c, n, s in cfg:
        for i in range(n):
            feats.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
            cin = c
    feats.append(_cbr(cin, 1280, 1, 1))
    return nn.Sequential(
        nn.Sequential(*feats),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.2),
        nn.Linear(1280, 1000),
    )


# ----------------------------------------------------------------------------- ViT
class ViT(nn.Module):
    def __init__(
        self,
        image: int = 224,
        patch: int = 16,
        dim: int = 768,
        depth: int = 12,
        heads: int = 12,
        mlp: int = 3072,
    ) -> None:
        super().__init__()
        self.conv_proj = nn.Conv2d(3, dim, patch, patch)
        n = (image // patch) ** 2
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.zeros(1, n + 1, dim))
        layer = nn.TransformerEncoderLayer(
            dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embedding
        x = self.ln(self.encoder(x))
        return self.head(x[:, 0])


def vit_b_16() -> nn.Module:
    return ViT()


# ----------------------------------------------------------------------------- BERT-base encoder
class Bert(nn.Module):
    def __init__(
        self,
        vocab: int = 30522,
        dim: int = 768,
        depth: int = 12,
        heads: int = 12,
        mlp: int = 3072,
        max_len: int = 512,
    ) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.segment = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim)
        layer = nn.TransformerEncoderLayer(
            dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.ln(self.word(ids) + self.pos(pos) + self.segment(torch.zeros_like(ids)))
        return self.encoder(x)


def bert_base() -> nn.Module:
    return Bert()


# ----------------------------------------------------------------------------- decoder-only LLM (LLaMA-style)
class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), self.weight, 1e-6)


class DecoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, ffn: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.attn_norm = RMSNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, ffn, bias=False)
        self.up = nn.Linear(dim, ffn, bias=False)
        self.down = nn.Linear(ffn, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads
        )
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        h = self.ffn_norm(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(
        self,
        vocab: int = 32000,
        dim: int = 4096,
        depth: int = 32,
        heads: int = 32,
        kv_heads: int = 32,
        ffn: int = 11008,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(DecoderBlock(dim, heads, kv_heads, ffn) for _ in range(depth))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def llama_7b() -> nn.Module:
    return Decoder()


def tiny_decoder() -> nn.Module:
    return Decoder(vocab=100, dim=64, depth=2, heads=4, kv_heads=2, ffn=128)
