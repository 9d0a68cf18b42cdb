"""The built-in target database, custom target files, overrides and their error messages."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ha_bot.errors import ConfigError
from ha_bot.targets import (
    EFFICIENCY_CLASSES,
    KINDS,
    PRECISIONS,
    Target,
    load_builtin,
    load_targets_file,
    parse_target,
    resolve,
    target_details,
    targets_table,
)

BUILTIN = load_builtin()
DATA = Path(__file__).resolve().parents[1] / "ha_bot" / "data" / "targets"


def write(tmp_path: Path, text: str, name: str = "my_targets.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return str(path)


# --- the built-in database -------------------------------------------------------------------


def test_builtin_database_is_large_sorted_and_one_file_per_target() -> None:
    assert len(BUILTIN) >= 20
    assert list(BUILTIN) == sorted(BUILTIN)
    assert sorted(p.stem for p in DATA.glob("*.yaml")) == list(BUILTIN)
    assert load_builtin() == BUILTIN and load_builtin() is not BUILTIN  # cached, but a fresh dict


@pytest.mark.parametrize("tid", sorted(BUILTIN))
def test_builtin_target_is_complete(tid: str) -> None:
    t = BUILTIN[tid]
    assert t.id == tid and t.origin == "builtin" and t.name and t.kind in KINDS
    assert t.peak_flops and set(t.peak_flops) <= set(PRECISIONS)
    assert all(v > 0 for v in t.peak_flops.values())
    assert t.vector_flops > 0 and t.mem_bw > 0 and t.kernel_overhead_s > 0 and t.half_flops > 0
    assert 0 <= t.idle_fraction <= 1
    assert list(t.efficiency) == list(EFFICIENCY_CLASSES)
    assert all(0 < v <= 1 for v in t.efficiency.values())
    for figure in (t.mem_bytes, t.onchip_bytes, t.flash_bytes, t.tdp_w):
        assert figure is None or figure > 0
    assert t.sources.get("compute") and t.sources.get("memory")
    assert all(urls for urls in t.sources.values())
    assert "Assumptions:" in t.notes  # every built-in states its judgement calls


@pytest.mark.parametrize(
    ("tid", "field", "expected"),
    [
        ("nvidia_h100_sxm", "peak.bf16", 989.5e12),
        ("nvidia_h100_sxm", "peak.fp8", 1979e12),
        ("nvidia_h100_sxm", "peak.fp32", 67e12),
        ("nvidia_h100_sxm", "mem_bw", 3.35e12),
        ("nvidia_h100_sxm", "mem_bytes", 80e9),
        ("nvidia_h100_sxm", "onchip_bytes", 50e6),
        ("nvidia_h100_sxm", "tdp_w", 700.0),
        ("nvidia_h100_sxm", "kernel_overhead_s", 4e-6),
        ("nvidia_h200_sxm", "mem_bw", 4.8e12),
        ("nvidia_a100_sxm_80gb", "peak.int8", 624e12),
        ("nvidia_a100_sxm_80gb", "peak.fp8", None),
        ("nvidia_t4", "peak.bf16", None),
        ("nvidia_rtx_4090", "peak.fp16", 165.2e12),
        ("nvidia_jetson_orin_nano_8gb", "peak.int8", 20e12),
        ("nvidia_jetson_orin_nano_8gb", "mem_bw", 68e9),
        ("amd_mi300x", "peak.bf16", 1307.4e12),
        ("google_tpu_v4", "peak.fp32", None),
        ("google_tpu_v5e", "tdp_w", None),
        ("rpi5_cortex_a76", "peak.fp32", 153.6e9),
        ("rpi5_cortex_a76", "mem_bw", 17.1e9),
        ("intel_xeon_8480plus", "peak.bf16", 114.688e12),
        ("amd_epyc_9654", "peak.fp16", None),
        ("arm_cortex_m4_stm32f407", "peak.fp32", 168e6),
        ("arm_cortex_m4_stm32f407", "mem_bytes", 192 * 1024),
        ("arm_cortex_m4_stm32f407", "flash_bytes", 1024 * 1024),
        ("arm_cortex_m4_stm32f407", "tdp_w", None),
    ],
)
def test_builtin_si_conversion(tid: str, field: str, expected: float | None) -> None:
    t = BUILTIN[tid]
    value = t.peak_flops.get(field[5:]) if field.startswith("peak.") else getattr(t, field)
    assert value == (None if expected is None else pytest.approx(expected, rel=1e-12))


def _reference() -> Path | None:
    root = Path(__file__).resolve().parents[1]
    for base in (root, root.parent):
        path = base / "shared" / "reference" / "hardware_specs.yaml"
        if path.is_file():
            return path
    return None


@pytest.mark.skipif(_reference() is None, reason="shared/reference/hardware_specs.yaml not present")
def test_builtin_figures_match_the_vetted_reference() -> None:
    from ruamel.yaml import YAML

    ref = {t["id"]: t for t in YAML(typ="safe").load(_reference().read_text())["targets"]}  # type: ignore[union-attr]
    for tid, t in BUILTIN.items():
        r = ref[tid]
        for p in PRECISIONS:
            want = r["peak_tops_int8" if p == "int8" else f"peak_tflops_{p}"]
            got = t.peak_flops.get(p)
            assert got == (None if want is None else pytest.approx(want * 1e12)), (tid, p)
        if r["mem_bw_gbps"] is not None:
            assert t.mem_bw == pytest.approx(r["mem_bw_gbps"] * 1e9), tid
        if r["mem_gb"] is not None:
            assert t.mem_bytes == pytest.approx(r["mem_gb"] * 1e9), tid
        assert t.tdp_w == r["tdp_w"], tid


# --- custom targets --------------------------------------------------------------------------

CUSTOM = """
    id: my_board
    name: My Board
    kind: cpu
    peak_tflops:
      fp32: 0.2
      int8: 0.8
    mem_bw_gbps: 25.6
    mem_gb: 4
    tdp_w: 10
    efficiency:
      matmul: 0.5
    curves:
      matmul: [[1.0e9, 50], [1.0e6, 10]]
    sources:
      compute: https://example.com/datasheet
