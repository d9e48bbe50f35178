"""Where does the time between "device idle" and "kernel done" go on this machine?

Measures, with the gate's headline method (L2 flushed, device synchronised, start event, call,
end event, synchronise), the event latency of:

  empty    two events and nothing between them
  trivial  one tiny torch kernel (x.add_(1))
  graph1   replay of a CUDA graph holding that one kernel
  moe1     the shipped MoE solution at T=1 (its own CUDA-graph cache: Python key + replay)

in four process states, in this order: fresh; after one CUPTI activity window (enable, flush,
disable: what the gate's kernel clock does per workload); after ``cupti.finalize()``; after one
torch-profiler session (kineto).  Prints a table and writes JSON to $OUT/launch_overhead.json.

Usage (H200): python experiments/launch_overhead.py [--iters 40] [--no-moe]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

DEV = torch.device("cuda")


def measure(call, flush_buf, iters: int) -> dict:
    lat, wall = [], []
    for i in range(iters + 5):
        flush_buf.zero_()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        if i >= 5:
            lat.append(start.elapsed_time(end) * 1e3)
            wall.append((t1 - t0) * 1e6)
    return {"events_us": statistics.median(lat), "wall_us": statistics.median(wall),
            "events_p10_us": sorted(lat)[len(lat) // 10]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--no-moe", action="store_true")
    args = ap.parse_args()
    l2 = int(getattr(torch.cuda.get_device_properties(DEV), "L2_cache_size", 64 << 20))
    flush_buf = torch.empty(2 * l2, dtype=torch.uint8, device=DEV)
    x = torch.zeros(256, device=DEV)
    x.add_(1)
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        x.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph):
        x.add_(1)
    calls = {"empty": lambda: None, "trivial": lambda: x.add_(1), "graph1": graph.replay}
    if not args.no_moe:
        from kernelwright import definitions
        from kernelwright.inputs import make_generator
        from kernelwright.solutions.moe_fp8_triton import kernel as moe

        builtin = definitions.get("moe")
        workload = next(w for w in builtin.public_workloads() if w.axes["seq_len"] == 1)
        inputs = builtin.make_inputs(builtin.definition, workload, make_generator(0, "cuda"), DEV)
        out = torch.empty((1, 7168), dtype=torch.bfloat16, device=DEV)
        names = [i for i in builtin.definition.inputs]
        argv = [inputs[n] for n in names]
        moe.run(*argv, out)
        moe.run(*argv, out)
        torch.cuda.synchronize()
        calls["moe1"] = lambda: moe.run(*argv, out)

    rows = []

    def phase(name: str) -> None:
        for what, call in calls.items():
            r = measure(call, flush_buf, args.iters)
            rows.append({"state": name, "call": what, **r})
            print(f"{name:>16} {what:>8}  events {r['events_us']:7.1f} µs  (p10 {r['events_p10_us']:6.1f})"
                  f"  wall {r['wall_us']:7.1f} µs", flush=True)

    phase("fresh")
    from cupti import cupti

    buffers = []
    cupti.activity_register_callbacks(lambda: (8 << 20, 0), lambda acts: buffers.append(len(acts)))
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    x.add_(1)
    torch.cuda.synchronize()
    cupti.activity_flush_all(1)
    cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
    phase("after-cupti")
    cupti.finalize()
    phase("cupti-finalized")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]):
        x.add_(1)
        torch.cuda.synchronize()
    phase("after-profiler")
    out_dir = os.environ.get("OUT", "/tmp")
    with open(os.path.join(out_dir, "launch_overhead.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
