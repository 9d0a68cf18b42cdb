"""Model cards: refresh ha-bot's one front-matter key and one body section. Pure: text in, text out.

A card is Markdown with optional YAML front matter (Hugging Face compatible). ha-bot owns exactly
the top-level front-matter key ``hardware:`` and the body section between ``<!-- ha-bot:start -->``
and ``<!-- ha-bot:end -->``. Everything else is kept byte for byte: the edit is a splice of those
lines (other keys, comments, quoting, key order, line endings, a BOM and a missing final newline
all survive), and ruamel.yaml then checks that the new front matter parses and that every other key
is unchanged. The ``hardware:`` block is emitted by hand, deterministically, with numbers rounded to
3 significant digits, so that re-runs never churn the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ha_bot.errors import HaBotError

KEY = "hardware"
MARK_START = "<!-- ha-bot:start -->"
MARK_END = "<!-- ha-bot:end -->"
BOM = "\ufeff"
NOTE = (
    "roofline estimates on named target profiles, not measurements; "
    "macs = multiply-accumulates, flops = 2 x macs + elementwise work"
)


class CardError(HaBotError):
    """A model card ha-bot cannot update safely; names the file and line."""

    def __init__(self, message: str, *, file: str = "", line: int | None = None) -> None:
        self.file, self.line, self.detail = file, line, message
        where = (file or "<card>") + (f":{line}" if line is not None else "")
        super().__init__(f"{where}: {message}")


class _Parts(NamedTuple):
    bom: str  # "" or the UTF-8 byte order mark
    eol: str  # the card's line ending: "\n" or "\r\n"
    lead: str  # blank lines before the opening '---'
    open: str  # the opening '---' line with its ending ("" when there is no front matter)
    front: list[str]  # front-matter lines, each with its ending
    close: str  # the closing '---' line with its ending
    body: str  # everything after the front matter
    body_line: int  # 1-based line number of the body's first line


# ----------------------------------------------------------------------------- splitting


def _lines(text: str) -> list[str]:
    """Split after each '\\n' only (str.splitlines also splits on \\r, \\f, U+2028, ...)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _content(line: str) -> str:
    return line.rstrip("\n").rstrip("\r")


def _eol(text: str) -> str:
    i = text.find("\n")
    return "\r\n" if i > 0 and text[i - 1] == "\r" else "\n"


def split_card(text: str, path: str = "") -> _Parts:
    bom = BOM if text.startswith(BOM) else ""
    text = text[len(bom):]
    eol = _eol(text)
    lines = _lines(text)
    first = next((i for i, ln in enumerate(lines) if _content(ln).strip()), None)
    if first is None or _content(lines[first]).rstrip() != "---":
        return _Parts(bom, eol, "", "", [], "", text, 1)
    for j in range(first + 1, len(lines)):
        if _content(lines[j]).rstrip() == "---":
            return _Parts(bom, eol, "".join(lines[:first]), lines[first], lines[first + 1 : j], lines[j],
                          "".join(lines[j + 1 :]), j + 2)
    raise CardError("unterminated front matter: the opening '---' has no closing '---' line", file=path, line=first + 1)


# ----------------------------------------------------------------------------- front matter


_YAML_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def _yaml_lines(text: str) -> list[tuple[int, bool]]:
    """For each line as YAML counts them (it also breaks at \\r, U+0085, U+2028, U+2029): the index of
    the '\\n'-separated line it starts in, and whether it starts at the beginning of that line."""
    out, n = [(0, True)], 0
    for m in _YAML_BREAK.finditer(text):
        clean = m.group().endswith("\n")
        n += clean
        out.append((n, clean))
    return out


def _load_yaml(text: str, path: str, first_line: int) -> Any:
    from ruamel.yaml import YAML

    try:
        return YAML(typ="rt").load(text)
    except Exception as e:  # ruamel raises YAMLError, and ValueError/TypeError from its constructors
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        lines = _yaml_lines(text)
        line = first_line + lines[min(mark.line, len(lines) - 1)][0] if mark is not None else first_line
        problem = getattr(e, "problem", None) or str(e).strip().splitlines()[0]
        raise CardError(f"invalid YAML front matter: {problem}", file=path, line=line) from None