"""


def test_custom_target_file_loads_with_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, CUSTOM)
    (t,) = load_targets_file(path).values()
    assert t.id == "my_board" and t.origin == path and t.kind == "cpu"
    assert t.peak_flops == {"fp32": pytest.approx(0.2e12), "int8": pytest.approx(0.8e12)}
    assert t.vector_flops == pytest.approx(0.2e12)  # defaults to the fp32 peak
    assert (t.mem_bw, t.mem_bytes, t.tdp_w) == (pytest.approx(25.6e9), 4e9, 10.0)
    assert t.onchip_bytes is None and t.flash_bytes is None
    assert t.kernel_overhead_s == pytest.approx(3e-6)  # cpu default
    assert t.efficiency["matmul"] == 0.5 and t.efficiency["memory"] == 0.7  # merged onto defaults
    assert t.half_flops == pytest.approx(0.2e12 * 10e-6)
    assert t.curves["matmul"] == ((1e6, 10e9), (1e9, 50e9))  # sorted, SI
    assert t.sources == {"compute": ("https://example.com/datasheet",)}


def test_base_inherits_every_field_not_given(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        targets:
          - id: h100_capped
            base: nvidia_h100_sxm
            mem_bw_gbps: 3000
            peak_tflops: {fp8: null, bf16: 900}
            efficiency: {matmul: 0.7}
            notes: power-capped at 500 W
            tdp_w: 500
          - id: h100_capped_int8
            base: h100_capped
            peak_tflops: {int8: null}
    """,
    )
    targets = load_targets_file(path)
    h100 = BUILTIN["nvidia_h100_sxm"]
    capped, capped8 = targets["h100_capped"], targets["h100_capped_int8"]
    assert capped.mem_bw == 3e12 and capped.tdp_w == 500 and capped.peak_flops["bf16"] == 900e12
    assert "fp8" not in capped.peak_flops and capped.peak_flops["fp16"] == h100.peak_flops["fp16"]
    assert capped.efficiency == {**h100.efficiency, "matmul": 0.7}
    for field in (
        "kind",
        "name",
        "vector_flops",
        "mem_bytes",
        "onchip_bytes",
        "kernel_overhead_s",
        "idle_fraction",
        "half_flops",
        "sources",
    ):
        assert getattr(capped, field) == getattr(h100, field), field
    assert (
        capped.notes.startswith("power-capped at 500 W")
        and "inherited from nvidia_h100_sxm" in capped.notes
    )
    assert capped.origin == path
    assert (
        "int8" not in capped8.peak_flops and capped8.mem_bw == 3e12
    )  # base defined earlier in the file
    assert capped8.notes == capped.notes


