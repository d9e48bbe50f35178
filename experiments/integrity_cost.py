"""What the red-team fixes cost the bench, part by part (off the clock; the MoE contest bench took
266 s on the hardened gate against 200 s before, results/h200/2026-11-30-v7/moe): the worker's
integrity check (``integrity.changed``, after every timed and graph iteration), its hook state
(profile/trace hooks, torch modes, 40 dispatcher tables), and the package-wide file snapshot the
parent takes before and after every message (``guards.snapshot_files``).

    python experiments/integrity_cost.py [--repeats 200]
"""
from __future__ import annotations

import argparse
import platform
import time

import torch

import kernelwright.definitions  # noqa: F401  (imported by the worker before the capture)
import kernelwright.gate.worker  # noqa: F401
from kernelwright.gate import guards, integrity


def per_call_ms(fn, repeats: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args()
    snap = integrity.capture()
    check = per_call_ms(lambda: integrity.changed(snap), args.repeats)
    hooks = per_call_ms(integrity._hook_state, args.repeats)
    roots = guards.protected_roots()
    files = guards.snapshot_files(roots)
    snapshot = per_call_ms(lambda: guards.snapshot_files(roots), max(10, args.repeats // 10))
    print(f"python {platform.python_version()}, torch {torch.__version__}, {platform.processor() or platform.machine()}")
    print(f"integrity entries: {len(snap.entries)}, functions with code checks: {len(snap.codes)}")
    print(f"integrity.changed():           {check:.2f} ms per call (after every timed and graph iteration)")
    print(f"  of which the hook state:     {hooks:.2f} ms")
    print(f"file snapshot ({len(files)} files): {snapshot:.2f} ms, taken twice per message")


if __name__ == "__main__":
    main()