def _plain(obj: Any) -> Any:
    """ruamel's round-trip types -> plain Python, for comparing what two documents mean."""
    if isinstance(obj, Mapping):
        return [(_plain(k), _plain(v)) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, bool) or obj is None:
        return obj
    for kind in (int, float, str):
        if isinstance(obj, kind):
            return repr(kind(obj))  # repr: NaN compares equal to itself
    return repr(obj)


def _others(doc: Any) -> Any:
    return _plain({k: v for k, v in doc.items() if k != KEY}) if doc else []


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


_SIBLING = re.compile(r"""(<<|"[^"]*"|'[^']*'|[^\s#\-"'][^:#]*?)\s*:(\s|$)""")


def _is_skippable(line: str) -> bool:
    s = _content(line).strip()
    return not s or s.startswith("#")


def _block_range(front: list[str], doc: Any, path: str, first: int) -> tuple[int, int, int] | None:
    """(first line, end line, indent) of the existing top-level ``hardware:`` entry, or None."""
    pos = doc.lc.data.get(KEY) if doc is not None else None
    if pos is None:
        return None
    lines = _yaml_lines("".join(front))

    def line_of(yaml_line: int) -> int:
        index, clean = lines[yaml_line]
        if not clean:
            raise CardError("the front matter breaks lines with \\r, U+0085, U+2028 or U+2029 as well as \\n; "
                            f"ha-bot cannot edit `{KEY}:` safely there", file=path, line=first + index)
        return index

    start, col = line_of(pos[0]), pos[1]
    after = [line_of(p[0]) for k, p in doc.lc.data.items() if k != KEY and p[0] > pos[0]]
    end = min(after) if after else len(front)
    for i in range(start + 1, end):  # merge keys (<<:) are missing from lc.data
        text = _content(front[i])
        if not _is_skippable(front[i]) and _indent(text) == col and _SIBLING.match(text[col:]):
            end = i
            break
    while end > start + 1 and _is_skippable(front[end - 1]):
        end -= 1  # comments and blank lines before the next key belong to it
    return start, end, col


def _top_indent(doc: Any) -> int:
    if doc is not None and doc.lc.data:
        return int(min(p[1] for p in doc.lc.data.values()))
    return 0


def _splice_front(parts: _Parts, data: Mapping[str, Any], path: str) -> list[str]:
    first = parts.lead.count("\n") + 2
    doc = _load_yaml("".join(parts.front), path, first)
    if doc is not None and not isinstance(doc, Mapping):
        raise CardError(f"front matter must be a YAML mapping (key: value), not a {type(doc).__name__}",
                        file=path, line=first)
    fa = getattr(doc, "fa", None)
    if fa is not None and fa.flow_style():
        raise CardError("front matter is a flow mapping ({...}); write it in block style to let ha-bot add "
                        f"its `{KEY}:` key", file=path, line=first)
    found = _block_range(parts.front, doc, path, first)
    indent = found[2] if found else _top_indent(doc)
    new_block = [" " * indent + ln + parts.eol for ln in yaml_block(KEY, data)]
    if found:
        start, end, _ = found
        front = parts.front[:start] + new_block + parts.front[end:]
    else:
        front = list(parts.front)
        if front and not front[-1].endswith("\n"):
            front[-1] += parts.eol
        front += new_block
    try:
        new = _load_yaml("".join(front), path, first)
    except CardError:
        new = None
    if not isinstance(new, Mapping) or _others(new) != _others(doc) or _plain(new.get(KEY)) != _plain(data):
        line = first + found[0] if found else first
        raise CardError(f"cannot replace `{KEY}:` without changing other front-matter keys (is it the target of "
                        "an alias, or written in an unusual layout?); delete it and re-run", file=path, line=line)
    return front


