"""Render a diff as the pull-request comment and the job summary. Pure.

Order: a one-line verdict, the narrative (if any), per model a table of targets (base -> head,
change, bound, fit), what moved, then collapsed details, and a footer with both SHAs and the
ha-bot version. Names from the repository are escaped. The comment stays within GitHub's limit by
trimming unchanged rows first, then details, then pointing to the job summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ha_bot.render import code, esc, fmt_bytes, fmt_count, fmt_energy, fmt_time, md_table

COMMENT_LIMIT = 65536 - 256  # GitHub's limit, less the hidden marker and stamp the publisher adds
SUMMARY_LIMIT = 1024 * 1024
ICON = {"ok": "✅", "warn": "⚠️", "fail": "❌"}
STATE_ORDER = ("error", "changed", "added", "no-baseline", "removed", "unchanged")


def _pct(c: Mapping[str, Any]) -> str:
    if c.get("base") is None:
        return "new"
    if c.get("pct") is None:
        return "n/a"
    p = c["pct"]
    if abs(p) < 0.05:
        return "±0%"
    return f"{p:+.1f}%"


def _arrow(c: Mapping[str, Any], fmt: Any) -> str:
    if c.get("base") is None:
        return fmt(c.get("head"))
    if c.get("base") == c.get("head"):
        return fmt(c.get("head"))
    return f"{fmt(c['base'])} → {fmt(c['head'])}"


def _fit(f: Mapping[str, Any]) -> str:
    word = {True: "yes", False: "**no**", None: "?"}
    if f.get("base") is None or f["base"] == f["head"]:
        return word[f["head"]]
    return f"{word[f['base']]} → {word[f['head']]}"


def verdict_line(d: Mapping[str, Any]) -> str:
    counts = d["counts"]
    parts = [f"{counts[s]} {s}" for s in ("changed", "added", "removed", "error", "no-baseline") if counts.get(s)]
    summary = ", ".join(parts) if parts else "no model changed"
    n = d["regressions"]
    if d["verdict"] == "fail":
        head = f"{ICON['fail']} **{n} budget check{'s' if n != 1 else ''} failed**"
    elif d["verdict"] == "warn":
        head = f"{ICON['warn']} **{n} budget warning{'s' if n != 1 else ''}**"
    else:
        head = f"{ICON['ok']} **Within budget**"
    info = " (informational: this check never fails)" if d.get("informational") else ""
    return f"{head} · {summary} · {counts.get('unchanged', 0)} unchanged{info}"


def _target_rows(m: Mapping[str, Any], only_changed: bool, epsilon: float) -> list[list[str]]:
    rows = []
    for t in m["targets"]:
        lat, mem = t["latency"], t["memory"]
        moved = (
            lat["pct"] is None or abs(lat["pct"]) >= epsilon or (mem["pct"] is not None and abs(mem["pct"]) >= epsilon)
            or t["fits"]["base"] != t["fits"]["head"]
        )
        if only_changed and not moved:
            continue
        rows.append([
            esc(t["target"]), str(t["batch"]), t["precision"], _arrow(lat, fmt_time), _pct(lat),
            _arrow(t["memory"], fmt_bytes), _pct(t["memory"]), _arrow(t["energy"], fmt_energy),
            t["bound"]["head"], _fit(t["fits"]),
        ])
    return rows


TARGET_HEADER = ["target", "batch", "precision", "latency", "Δ", "memory", "Δ", "energy", "bound", "fits"]


def _checks(m: Mapping[str, Any]) -> list[str]:
    out = []
    for c in m["checks"]:
        if c["level"] == "ok":
            continue
        if c["kind"] == "error":
            continue
        what = f"{c['metric']}{' on ' + esc(c['target']) if c['target'] else ''} ({esc(c['scope'])})"
        if c["kind"] == "regression":
            out.append(f"{ICON[c['level']]} {what}: {c['value']:+.1f}% > {c['limit']:g}% {c['level']} threshold")
        else:
            fmt = {"latency": fmt_time, "memory": fmt_bytes, "energy": fmt_energy}.get(c["metric"], fmt_count)
            out.append(f"{ICON[c['level']]} {what}: {fmt(c['value'])} > {c['level']} budget {fmt(c['limit'])}")
    return out


def _movers(m: Mapping[str, Any]) -> str:
    if not m.get("movers"):
        return ""
    target = esc(m.get("movers_target") or "")
    rows = [[code(x["module"]), fmt_time(x["base_s"] or 0), fmt_time(x["head_s"] or 0),
             ("+" if x["delta_s"] > 0 else "−") + fmt_time(abs(x["delta_s"])),
             "n/a" if x["share"] is None else f"{100 * x['share']:.0f}%"] for x in m["movers"]]
    return f"What moved (estimated time on {target}):\n\n" + md_table(["module", "base", "head", "Δ", "share of change"], rows)


def _chart(m: Mapping[str, Any]) -> str:
    """A Mermaid bar chart of the latency change per target (first batch), when something moved."""
    rows = [t for t in m["targets"] if t["batch"] == m["targets"][0]["batch"] and t["latency"]["pct"] is not None]
    if len(rows) < 2 or all(abs(t["latency"]["pct"]) < 0.05 for t in rows):
        return ""
    labels = ", ".join('"' + "".join(ch for ch in t["target"] if ch.isalnum() or ch in "_-.") + '"' for t in rows)
    values = ", ".join(f"{t['latency']['pct']:.2f}" for t in rows)
    return (
        "```mermaid\nxychart-beta\n"
        f'    title "Latency change by target (%), batch {rows[0]["batch"]}"\n'
        f"    x-axis [{labels}]\n"
        '    y-axis "change (%)"\n'
        f"    bar [{values}]\n```"
    )


def _details(m: Mapping[str, Any], d: Mapping[str, Any]) -> str:
    parts = [md_table(TARGET_HEADER, _target_rows(m, False, 0.0))]
    metrics = m.get("metrics", {})
    if metrics:
        parts.append("Model: " + ", ".join(f"{k} {_arrow(v, fmt_count)} ({_pct(v)})" for k, v in metrics.items()))
    cov = m.get("coverage") or {}
    if cov:
        parts.append(f"Coverage: {100 * (cov.get('ops') or 0):.1f}% of ops, {100 * (cov.get('time') or 0):.1f}% of estimated time have a FLOP rule.")
    if m.get("unsupported_ops"):
        parts.append("Ops without a FLOP rule (bytes still counted): " + ", ".join(
            f"{code(u['op'])} x{u['count']}" for u in m["unsupported_ops"]))
    return "<details><summary>Every target, coverage</summary>\n\n" + "\n\n".join(parts) + "\n\n</details>"


def model_section(m: Mapping[str, Any], d: Mapping[str, Any], *, details: bool = True) -> str:
    name = code(m["name"])
    eps = float(d.get("settings", {}).get("epsilon_pct", 1.0) or 1.0)
    if m["state"] == "removed":
        return f"#### {name} — removed\n"
    if m["state"] == "error":
        return f"#### {ICON['fail']} {name} — failed to analyse\n\n{esc(m['error'])}\n"
    label = {"added": "new model", "changed": "changed", "unchanged": "unchanged", "no-baseline": "no baseline"}[m["state"]]
    parts = [f"#### {name} — {label}"]
    if m.get("note"):
        parts.append(f"_{esc(m['note'])}_")
    checks = _checks(m)
    if checks:
        parts.append("\n".join(f"- {c}" for c in checks))
    rows = _target_rows(m, m["state"] == "changed", eps)
    if rows:
        parts.append(md_table(TARGET_HEADER, rows))
    chart = _chart(m) if m["state"] == "changed" else ""
    if chart:
        parts.append(chart)
    movers = _movers(m)
    if movers:
        parts.append(movers)
    if details:
        parts.append(_details(m, d))
    return "\n\n".join(parts) + "\n"


def _assumptions(d: Mapping[str, Any]) -> str:
    s = d.get("settings", {})
    links = []
    for tid, t in sorted(d.get("targets", {}).items()):
        urls = [u for group in t.get("sources", {}).values() for u in group if str(u).startswith("http")]
        links.append(f"[{esc(tid)}]({urls[0]})" if urls else esc(tid))
    return (
        "<details><summary>Assumptions</summary>\n\n"
        f"Roofline estimates (not measurements) at {esc(s.get('precision'))}, batch sizes "
        f"{', '.join(map(str, s.get('batch_sizes', [])))}; time per op = max(compute at the target's dense peak × "
        "efficiency, bytes at its bandwidth × efficiency) + launch overhead, elementwise ops fused where the runtime fuses. "
        "MACs are multiply-accumulates; FLOPs = 2 × MACs + elementwise work. Target profiles and their sources: "
        + ", ".join(links) + ".\n\n</details>"
    )


def _footer(d: Mapping[str, Any]) -> str:
    b, h = d.get("base", {}), d.get("head", {})
    base_label = "merge-base" if b.get("merge_base") else "base"
    note = f" · {esc(b['note'])}" if b.get("note") else ""
    version = d.get("tool", {}).get("version", "?")
    return f"<sub>{base_label} `{esc(str(b.get('sha', '?'))[:12])}` ({esc(b.get('ref', ''))}) → head `{esc(str(h.get('sha', '?'))[:12])}` · ha-bot {esc(version)}{note}</sub>"


def render(
    d: Mapping[str, Any],
    *,
    narrative: str | None = None,
    narrative_note: str | None = None,
    card_diffs: Sequence[str] = (),
    limit: int = COMMENT_LIMIT,
    overflow_hint: str = "the job summary has the full report",
) -> str:
    """The comment body (without the hidden markers the publisher adds)."""
    models = sorted(d["models"], key=lambda m: (STATE_ORDER.index(m["state"]), m["name"]))
    head = ["### ha-bot hardware impact", "", verdict_line(d)]
    if narrative:
        head += ["", narrative]
    if narrative_note:
        head += ["", f"<sub>{esc(narrative_note)}</sub>"]
    tail = [_assumptions(d)]
    if card_diffs:
        tail.insert(0, "<details><summary>Stale model cards (run <code>ha-bot card</code>)</summary>\n\n"
                    + "\n\n".join("```diff\n" + c.replace("```", "ʼʼʼ") + "\n```" for c in card_diffs) + "\n\n</details>")
    tail.append(_footer(d))

    def assemble(sections: Sequence[str], extra: str = "") -> str:
        body = "\n".join(head) + "\n\n" + "\n".join(sections)
        if extra:
            body += f"\n{extra}\n"
        return body + "\n" + "\n\n".join(tail) + "\n"

    changed = [m for m in models if m["state"] != "unchanged"]
    unchanged = [m for m in models if m["state"] == "unchanged"]
    unchanged_line = ""
    if unchanged:
        unchanged_line = "Unchanged: " + ", ".join(code(m["name"]) for m in unchanged)
    attempts = [
        ([model_section(m, d) for m in changed] + [model_section(m, d) for m in unchanged], ""),
        ([model_section(m, d) for m in changed], unchanged_line),
        ([model_section(m, d, details=False) for m in changed], unchanged_line),
    ]
    for sections, extra in attempts:
        text = assemble(sections, extra)
        if len(text) <= limit:
            return text
    # still too long: keep whole sections while they fit, then point to the full report
    kept: list[str] = []
    note = f"\n_… {{n}} more model(s) not shown: {overflow_hint}._\n"
    for i, sec in enumerate(attempts[-1][0]):
        trial = assemble([*kept, sec], note.format(n=len(changed) - i - 1))
        if len(trial) > limit:
            break
        kept.append(sec)
    text = assemble(kept, note.format(n=len(changed) - len(kept)))
    return text if len(text) <= limit else text[: limit - 200] + f"\n\n_… truncated: {overflow_hint}._\n"


def summary(d: Mapping[str, Any], **kw: Any) -> str:
    """The job summary: the full report (up to GitHub's 1 MiB)."""
    return render(d, limit=SUMMARY_LIMIT, overflow_hint="the JSON report artifact has everything", **kw)
