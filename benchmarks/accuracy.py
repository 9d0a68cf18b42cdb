"""How good are ha-bot's latency estimates? Calibrate, estimate, measure, compare.

    python benchmarks/accuracy.py                                # calibrate here (60 s), then ~25 models
    python benchmarks/accuracy.py --calibration my_cpu.yaml      # reuse a calibration file
    python benchmarks/accuracy.py --device cuda --engine torch   # on a GPU (see gpu_check.sh)

For every model of ``benchmarks/arch.py`` (batch 1; images 224x224 unless stated, UNet 256x256,
text 128 tokens): count it with ``count_module``, estimate fp32 batch-1 latency with
``cost.estimate`` on the calibrated target, and measure it with the runtime the calibration
measured (onnxruntime on the exported ONNX model by default, eager PyTorch with ``--engine
torch``). Measurements come in bursts of runs, in passes over all models; ``/proc/stat`` says how
much of the CPU other processes took during each burst, and each model keeps the fastest median of
its quiet bursts (see ``ha_bot.measure``), so that a neighbour's load is not taken for the model's.

Reports: estimate vs measurement per model and their ratio; the share within +-25% and within 2x;
Spearman's rank correlation; for pairs of related models, the estimated change vs the measured
change (what a pull request's comment would show); and a baseline: FLOPs over one best-fit
throughput (least squares in log space over all the models: it is fitted to the test set, so it is
a generous baseline). JSON goes to ``benchmarks/results/accuracy.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


# --- statistics ---------------------------------------------------------------------------------


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else float("nan")


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (Pearson correlation of the ranks; ties averaged)."""
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("spearman needs two sequences of the same length >= 2")
    return pearson(ranks(x), ranks(y))


def within(ratio: float, tolerance: float) -> bool:
    """``ratio`` = estimate / measured, inside [1 - tolerance, 1 + tolerance]."""
    return 1 - tolerance <= ratio <= 1 + tolerance


def within_factor(ratio: float, factor: float) -> bool:
    return 1 / factor <= ratio <= factor


def fit_throughput(flops: Sequence[float], seconds: Sequence[float]) -> float:
    """The one FLOP/s that best explains ``seconds = flops / rate`` in log space (least squares)."""
    return math.exp(statistics.fmean(math.log(f) - math.log(s) for f, s in zip(flops, seconds, strict=True)))


def summary(est: Sequence[float], meas: Sequence[float]) -> dict[str, float]:
    ratios = [e / m for e, m in zip(est, meas, strict=True)]
    logs = [abs(math.log(r)) for r in ratios]
    return {
        "within_25pct": sum(within(r, 0.25) for r in ratios) / len(ratios),
        "within_2x": sum(within_factor(r, 2.0) for r in ratios) / len(ratios),
        "spearman": spearman(est, meas),
        "median_abs_log_ratio": statistics.median(logs),
        "geomean_ratio": math.exp(statistics.fmean(math.log(r) for r in ratios)),
        "worst_ratio": max(ratios, key=lambda r: abs(math.log(r))),
    }


# --- the run --------------------------------------------------------------------------------------


def load_target(args: argparse.Namespace) -> tuple[Any, float | None]:
    from ha_bot import calibrate, targets

    if args.calibration:
        found = targets.load_targets_file(args.calibration)
        return next(iter(found.values())), None
    t0 = time.perf_counter()
    doc = calibrate.calibrate(name="accuracy_calibration", budget_s=args.budget, engine=args.engine,
                              device=args.device, progress=(None if args.quiet else lambda m: print(f"  {m}", file=sys.stderr)))
    wall = time.perf_counter() - t0
    out = ROOT / "benchmarks" / "results" / f"calibration_{args.device}_{args.engine}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        calibrate.dump_yaml(doc, f)
    print(f"calibration: {wall:.1f} s, written to {out.relative_to(ROOT)}")
    return targets.parse_target(doc, origin=str(out)), wall