# ----------------------------------------------------------------------------- the hardware block


def round3(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return x
    return float(f"{x:.3g}")


def _int3(x: float | None) -> int | None:
    return None if x is None else int(float(f"{x:.3g}"))


_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_./\-]*\Z")
_RESERVED = frozenset("y n yes no on off true false null".split())


def _is_printable(c: str) -> bool:
    o = ord(c)
    return o == 0x09 or 0x20 <= o <= 0x7E or 0xA0 <= o <= 0xD7FF or 0xE000 <= o <= 0xFFFD or o >= 0x10000


def yaml_str(s: str) -> str:
    """A YAML scalar for ``s`` that PyYAML (Hugging Face) and ruamel read back as the same string."""
    if _PLAIN.match(s) and s.lower() not in _RESERVED:
        return s
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif _is_printable(c):
            out.append(c)
        elif ord(c) <= 0xFF:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


def yaml_scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ".nan"
        if math.isinf(v):
            return ".inf" if v > 0 else "-.inf"
        s = f"{v:.3g}"
        mant, _, exp = s.partition("e")
        if "." not in mant:
            mant += ".0"  # YAML 1.1 (PyYAML) needs a dot to read a float
        return f"{mant}e{exp}" if exp else mant
    return yaml_str(str(v))


def yaml_block(key: str, value: Any, indent: int = 0) -> list[str]:
    """Block-style YAML lines (without line endings) for one ``key: value``, in the given key order."""
    pad = " " * indent
    if isinstance(value, Mapping) and value:
        lines = [f"{pad}{yaml_str(key)}:"]
        for k, v in value.items():
            lines += yaml_block(str(k), v, indent + 2)
        return lines
    if isinstance(value, (list, tuple)) and value:
        lines = [f"{pad}{yaml_str(key)}:"]
        for item in value:
            if isinstance(item, Mapping) and item:
                sub = [ln for k, v in item.items() for ln in yaml_block(str(k), v, indent + 4)]
                lines += [f"{pad}  - {sub[0][indent + 4:]}", *sub[1:]]
            else:
                lines.append(f"{pad}  - {_flow_empty(item) or yaml_scalar(item)}")
        return lines
    return [f"{pad}{yaml_str(key)}: {_flow_empty(value) or yaml_scalar(value)}"]


def _flow_empty(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, (list, tuple)):
        return "[]"
    return ""


def _estimate_data(e: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "target": e["target"],
        "batch": e["batch"],
        "precision": e["precision"],
        "latency_s": round3(e.get("latency_s")),
        "throughput_per_s": round3(e.get("throughput_per_s")),
        "bound": e.get("bound"),
        "memory_bytes": _int3(e.get("memory_bytes")),
        "fits": e.get("fits"),
        "max_batch": e.get("max_batch"),
        "energy_j": round3(e.get("energy_j")),
    }


def _training_data(t: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "target": t["target"],
        "batch": t["batch"],
        "precision": t["precision"],
        "optimizer": t["optimizer"],
        "step_s": round3(t.get("step_s")),
        "epoch_s": round3(t.get("epoch_s")),
        "memory_bytes": _int3(t.get("memory_bytes")),
        "fits": t.get("fits"),
    }


