"""Does the gate's timed loop itself add time to a call?  (H200 diagnostic, docs/gate.md §timing)

Times the shipped MoE solution on contest workloads with the gate's headline clock (L2 flushed,
device synchronised, start event, one call, end event) in three loops that differ only in what
happens BEFORE the flush:

  fixed       two buffer sets filled once (a micro-benchmark's loop)
  fixed4      four buffer sets filled once (more routings, no regeneration)
  regen-same  every iteration regenerates the SAME seed with the gate's ``fresh.expand``, copies
              it into the set's buffers and poisons the output (the regeneration work alone)
  regen       every iteration regenerates a NEW seed (exactly the worker's ``_regenerate`` +
              ``poison``: new routing, new weights)
  cupti       ``regen`` after one window of the gate's CUPTI kernel tracer (which detaches
              CUPTI again when it can: ``tracer.detaches``)

Writes $OUT/gate_loop_probe.json.  Usage: python experiments/gate_loop_probe.py [--t 1 32] [--iters 30]
[--modes fixed,regen] [--solution DIR: e.g. the host-time probe of experiments/moe_host_probe.py, whose
per-piece host times then print in a plain process]
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from kernelwright import definitions
from kernelwright.gate import fresh
from kernelwright.gate import timing as T
from kernelwright.gate.worker import poison
from kernelwright.inputs import make_generator

DEV = torch.device("cuda")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--t", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--modes", default="fixed,fixed4,regen-same,regen,cupti")
    ap.add_argument("--solution", type=Path, default=None,
                    help="a MoE solution folder whose entry module is probe.py (experiments/moe_host_probe.py)")
    args = ap.parse_args()
    if args.solution is None:
        from kernelwright.solutions.moe_fp8_triton import kernel as moe
    else:
        sys.path.insert(0, str(args.solution.parent))
        moe = importlib.import_module(f"{args.solution.name}.probe")

    builtin = definitions.get("moe")
    flusher = T.L2Flusher(DEV)
    rows = []
    tracer_ran = False
    for mode in args.modes.split(","):
        if mode == "cupti" and not tracer_ran:
            tracer = T.cupti_tracer()
            if tracer.available():
                tracer.drain()
                tracer.begin()
                torch.zeros(1, device=DEV).add_(1)
                torch.cuda.synchronize()
                tracer.end()
                print("cupti tracer window:", len(tracer.drain()), "kernels; detaches:", tracer.detaches, flush=True)
            tracer_ran = True
        for t_len in args.t:
            workload = next(w for w in builtin.public_workloads() if w.axes["seq_len"] == t_len)
            names = list(builtin.definition.inputs)
            sets = []
            nsets = 4 if mode == "fixed4" else 2   # 4: the MoE graph cache holds 4 keys
            for s in range(nsets):
                inp = builtin.make_inputs(builtin.definition, workload, make_generator(100 + s, "cuda"), DEV)
                sets.append([inp[n] for n in names])
            outs = [torch.empty((t_len, 7168), dtype=torch.bfloat16, device=DEV) for _ in range(nsets)]
            lat, wall = [], []
            for i in range(5 + args.iters):
                s = i % nsets
                if mode.startswith(("regen", "cupti")):
                    new = fresh.expand(builtin, workload, 7000 + (0 if mode == "regen-same" else i), DEV)
                    for j, n in enumerate(names):
                        if isinstance(sets[s][j], torch.Tensor):
                            sets[s][j].copy_(new[n])
                    del new
                    poison([outs[s]])
                flusher.flush()
                torch.cuda.synchronize()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                start.record()
                moe.run(*sets[s], outs[s])
                end.record()
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                if i >= 5:
                    lat.append(start.elapsed_time(end) * 1e3)
                    wall.append((t1 - t0) * 1e6)
            row = {"mode": mode, "seq_len": t_len, "events_us": statistics.median(lat),
                   "wall_us": statistics.median(wall), "min_us": min(lat), "max_us": max(lat)}
            rows.append(row)
            print(f"{mode:>10} T={t_len:<6} events {row['events_us']:7.1f} µs (min {row['min_us']:6.1f}, "
                  f"max {row['max_us']:7.1f})  wall {row['wall_us']:7.1f} µs", flush=True)
            del sets, outs
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "gate_loop_probe.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
