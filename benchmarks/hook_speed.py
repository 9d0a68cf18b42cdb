"""The pre-commit hooks' speed: whole-process wall time of `ha-bot card` and `ha-bot budget` when
nothing relevant changed (counts from the cache; goal < 0.5 s, torch never imported), and of a
run after one small model changed.

    python benchmarks/hook_speed.py [--reps 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._util import table, write_json

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def timed(cmd: list[str], cwd: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - t0, proc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ha-bot-hook-bench-")
    repo = os.path.join(work, "repo")
    shutil.copytree(EXAMPLES, repo, ignore=shutil.ignore_patterns(".ha-bot-cache", "cards"))
    ha = [sys.executable, "-m", "ha_bot"]
    timed([*ha, "card", "-q"], repo)  # create the card and warm the cache
    timed([*ha, "budget"], repo)
    rows, doc = [], {}
    for name, cmd in [("card (no-op)", [*ha, "card", "-q", "models/convnet.py"]), ("budget (no-op)", [*ha, "budget"])]:
        times = [timed(cmd, repo)[0] for _ in range(args.reps)]
        imports = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], cwd=repo, capture_output=True, text=True).stderr
        torch_loaded = any(line.split("|")[-1].strip() == "torch" for line in imports.splitlines())
        med = statistics.median(times)
        rows.append([name, f"{med * 1e3:.0f} ms", f"{min(times) * 1e3:.0f} ms", "yes" if torch_loaded else "no"])
        doc[name] = {"median_s": med, "runs_s": times, "torch_imported": torch_loaded}
    changed = []
    for i in range(3):  # one small model changes: it is counted again (torch in a child process)
        path = os.path.join(repo, ".ha-bot.yml")
        text = open(path).read().replace(f"depth: {4 + i}}}", f"depth: {5 + i}}}")
        open(path, "w").write(text)
        changed.append(timed([*ha, "card", "-q", ".ha-bot.yml"], repo)[0])
    med = statistics.median(changed)
    rows.append(["card (one model changed)", f"{med * 1e3:.0f} ms", f"{min(changed) * 1e3:.0f} ms", "yes (child)"])
    doc["card (one model changed)"] = {"median_s": med, "runs_s": changed}
    print(table(["hook run", "median", "min", "torch imported"], rows))
    print(f"\nwrote {write_json('hook_speed.json', doc)}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
