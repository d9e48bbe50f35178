"""Run the shipped MoE solution a few times at one contest T (eager launches, no CUDA graph), for a
profiler to attach to: ``ncu -k regex:_gemm1 -c 1 python scripts/moe_profile_once.py --seq-len 7``.
Inputs are drawn by the gate's own generator (kernelwright.gate.fresh) for the contest workload with
that seq_len.  Prints the device time of the last call (CUDA events, µs)."""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
from kernelwright import definitions  # noqa: E402
from kernelwright.gate import fresh  # noqa: E402
from kernelwright.solutions.moe_fp8_triton import kernel as K  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seq-len", type=int, default=7, help="a contest workload's seq_len (T)")
    ap.add_argument("--calls", type=int, default=3, help="eager calls (the first compiles)")
    args = ap.parse_args()
    d = definitions.get("moe")
    try:
        w = next(w for w in d.public_workloads() if w.axes["seq_len"] == args.seq_len)
    except StopIteration:
        sys.exit(f"no contest workload with seq_len={args.seq_len}")
    dev = torch.device("cuda")
    ins = fresh.expand(d, w, 1234 + args.seq_len, dev)
    out = torch.empty((args.seq_len, 7168), dtype=torch.bfloat16, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(args.calls):
        start.record()
        K.run(**ins, output=out, graph=False)
        end.record()
    torch.cuda.synchronize()
    print(f"T={args.seq_len}: last eager call {start.elapsed_time(end) * 1e3:.1f} µs")


if __name__ == "__main__":
    main()
