"""The counting stage's output: one record per traced operator, precision-independent.

Both counting engines (TorchScript via fvcore, and ONNX) produce a :class:`ModelCount`; everything
downstream (cost, report, diff, render) reads only these types. Counts are in *elements* for
floating-point tensors, so that bytes follow the precision chosen later (``elements x bytes per
element``); non-float tensors (indices, masks) carry their own fixed byte count.

Conventions (see README "Conventions"):
- ``macs``: multiply-accumulates. ``flops``: 2 x MACs for multiply-accumulate ops, plus one FLOP
  per element for elementwise and reduction work (exp, erf, tanh, sigmoid count as one as well).
- Every traced op gets a record. ``supported`` is False when no FLOP rule exists: bytes are still
  counted so the cost model never treats a blind spot as free.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# Operator classes, used for efficiency lookup in the cost model.
OP_CLASSES = (
    "matmul",  # linear, matmul, bmm, addmm, baddbmm, einsum
    "conv",  # dense / grouped convolution
    "dwconv",  # depthwise convolution (groups == in_channels)
    "attention",  # fused scaled-dot-product attention
    "elementwise",  # activations, arithmetic, casts
    "reduction",  # softmax, mean, sum, norms' statistics
    "norm",  # batch/layer/group/rms norm
    "pool",  # max/avg/adaptive pooling, interpolate
    "embedding",  # gathers from a table
    "memory",  # real copies: cat, pad, contiguous, index ops
    "view",  # aliasing ops: no kernel, no bytes (reshape, permute, slice, ...)
    "other",  # anything else (unsupported ops land here)
)

# Classes that a fusing runtime folds into the preceding kernel (no launch, no intermediate round trip).
FUSIBLE_CLASSES = frozenset({"elementwise"})


class OpRecord(NamedTuple):
    op: str  # "aten::linear", "onnx::Conv"
    scope: str  # module path, "" for the root ("layer1.0.conv1")
    op_class: str  # one of OP_CLASSES
    macs: int
    flops: int
    act_in: int  # float activation elements read
    w_in: int  # float weight (parameter/buffer) elements read
    out: int  # float elements written
    fixed_bytes: int  # bytes of non-float tensors read and written (indices, masks)
    supported: bool  # a real FLOP rule exists for this op
    inputs: tuple[int, ...] = ()  # storage ids of activation tensors read (liveness)
    outputs: tuple[int, ...] = ()  # storage ids this op creates (views create none)
    unit_flops: int = 0  # FLOPs of one independent product in a batched op (bmm, attention heads); 0: one product

    def to_json(self) -> list[Any]:
        return [
            self.op, self.scope, self.op_class, self.macs, self.flops, self.act_in, self.w_in,
            self.out, self.fixed_bytes, self.supported, list(self.inputs), list(self.outputs), self.unit_flops,
        ]

    @classmethod
    def from_json(cls, row: list[Any]) -> OpRecord:
        return cls(
            str(row[0]), str(row[1]), str(row[2]), int(row[3]), int(row[4]), int(row[5]),
            int(row[6]), int(row[7]), int(row[8]), bool(row[9]), tuple(row[10]), tuple(row[11]),
            int(row[12]) if len(row) > 12 else 0,
        )


class ModelCount(NamedTuple):
    """Everything the counting stage learned about one model at its declared input shapes."""

    engine: str  # "torch" | "onnx"
    batch: int  # leading dimension of the first declared input (batch scaling reference)
    params: int  # parameter elements (unique tensors; shared modules counted once)
    buffers: int  # float buffer elements (e.g. BatchNorm running stats)
    weight_fixed_bytes: int  # non-float parameter/buffer bytes
    input_elems: int  # float elements of the model inputs
    tensors: dict[int, int]  # storage id -> size in bytes-at-1-byte-per-float-element (see note)
    float_tensors: frozenset[int]  # storage ids whose size scales with precision
    ops: tuple[OpRecord, ...]

    # note on ``tensors``: float tensors hold their element count; non-float tensors their bytes.

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "batch": self.batch,
            "params": self.params,
            "buffers": self.buffers,
            "weight_fixed_bytes": self.weight_fixed_bytes,
            "input_elems": self.input_elems,
            "tensors": [[k, v, k in self.float_tensors] for k, v in sorted(self.tensors.items())],
            "ops": [o.to_json() for o in self.ops],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ModelCount:
        tensors = {int(k): int(v) for k, v, _ in doc["tensors"]}
        floats = frozenset(int(k) for k, _, f in doc["tensors"] if f)
        return cls(
            str(doc["engine"]), int(doc["batch"]), int(doc["params"]), int(doc["buffers"]),
            int(doc["weight_fixed_bytes"]), int(doc["input_elems"]), tensors, floats,
            tuple(OpRecord.from_json(r) for r in doc["ops"]),
        )

    @property
    def macs(self) -> int:
        return sum(o.macs for o in self.ops)

    @property
    def flops(self) -> int:
        return sum(o.flops for o in self.ops)