def test_same_id_overrides_the_builtin(tmp_path: Path) -> None:
    path = write(tmp_path, "id: rpi5_cortex_a76\nmem_bw_gbps: 12\n")
    (t,) = load_targets_file(path).values()
    assert t.mem_bw == 12e9 and t.origin == path
    assert t._replace(mem_bw=0, origin="") == BUILTIN["rpi5_cortex_a76"]._replace(
        mem_bw=0, origin=""
    )
    available = {**BUILTIN, t.id: t}
    assert resolve(["rpi5_cortex_a76"], available) == [t]


def test_parse_target_without_line_info() -> None:
    t = parse_target(
        {
            "id": "x",
            "kind": "npu",
            "peak_tflops": {"int8": 4},
            "vector_tflops": 0.1,
            "mem_bw_gbps": 1,
        },
        origin=".ha-bot.yml",
        bases={},
    )
    assert isinstance(t, Target) and t.peak_flops == {"int8": 4e12} and t.origin == ".ha-bot.yml"
    with pytest.raises(ConfigError) as err:
        parse_target(
            {"id": "x", "kind": "npu", "peak_tflops": {"int8": 4}, "mem_bw_gbps": 1},
            origin=".ha-bot.yml",
            bases={},
        )
    assert err.value.key == "vector_tflops" and err.value.line is None


# --- errors name file, line and key ----------------------------------------------------------

GOOD = "id: t\nkind: gpu\npeak_tflops:\n  fp32: 10\nmem_bw_gbps: 100\n"  # lines 1-5
LIST = "targets:\n  - id: t\n    kind: gpu\n    peak_tflops:\n      fp32: 10\n    mem_bw_gbps: 100\n"  # 1-6


