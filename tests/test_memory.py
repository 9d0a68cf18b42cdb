"""Peak activation memory from liveness, not the sum of all activations."""

from __future__ import annotations

from ha_bot import memory
from tests.helpers import count, op


def test_chain_peak_is_two_adjacent_tensors():
    # x0 -> a -> b -> c, each 100 elements: at most input and output live together
    ops = [op("aten::relu", "elementwise", inputs=(i,), outputs=(i + 1,)) for i in range(3)]
    c = count(ops, {0: 100, 1: 100, 2: 100, 3: 100})
    assert memory.peak_activation_bytes(c, "fp32") == 2 * 100 * 4
    assert memory.saved_activation_bytes(c, "fp32") == 4 * 100 * 4


def test_skip_connection_keeps_tensor_alive():
    # x -> a -> b ; add(x, b): x stays live across the whole block
    ops = [
        op("aten::relu", "elementwise", inputs=(0,), outputs=(1,)),
        op("aten::relu", "elementwise", inputs=(1,), outputs=(2,)),
        op("aten::add", "elementwise", inputs=(0, 2), outputs=(3,)),
    ]
    c = count(ops, {0: 100, 1: 100, 2: 100, 3: 100})
    assert memory.peak_activation_bytes(c, "fp16") == 3 * 100 * 2


def test_outputs_nobody_reads_live_to_the_end():
    ops = [
        op("a", "elementwise", inputs=(0,), outputs=(1,)),  # 1 is a model output
        op("b", "elementwise", inputs=(0,), outputs=(2,)),
        op("c", "elementwise", inputs=(2,), outputs=(3,)),
    ]
    c = count(ops, {0: 10, 1: 1000, 2: 10, 3: 10})
    assert memory.peak_activation_bytes(c, "fp32") == (1000 + 10 + 10) * 4
