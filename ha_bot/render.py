"""Render reports for people: Markdown (PR comment, job summary, cards) and terminal text. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~@&])")


def esc(text: object) -> str:
    """Escape a repository-controlled name for Markdown: no markup, mentions, HTML or links."""
    s = str(text).replace("\r", " ").replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", s)


def code(text: object) -> str:
    """A repository-controlled name as an inline code span: nothing inside renders or pings."""
    s = str(text).replace("\r", " ").replace("\n", " ").replace("`", "'")
    return f"`{s}`"


def _scaled(x: float, units: Sequence[tuple[float, str]], digits: int = 3) -> str:
    for factor, unit in units:
        if abs(x) >= factor:
            return f"{x / factor:.{digits}g} {unit}"
    factor, unit = units[-1]
    return f"{x / factor:.{digits}g} {unit}"


def fmt_time(s: float | None) -> str:
    if s is None:
        return "n/a"
    if s == 0:
        return "0 s"
    return _scaled(s, [(1, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")])


def fmt_bytes(b: float | None) -> str:
    if b is None:
        return "n/a"
    return _scaled(b, [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1, "B")])


def fmt_count(n: float | None, unit: str = "") -> str:
    if n is None:
        return "n/a"
    s = _scaled(n, [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")])
    return f"{s}{unit}".replace(" ", "\u202f") if unit else s.strip()


def fmt_energy(j: float | None) -> str:
    if j is None:
        return "n/a"
    return _scaled(j, [(1, "J"), (1e-3, "mJ"), (1e-6, "µJ"), (1e-9, "nJ")])


def fmt_fit(fits: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "unknown"}[fits]


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def estimate_rows(model: dict[str, Any]) -> list[list[str]]:
    rows = []
    for e in model["estimates"]:
        prec = e["precision"] if e["precision"] == e["precision_requested"] else f"{e['precision']} (asked {e['precision_requested']})"
        rows.append([
            esc(e["target"]), prec, str(e["batch"]), fmt_time(e["latency_s"]),
            f"{fmt_count(e['throughput_per_s'])}/s", e["bound"], fmt_bytes(e["memory_bytes"]), fmt_fit(e["fits"]),
            "n/a" if e["max_batch"] is None else str(e["max_batch"]), fmt_energy(e["energy_j"]),
        ])
    return rows


ESTIMATE_HEADER = ["target", "precision", "batch", "latency", "throughput", "bound", "memory", "fits", "max batch", "energy"]


def model_markdown(model: dict[str, Any]) -> str:
    name = esc(model["name"])
    if model["status"] != "ok":
        return f"### {name}\n\n**error:** {esc(model['error'])}\n"
    cov = model["coverage"]
    parts = [
        f"### {name}",
        "",
        f"{fmt_count(model['params'])} parameters, {fmt_count(model['macs'])} MACs, "
        f"{fmt_count(model['flops'])} FLOPs per forward at traced batch {model['traced_batch']}; "
        f"coverage {fmt_pct(cov['ops'])} of ops, {fmt_pct(cov['time'])} of estimated time.",
        "",
        md_table(ESTIMATE_HEADER, estimate_rows(model)),
    ]
    if model.get("measurement"):
        parts += ["", esc(measurement_line(model["measurement"]))]
    notes = sorted({n for e in model["estimates"] for n in e["notes"]})
    if notes:
        parts += ["", *[f"- {esc(n)}" for n in notes]]
    if model["unsupported_ops"]:
        parts += ["", "Ops without a FLOP rule (bytes still counted): " + ", ".join(
            f"{code(u['op'])} x{u['count']} ({fmt_pct(u['time_share'])} of time)" for u in model["unsupported_ops"])]
    if model.get("training"):
        rows = [[esc(t["target"]), t["precision"], str(t["batch"]), t["optimizer"], fmt_time(t["step_s"]),
                 fmt_time(t["epoch_s"]), fmt_bytes(t["memory_bytes"]), fmt_fit(t["fits"])] for t in model["training"]]
        parts += ["", "<details><summary>Training step (forward + backward + optimizer)</summary>", "",
                  md_table(["target", "precision", "batch", "optimizer", "step", "epoch", "memory", "fits"], rows),
                  "", "</details>"]
    top = model["ops"][:8]
    if top:
        rows = [[code(o["op"]), o["op_class"], str(o["count"]), fmt_count(o["macs"]), fmt_count(o["flops"]),
                 fmt_bytes(o["bytes"]), fmt_pct(o["time_share"])] for o in top]
        parts += ["", "<details><summary>Top operators by estimated time</summary>", "",
                  md_table(["op", "class", "count", "MACs", "FLOPs", "bytes", "time share"], rows), "", "</details>"]
    return "\n".join(parts) + "\n"


def measurement_line(m: dict[str, Any]) -> str:
    line = (f"measured here ({m['engine']}, batch {m['batch']}): {fmt_time(m['median_s'])} median, "
            f"p10-p90 {fmt_time(m['p10_s'])}-{fmt_time(m['p90_s'])} over {m['reps']} runs")
    for v in m.get("vs_calibrated", []):
        line += f"; estimate on {v['target']}: {fmt_time(v['estimate_s'])} ({v['ratio']:.2f}x the measurement)"
    return line


def report_markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    head = [
        "## ha-bot hardware analysis",
        "",
        f"Estimates (roofline, not measurements) at {esc(s['precision'])}, batch sizes "
        f"{', '.join(map(str, s['batch_sizes']))}, on: {', '.join(esc(t) for t in s['targets'])}. "
        "MACs are multiply-accumulates; FLOPs = 2 x MACs + elementwise work.",
        "",
    ]
    body = [model_markdown(m) for m in report["models"]]
    foot = [f"<sub>ha-bot {esc(report['tool']['version'])} · report schema {report['schema_version']}</sub>"]
    return "\n".join(head) + "\n".join(body) + "\n" + "\n".join(foot) + "\n"


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths)), *(fmt.format(*r) for r in rows)])


def report_text(report: dict[str, Any]) -> str:
    out = []
    for m in report["models"]:
        if m["status"] != "ok":
            out.append(f"{m['name']}: ERROR: {m['error']}\n")
            continue
        cov = m["coverage"]
        out.append(
            f"{m['name']}: {fmt_count(m['params'])} params, {fmt_count(m['macs'])} MACs, {fmt_count(m['flops'])} FLOPs "
            f"(traced batch {m['traced_batch']}); coverage {fmt_pct(cov['ops'])} ops / {fmt_pct(cov['time'])} time"
        )
        rows = [[c.replace("\\", "").replace("**", "") for c in r] for r in estimate_rows(m)]
        out.append(_text_table(ESTIMATE_HEADER, rows))
        for note in sorted({n for e in m["estimates"] for n in e["notes"]}):
            out.append(f"  note: {note}")
        if m.get("measurement"):
            out.append("  " + measurement_line(m["measurement"]))
        if m["unsupported_ops"]:
            out.append("  no FLOP rule (bytes counted): " + ", ".join(
                f"{u['op']} x{u['count']} ({fmt_pct(u['time_share'])} of time)" for u in m["unsupported_ops"]))
        out.append("")
    out.append("Estimates are roofline predictions on the named target profiles (see `ha-bot targets ID`).")
    return "\n".join(out) + "\n"