def hardware_data(model: Mapping[str, Any], version: str, training: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The value of the ``hardware:`` key: plain data in a fixed key order, numbers rounded."""
    cov = model.get("coverage") or {}
    data: dict[str, Any] = {
        "generator": f"ha-bot {version}",
        "note": NOTE,
        "params": model.get("params"),
        "macs": model.get("macs"),
        "flops": model.get("flops"),
        "precision": model.get("precision"),
        "coverage": {"ops": round3(cov.get("ops")), "time": round3(cov.get("time"))},
        "estimates": [_estimate_data(e) for e in sorted(model.get("estimates") or [], key=_order)],
        "training": [_training_data(t) for t in sorted(model.get("training") or [], key=_order)],
    }
    if training is not None:
        from ha_bot import trainlog  # only with a training log: the hook's no-op run stays fast

        data["training_run"] = trainlog.training_data(training["summary"], training.get("comparison"))
    return _rounded(data)


def _rounded(data: Any) -> Any:
    """Every float to 3 significant digits: what the block holds is exactly what it reads back as."""
    if isinstance(data, Mapping):
        return {k: _rounded(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_rounded(v) for v in data]
    return round3(data) if isinstance(data, float) else data


def _order(e: Mapping[str, Any]) -> tuple[str, int]:
    return str(e["target"]), int(e["batch"])


# ----------------------------------------------------------------------------- the body section


def render_section(model: Mapping[str, Any], version: str, training: Mapping[str, Any] | None = None) -> str:
    """The Markdown between the markers (LF line endings)."""
    from ha_bot import render

    cov = model.get("coverage") or {}
    parts = [
        "## Hardware",
        "",
        f"_Maintained by ha-bot {render.esc(version)}: this section and the `{KEY}:` front-matter key are "
        "regenerated; edit outside them._",
        "",
        f"Roofline **estimates**, not measurements, on named hardware target profiles (see `ha-bot targets ID` "
        f"for each profile's assumptions and sources) at {render.esc(model.get('precision'))}. "
        "MACs are multiply-accumulates; FLOPs = 2 x MACs + elementwise work.",
        "",
        f"{render.fmt_count(model.get('params'))} parameters, {render.fmt_count(model.get('macs'))} MACs, "
        f"{render.fmt_count(model.get('flops'))} FLOPs per forward pass"
        + (f" at batch {model['traced_batch']}" if model.get("traced_batch") is not None else "")
        + f"; the cost model covers {render.fmt_pct(cov.get('ops'))} of ops and "
        f"{render.fmt_pct(cov.get('time'))} of estimated time.",
    ]
    if model.get("estimates"):
        parts += ["", "### Inference", "", render.md_table(render.ESTIMATE_HEADER, render.estimate_rows(dict(model)))]
        notes = sorted({n for e in model["estimates"] for n in e.get("notes", [])})
        if notes:
            parts += ["", *[f"- {render.esc(n)}" for n in notes]]
    unsupported = model.get("unsupported_ops") or []
    if unsupported:
        parts += ["", "Ops without a FLOP rule (their bytes are still counted): " + ", ".join(
            f"{render.esc(u['op'])} x{u['count']}" for u in unsupported) + "."]
    if model.get("training"):
        rows = [[render.esc(t["target"]), render.esc(t["precision"]), str(t["batch"]), render.esc(t["optimizer"]),
                 render.fmt_time(t["step_s"]), render.fmt_time(t["epoch_s"]), render.fmt_bytes(t["memory_bytes"]),
                 render.fmt_fit(t["fits"])] for t in model["training"]]
        parts += ["", "### Training step (estimate: forward + backward + optimizer update)", "",
                  render.md_table(["target", "precision", "batch", "optimizer", "step", "epoch", "memory", "fits"], rows)]
    if training is not None:
        from ha_bot import trainlog

        parts += ["", trainlog.render_training(training["summary"], training.get("comparison")).rstrip("\n")]
    return "\n".join(parts) + "\n"


def _fenced(lines: Sequence[str]) -> tuple[list[bool], int | None]:
    """For each line: is it inside (or a fence of) a fenced code block? And the index of a fence left open."""
    out: list[bool] = []
    fence, opened = "", None
    for i, ln in enumerate(lines):
        s = _content(ln)
        m = re.match(r" {0,3}(`{3,}|~{3,})", s)
        if fence:
            out.append(True)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not s.strip().strip(fence[0]):
                fence, opened = "", None
        elif m and not (m.group(1)[0] == "`" and "`" in s[m.end():]):
            out.append(True)
            fence, opened = m.group(1), i
        else:
            out.append(False)
    return out, opened


def _markers(lines: Sequence[str], path: str, first: int) -> tuple[int, int] | None:
    starts, ends = [], []
    flags, open_fence = _fenced(lines)
    for i, (ln, fenced) in enumerate(zip(lines, flags, strict=True)):
        s = _content(ln).strip()
        if not fenced and s == MARK_START:
            starts.append(i)
        elif not fenced and s == MARK_END:
            ends.append(i)
    if len(starts) > 1:
        raise CardError(f"duplicate {MARK_START} (first on line {first + starts[0]}); keep one ha-bot section",
                        file=path, line=first + starts[1])
    if len(ends) > 1:
        raise CardError(f"duplicate {MARK_END} (first on line {first + ends[0]}); keep one ha-bot section",
                        file=path, line=first + ends[1])
    if starts and not ends:
        raise CardError(f"{MARK_START} has no matching {MARK_END}", file=path, line=first + starts[0])
    if ends and not starts:
        raise CardError(f"{MARK_END} has no matching {MARK_START} before it", file=path, line=first + ends[0])
    if starts and ends[0] < starts[0]:
        raise CardError(f"{MARK_END} comes before {MARK_START} (line {first + starts[0]})", file=path,
                        line=first + ends[0])
    if not starts and open_fence is not None:
        raise CardError("this code fence is never closed, so ha-bot cannot append its section after it; "
                        "close the fence", file=path, line=first + open_fence)
    return (starts[0], ends[0]) if starts else None


def _splice_body(body: str, section: str, eol: str, path: str, first: int) -> str:
    inner = eol + section.replace("\n", eol) + eol
    lines = _lines(body)
    found = _markers(lines, path, first)
    if found:
        start, end = found
        return "".join(lines[: start + 1]) + inner + "".join(lines[end:])
    block = MARK_START + eol + inner + MARK_END
    if not body:
        return block + eol
    if not body.endswith("\n"):
        return body + eol + eol + block  # keep the missing final newline missing
    if body.endswith("\n\n") or body.endswith("\n\r\n") or body.strip("\r\n") == "":
        return body + block + eol
    return body + eol + block + eol


# ----------------------------------------------------------------------------- the whole card


def skeleton(name: str, eol: str = "\n") -> str:
    from ha_bot.render import esc

    text = (
        f"---\n{KEY}: {{}}\n---\n\n# {esc(name)}\n\n## Model description\n\n"
        "_What the model does, its architecture, inputs and outputs, and the data it was trained on._\n\n"
        "## Intended use\n\n_Who should use it and for what; known limitations and out-of-scope uses._\n"
    )
    return text.replace("\n", eol)


def update_card(
    text: str | None,
    model: Mapping[str, Any],
    *,
    version: str,
    training: Mapping[str, Any] | None = None,
    path: str = "",
) -> str:
    """The card ``text`` with ha-bot's ``hardware:`` key and section refreshed from a report model entry.

    ``text`` None makes a new card. ``training`` is ``{"summary": TrainingSummary, "comparison": dict}``
    (see :func:`ha_bot.trainlog.training_for`). A model whose analysis failed leaves the card unchanged
    ("" for a new card): the caller reports the error. Raises :class:`CardError` for a card that cannot be
    updated safely, naming the file and line.
    """
    if model.get("status", "ok") != "ok":
        return text if text is not None else ""
    if text is None:
        text = skeleton(str(model["name"]))
    parts = split_card(text, path)
    data = hardware_data(model, version, training)
    section = render_section(model, version, training)
    if parts.open:
        front = _splice_front(parts, data, path)
        close = parts.close if parts.close.endswith("\n") else parts.close + parts.eol
        head = parts.lead + parts.open + "".join(front) + close
    else:
        head = "---" + parts.eol + "".join(ln + parts.eol for ln in yaml_block(KEY, data)) + "---" + parts.eol
    body = _splice_body(parts.body, section, parts.eol, path, parts.body_line)
    return parts.bom + head + body
