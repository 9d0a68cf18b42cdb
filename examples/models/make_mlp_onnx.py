"""Regenerate examples/models/mlp.onnx (a small MLP classifier exported from PyTorch)."""

from __future__ import annotations

import pathlib

import torch
from torch import nn

if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)).eval()
    out = pathlib.Path(__file__).with_name("mlp.onnx")
    torch.onnx.export(model, (torch.randn(1, 1, 28, 28),), str(out), input_names=["image"], output_names=["logits"], dynamo=False)
    print(f"wrote {out}")