class Runner:
    """Measures one model with the engine the calibration used."""

    def __init__(self, case: Any, engine: str, device: str, workdir: str) -> None:
        import torch

        from ha_bot.measure import export_onnx, ort_feeds, ort_session

        torch.manual_seed(0)
        self.model = case.build().eval()
        self.inputs = case.inputs()
        self.engine, self.device = engine, device
        if engine == "onnxruntime":
            path = os.path.join(workdir, f"{case.name}.onnx")
            export_onnx(self.model, self.inputs, path)
            self.session = ort_session(path, device=device)
            self.feeds = ort_feeds(self.session, self.inputs)
            self.model = None  # the session holds the weights now
        elif device == "cuda":
            self.model = self.model.cuda()
            self.inputs = tuple(t.cuda() for t in self.inputs)

    def measure(self, reps: int, warmup: int) -> Any:
        from ha_bot.measure import measure_session, measure_torch

        if self.engine == "onnxruntime":
            return measure_session(self.session, self.feeds, warmup=warmup, reps=reps)
        return measure_torch(self.model, self.inputs, warmup=warmup, reps=reps)


def best_burst(bursts: Sequence[Any]) -> Any:
    """The fastest quiet burst; the least busy one when none was quiet."""
    from ha_bot.measure import QUIET

    quiet = [m for m in bursts if m.busy <= QUIET]
    return min(quiet, key=lambda m: m.median_s) if quiet else min(bursts, key=lambda m: m.busy)


def measure_all(runners: dict[str, Runner], args: argparse.Namespace) -> dict[str, list[Any]]:
    """Bursts of runs over all models, in passes, until each has ``--quiet-bursts`` quiet bursts
    (other processes under measure.QUIET of the CPU) or ``--max-wait`` seconds have passed."""
    from ha_bot.measure import QUIET

    bursts: dict[str, list[Any]] = {name: [] for name in runners}
    reps: dict[str, int] = {}
    deadline = time.perf_counter() + args.max_wait
    passes = 0
    while True:
        short = {n: sum(m.busy <= QUIET for m in bs) for n, bs in bursts.items()}
        todo = [n for n in sorted(bursts, key=lambda n: short[n]) if short[n] < args.quiet_bursts]
        if not todo or (passes >= args.rounds and time.perf_counter() > deadline):
            break
        passes += 1
        for name in todo:
            if name not in reps:
                first = runners[name].measure(reps=2, warmup=1)
                reps[name] = max(3, min(50, int(args.seconds_per_model / max(first.median_s, 1e-6))))
            bursts[name].append(runners[name].measure(reps=reps[name], warmup=0))
        done = sum(any(m.busy <= QUIET for m in bs) for bs in bursts.values())
        if not args.quiet:
            print(f"  pass {passes}: {done}/{len(bursts)} models have a quiet measurement", file=sys.stderr)
    return bursts


def run(args: argparse.Namespace) -> dict[str, Any]:
    import arch
    import torch

    from ha_bot import cost, targets
    from ha_bot.calibrate import derive_for
    from ha_bot.count_torch import count_module
    from ha_bot.measure import QUIET

    target, cal_wall = load_target(args)
    extra = [targets.load_builtin()[t] for t in args.target]
    chosen = [c for c in arch.cases() if not args.models or c.name in args.models]
    rows: list[dict[str, Any]] = []
    runners: dict[str, Runner] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for case in chosen:
            t0 = time.perf_counter()
            runners[case.name] = Runner(case, args.engine, args.device, workdir)
            torch.manual_seed(0)
            count = count_module(case.build().eval(), case.inputs())
            est = cost.estimate(count, target, "fp32", 1)
            row = {"model": case.name, "input": case.shape, "gflops": count.flops / 1e9, "params_m": count.params / 1e6,
                   "estimate_s": est.latency_s, "bound": est.bound, "kernels": est.kernels}
            for t in extra:
                row[f"estimate_s[{t.id}]"] = cost.estimate(count, t, "fp32", 1).latency_s
                row[f"estimate_s[{t.id}+derived]"] = cost.estimate(count, derive_for(t, target), "fp32", 1).latency_s
            rows.append(row)
            if not args.quiet:
                print(f"  prepared {case.name} ({time.perf_counter() - t0:.1f} s): estimate {est.latency_s * 1e3:.2f} ms",
                      file=sys.stderr)
        bursts = measure_all(runners, args)
    for row in rows:
        m = best_burst(bursts[row["model"]])
        row.update(measured_s=m.median_s, p10_s=m.p10_s, p90_s=m.p90_s, reps=m.reps, busy=m.busy,
                   quiet=m.busy <= QUIET, bursts=len(bursts[row["model"]]))
        row["ratio"] = row["estimate_s"] / row["measured_s"]
    return assemble(rows, target, cal_wall, args, extra)


