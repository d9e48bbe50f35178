"""Builds a diagnostic copy of the shipped MoE solution whose entry point reports, on stderr (the
gate's worker log), how long each call spends on the host and whether it replayed a cached CUDA
graph or ran ``_forward`` (eager run + capture).  For finding where the gate's events headline
spends time that the gate's own graph replay does not (docs/kernels/moe.md, "gate overhead").

Usage: python scripts/moe_host_probe.py OUT_DIR   then
       kernelwright bench -d moe --no-shipped -s OUT_DIR -w 0,1 --trials 1
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

PROBE = '''"""Diagnostic wrapper around kernel.run (scripts/moe_host_probe.py)."""
import sys
import time

from . import kernel as _k

_forward = _k._forward
_stats = {"calls": 0, "forward": 0, "host_us": []}


def _counting(*args, **kwargs):
    _stats["forward"] += 1
    return _forward(*args, **kwargs)


_k._forward = _counting


def run(*args, **kwargs):
    t0 = time.perf_counter()
    _k.run(*args, **kwargs)
    _stats["host_us"].append((time.perf_counter() - t0) * 1e6)
    _stats["calls"] += 1
    if _stats["calls"] % 20 == 0:
        last = sorted(_stats["host_us"][-20:])
        print(f"[moe-probe] calls {_stats['calls']} forward runs {_stats['forward']} graphs {len(_k._graphs)} "
              f"host us median {last[10]:.1f} min {last[0]:.1f} max {last[-1]:.1f}", file=sys.stderr, flush=True)
'''


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/moe_host_probe.py OUT_DIR")
    src = Path(__file__).resolve().parents[1] / "src/kernelwright/solutions/moe_fp8_triton"
    out = Path(sys.argv[1])
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("__pycache__"))
    (out / "probe.py").write_text(PROBE)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.update(name="moe_host_probe", entry_point="probe.py::run",
                    description="diagnostic: the shipped MoE solution with host-time and graph-cache counters")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    print(out)


if __name__ == "__main__":
    main()
