"""A >= 7B-parameter decoder-only transformer, built from code on the meta device and analysed
through the real CLI path (sandboxed child process, every default target). Measures wall time and
peak RSS of the whole process tree. Goals: <= 60 s and <= 2 GiB.

    python benchmarks/meta_7b.py
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._util import table, write_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    cmd = [sys.executable, "-m", "ha_bot", "analyze", "tests/models/zoo.py:llama_7b", "--device", "meta",
           "--input", "1x2048:int64", "--batch", "1", "--batch", "8", "--json", "-q"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stderr)
        return 1
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child (Linux: KiB)
    model = json.loads(proc.stdout)["models"][0]
    rows = [[f"{model['params'] / 1e9:.3f} B", f"{model['flops'] / 1e12:.2f} T", f"{wall:.1f} s", f"{rss_kib / 2**20:.2f} GiB"]]
    print(table(["params", "FLOPs (seq 2048)", "wall", "peak RSS (largest process)"], rows))
    for e in model["estimates"]:
        print(f"  {e['target']:<30} batch {e['batch']:<2} {e['latency_s'] * 1e3:9.1f} ms  memory {e['memory_bytes'] / 1e9:6.1f} GB  fits={e['fits']}")
    doc = {"params": model["params"], "flops": model["flops"], "wall_s": wall, "peak_rss_bytes": rss_kib * 1024,
           "goal_wall_s": 60, "goal_rss_bytes": 2 * 2**30}
    print(f"\nwrote {write_json('meta_7b.json', doc)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