@pytest.mark.parametrize(
    ("text", "line", "key", "fragment"),
    [
        (GOOD + "colour: red\n", 6, "colour", "allowed: id, name, kind"),
        (GOOD.replace("fp32", "fp64"), 4, "peak_tflops.fp64", "allowed: fp32, tf32, fp16"),
        (GOOD.replace("100", "-5"), 5, "mem_bw_gbps", "must be > 0"),
        (GOOD.replace("100", "fast"), 5, "mem_bw_gbps", "must be a number"),
        (GOOD.replace("fp32: 10", "fp32: -1"), 4, "peak_tflops.fp32", "must be > 0"),
        (GOOD.replace("id: t\n", "name: T\n"), 1, "id", "missing"),
        (GOOD.replace("mem_bw_gbps: 100\n", ""), 1, "mem_bw_gbps", "missing"),
        (GOOD.replace("  fp32: 10\n", "  fp32: null\n"), 3, "peak_tflops", "at least one"),
        (GOOD.replace("gpu", "fpga"), 2, "kind", "allowed: gpu, cpu, mcu, npu, tpu"),
        (GOOD + "efficiency:\n  matmul: 1.5\n", 7, "efficiency.matmul", "<= 1"),
        (GOOD + "efficiency:\n  gemm: 0.5\n", 7, "efficiency.gemm", "allowed: matmul, conv"),
        (GOOD + "tdp_w: -3\n", 6, "tdp_w", "must be > 0"),
        (GOOD + "idle_fraction: 2\n", 6, "idle_fraction", "<= 1"),
        (GOOD + "fuses_elementwise: sometimes\n", 6, "fuses_elementwise", "true, false or a list"),
        (GOOD + "base: nvidia_h100_sxn\n", 6, "base", "nvidia_h100_sxm"),
        (GOOD + "curves:\n  matmul: [[1, 2, 3]]\n", 7, "curves.matmul.0", "pair"),
        (GOOD.replace("id: t", "id: 'bad id'"), 1, "id", "not a valid id"),
        (LIST + "  - id: u\n    kind: cpu\n", 7, "peak_tflops", "needs a dense peak"),
        (LIST + "  - id: t\n    base: t\n", 7, "id", "defined twice"),
        (
            LIST + "  - id: u\n    base: t\n    peak_tflops: {fp16: 0}\n",
            9,
            "peak_tflops.fp16",
            "> 0",
        ),
        (LIST + "extra: 1\n", 7, "extra", "holds only that key"),
    ],
)
def test_errors_name_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_targets_file(path)
    e = err.value
    assert (e.file, e.line, e.key) == (path, line, key)
    assert f"{path}:{line}: {key}: " in str(e) and fragment in str(e)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("id: t\nkind: [gpu\n", 3, "invalid YAML"),
        ("id: t\nid: u\n", 2, "invalid YAML"),  # duplicate key
        ("- id: t\n", 1, "expected a target mapping"),
        ("", None, "expected a target mapping"),
    ],
)
def test_bad_yaml_names_file_and_line(
    tmp_path: Path, text: str, line: int | None, fragment: str
) -> None:
    path = write(tmp_path, text, "broken.yaml")
    with pytest.raises(ConfigError) as err:
        load_targets_file(path)
    assert err.value.file == path and fragment in str(err.value) and "broken.yaml" in str(err.value)
    if line is not None:
        assert err.value.line == line


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match=r"nope\.yaml.*not found"):
        load_targets_file(path)


# --- resolve and rendering -------------------------------------------------------------------


def test_resolve_keeps_order_and_drops_duplicates() -> None:
    got = resolve(["rpi5_cortex_a76", "nvidia_h100_sxm", "rpi5_cortex_a76"], BUILTIN)
    assert [t.id for t in got] == ["rpi5_cortex_a76", "nvidia_h100_sxm"]


@pytest.mark.parametrize(
    ("wrong", "suggested"),
    [
        ("nvidia_h100", "nvidia_h100_sxm"),
        ("h100_sxm", "nvidia_h100_sxm"),
        ("rpi5", "rpi5_cortex_a76"),
        ("jetson_orin_nano", "nvidia_jetson_orin_nano_8gb"),
    ],
)
def test_resolve_unknown_id_suggests_close_ids(wrong: str, suggested: str) -> None:
    with pytest.raises(ConfigError) as err:
        resolve([wrong], BUILTIN)
    message = str(err.value)
    assert repr(wrong) in message and suggested in message and "ha-bot targets" in message


def test_targets_table_lists_every_target() -> None:
    table = targets_table(BUILTIN.values())
    lines = table.splitlines()
    assert lines[0].split()[:6] == ["id", "kind", "fp32", "fp16", "bf16", "int8"]
    assert len(lines) == len(BUILTIN) + 3
    row = next(line for line in lines if line.startswith("nvidia_h100_sxm "))
    assert row.split() == [
        "nvidia_h100_sxm",
        "gpu",
        "67",
        "989.5",
        "989.5",
        "1979",
        "3350",
        "80",
        "700",
    ]
    assert targets_table(BUILTIN.values()) == table  # deterministic


@pytest.mark.parametrize("tid", ["nvidia_h100_sxm", "arm_cortex_m4_stm32f407", "google_tpu_v5e"])
def test_target_details_shows_figures_assumptions_and_sources(tid: str) -> None:
    t = BUILTIN[tid]
    text = target_details(t)
    assert text.startswith(f"{tid}: {t.name}")
    assert "Assumptions:" in text and "sources:" in text
    for urls in t.sources.values():
        assert all(u in text for u in urls)
    if t.tdp_w is None:
        assert "energy not estimated" in text