def assemble(rows: list[dict[str, Any]], target: Any, cal_wall: float | None, args: argparse.Namespace,
             extra: Sequence[Any]) -> dict[str, Any]:
    import arch

    est = [r["estimate_s"] for r in rows]
    meas = [r["measured_s"] for r in rows]
    flops = [r["gflops"] * 1e9 for r in rows]
    rate = fit_throughput(flops, meas)
    base = [f / rate for f in flops]
    for r, b in zip(rows, base, strict=True):
        r["baseline_s"] = b
        r["baseline_ratio"] = b / r["measured_s"]
    by_name = {r["model"]: r for r in rows}
    pairs = []
    for a, b in arch.PAIRS:
        if a in by_name and b in by_name:
            ra, rb = by_name[a], by_name[b]
            e = rb["estimate_s"] / ra["estimate_s"]
            m = rb["measured_s"] / ra["measured_s"]
            f = rb["gflops"] / ra["gflops"]
            pairs.append({"from": a, "to": b, "estimated_change": e, "measured_change": m, "ratio": e / m,
                          "flops_change": f, "flops_ratio": f / m})
    doc: dict[str, Any] = {
        "target": target.id,
        "engine": args.engine,
        "device": args.device,
        "precision": "fp32",
        "batch": 1,
        "calibration_wall_s": cal_wall,
        "calibration_sources": list(target.sources.get("calibration", ())),
        "models": rows,
        "summary": summary(est, meas),
        "pairs": pairs,
        "pairs_summary": {
            "within_10pct": sum(within(p["ratio"], 0.10) for p in pairs) / len(pairs) if pairs else None,
            "within_25pct": sum(within(p["ratio"], 0.25) for p in pairs) / len(pairs) if pairs else None,
            "baseline_within_25pct": sum(within(p["flops_ratio"], 0.25) for p in pairs) / len(pairs) if pairs else None,
        },
        "baseline": {"fitted_gflops_per_s": rate / 1e9, **summary(base, meas)},
    }
    for t in extra:
        for key in (f"estimate_s[{t.id}]", f"estimate_s[{t.id}+derived]"):
            doc[f"summary[{key[11:-1]}]"] = summary([r[key] for r in rows], meas)
    return doc


