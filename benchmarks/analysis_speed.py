"""Analysis time of ha-bot vs plain fvcore FlopCountAnalysis on the same models, in the same run.

ha-bot's time includes counting bytes for every op and the cost model for EVERY built-in target
at two batch sizes; fvcore's is its FLOP count only. Goal: ha-bot <= 1.5x fvcore.

    python benchmarks/analysis_speed.py [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch
from fvcore.nn import FlopCountAnalysis

from benchmarks._util import median_time, table, write_json
from ha_bot import cost, targets
from ha_bot.count_torch import count_module
from tests.models import zoo


def fvcore_total(model: torch.nn.Module, x: torch.Tensor) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = FlopCountAnalysis(model, (x,)).unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        return int(f.total())


def ha_bot_full(model: torch.nn.Module, x: torch.Tensor, all_targets: list[targets.Target]) -> int:
    c = count_module(model, (x,))
    for t in all_targets:
        for b in (1, 32):
            cost.estimate(c, t, "fp16", b)
    return c.macs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    all_targets = list(targets.load_builtin().values())
    rows, doc = [], {"reps": args.reps, "targets": len(all_targets), "batches": [1, 32], "models": {}}
    for name, build in [("resnet50", zoo.resnet50), ("vit_b_16", zoo.vit_b_16)]:
        model = build().eval()
        x = torch.randn(1, 3, 224, 224)
        fv_macs = fvcore_total(model, x)  # warm-up both paths once
        hb_macs = ha_bot_full(model, x, all_targets)
        fv_all, hb_all = [], []
        for _ in range(args.reps):  # interleaved, so background noise hits both alike
            fv_all.append(median_time(lambda: fvcore_total(model, x), 1)[0])  # noqa: B023
            hb_all.append(median_time(lambda: ha_bot_full(model, x, all_targets), 1)[0])  # noqa: B023
        fv, hb = statistics.median(fv_all), statistics.median(hb_all)
        ratio = hb / fv
        rows.append([name, f"{fv * 1e3:.0f} ms", f"{hb * 1e3:.0f} ms", f"{ratio:.2f}x", f"{fv_macs / 1e9:.3f}", f"{hb_macs / 1e9:.3f}"])
        doc["models"][name] = {"fvcore_median_s": fv, "ha_bot_median_s": hb, "ratio": ratio, "fvcore_runs_s": fv_all,
                               "ha_bot_runs_s": hb_all, "fvcore_gmac": fv_macs / 1e9, "ha_bot_gmac": hb_macs / 1e9}
    print(table(["model", "fvcore", f"ha-bot (+bytes, {len(all_targets)} targets x 2 batches)", "ratio", "fvcore GMAC", "ha-bot GMAC"], rows))
    print(f"\nwrote {write_json('analysis_speed.json', doc)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