def show(doc: dict[str, Any]) -> str:
    lines = [f"target {doc['target']} ({doc['engine']}, {doc['device']}, fp32, batch 1)", ""]
    head = f"{'model':22s} {'input':14s} {'GFLOP':>7s} {'est ms':>9s} {'meas ms':>9s} {'p10-p90 ms':>17s} {'ratio':>6s} {'base':>6s} {'busy':>5s}  bound"
    lines += [head, "-" * len(head)]
    for r in doc["models"]:
        lines.append(f"{r['model']:22s} {r['input']:14s} {r['gflops']:7.2f} {r['estimate_s'] * 1e3:9.2f} "
                     f"{r['measured_s'] * 1e3:9.2f} {r['p10_s'] * 1e3:8.2f}-{r['p90_s'] * 1e3:8.2f} "
                     f"{r['ratio']:6.2f} {r['baseline_ratio']:6.2f} {r['busy']:5.0%}{' ' if r['quiet'] else '!'} {r['bound']}")
    s, b = doc["summary"], doc["baseline"]
    noisy = [r["model"] for r in doc["models"] if not r["quiet"]]
    lines.append("busy: share of the time the runtime waited for a CPU another process held (or that other processes used) during the burst kept"
                 + (f"; '!' = never measured on a quiet machine: {', '.join(noisy)}" if noisy else "; all quiet"))
    lines += ["", f"{'':28s}{'ha-bot':>10s}{'FLOPs-only baseline':>22s}"]
    lines.append(f"{'within +-25%':28s}{s['within_25pct']:10.0%}{b['within_25pct']:22.0%}")
    lines.append(f"{'within 2x':28s}{s['within_2x']:10.0%}{b['within_2x']:22.0%}")
    lines.append(f"{'Spearman rank correlation':28s}{s['spearman']:10.3f}{b['spearman']:22.3f}")
    lines.append(f"{'median |log ratio|':28s}{s['median_abs_log_ratio']:10.3f}{b['median_abs_log_ratio']:22.3f}")
    lines.append(f"{'worst ratio':28s}{s['worst_ratio']:10.2f}{b['worst_ratio']:22.2f}")
    lines.append(f"(baseline: one fitted throughput, {b['fitted_gflops_per_s']:.1f} GFLOP/s, fitted on these models)")
    if doc["pairs"]:
        lines += ["", f"{'change (PR view)':40s} {'est':>7s} {'meas':>7s} {'ratio':>6s} {'FLOPs':>7s} {'ratio':>6s}"]
        for p in doc["pairs"]:
            lines.append(f"{p['from'] + ' -> ' + p['to']:40s} {p['estimated_change']:6.2f}x {p['measured_change']:6.2f}x "
                         f"{p['ratio']:6.2f} {p['flops_change']:6.2f}x {p['flops_ratio']:6.2f}")
        ps = doc["pairs_summary"]
        lines.append(f"pairs: change within +-10%: {ps['within_10pct']:.0%}, within +-25%: {ps['within_25pct']:.0%} "
                     f"(FLOPs ratio within +-25%: {ps['baseline_within_25pct']:.0%})")
    for key, value in doc.items():
        if key.startswith("summary["):
            lines.append(f"{key}: within +-25% {value['within_25pct']:.0%}, within 2x {value['within_2x']:.0%}, "
                         f"Spearman {value['spearman']:.3f}, geomean ratio {value['geomean_ratio']:.2f}")
    if doc.get("calibration_wall_s") is not None:
        lines.append(f"calibration wall time: {doc['calibration_wall_s']:.1f} s")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calibration", metavar="FILE", help="calibrated target file (default: calibrate now)")
    p.add_argument("--budget", type=float, default=60.0, help="calibration budget, seconds (default 60)")
    p.add_argument("--engine", choices=("onnxruntime", "torch"), default="onnxruntime")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--target", action="append", default=[], metavar="ID",
                   help="also report a built-in target's estimates (as is, and with derived curves)")
    p.add_argument("--models", nargs="*", help="only these models")
    p.add_argument("--rounds", type=int, default=2, help="at least this many passes over the models (default 2)")
    p.add_argument("--quiet-bursts", type=int, default=2, help="quiet bursts wanted per model (default 2)")
    p.add_argument("--max-wait", type=float, default=600.0, help="stop waiting for quiet bursts after this many seconds (default 600)")
    p.add_argument("--seconds-per-model", type=float, default=0.4, help="length of one burst of runs (default 0.4 s)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "accuracy.json"))
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    doc = run(args)
    doc["wall_s"] = time.perf_counter() - t0
    text = show(doc)
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {args.out} ({doc['wall_s']:.0f} s in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
