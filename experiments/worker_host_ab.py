"""Which part of the gate's worker makes the MoE solution's host path slow?  (H200 diagnostic,
docs/gate.md "Still open: the worker's host path")

Runs the host-time probe solution (``experiments/moe_host_probe.py``: the shipped MoE solution whose
entry point logs how long each piece of its graph-cache hit path takes) through the real gate, in
fresh workers, with one part of the timing protocol switched off at a time:

  default     the gate as ``kernelwright bench`` runs it
  no-cupti    no CUPTI kernel-clock window (CUPTI is attached and detached once per workload)
  no-graph    no graph-replay latency phase either
  unsafe      also ``--fast-unsafe`` (no fresh inputs, no per-iteration exchange with the parent)

and prints the events latency per workload next to the probe's host-path medians from the worker
log.  The worker inherits the environment, so thread-pool settings are tried from outside
(``OMP_NUM_THREADS=1 python experiments/worker_host_ab.py ... --only default``).
Usage (on the GPU machine): python experiments/worker_host_ab.py OUT_DIR [--workloads 0,1,2] [--only default]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from kernelwright import definitions
from kernelwright.cli.common import load_solution, pick_workloads
from kernelwright.gate.bench import BenchPlan, Candidate, run_bench
from kernelwright.gate.evaluate import GateConfig

VARIANTS = {
    "default": {},
    "no-cupti": {"cupti_iterations": 0},
    "no-graph": {"cupti_iterations": 0, "graph_iterations": 0},
    "unsafe": {"cupti_iterations": 0, "graph_iterations": 0, "guards": False},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--workloads", default="0,1,2")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--only", default=",".join(VARIANTS), help="comma-separated variant names")
    args = ap.parse_args()
    probe_dir = args.out / "probe-solution"
    subprocess.run([sys.executable, str(Path(__file__).with_name("moe_host_probe.py")), str(probe_dir)],
                   check=True, stdout=subprocess.DEVNULL)
    solution = load_solution(probe_dir)
    builtin = definitions.resolve("moe")
    workloads = pick_workloads(builtin, [args.workloads], None)
    rows = []
    for name in args.only.split(","):
        overrides = VARIANTS[name]
        cfg = GateConfig.preset("cuda", trials=args.trials, **overrides)
        out = args.out / name
        result = run_bench([BenchPlan(builtin, workloads, [Candidate(solution, name)])], cfg, out)
        log = "\n".join(p.read_text() for p in sorted((out / "logs").glob("*.log")))
        host = [line for line in log.splitlines() if line.startswith("[moe-probe]")]
        for trace in result.traces.get(builtin.name, []):
            perf = trace.evaluation.performance
            rows.append({"variant": name, "workload": trace.workload.uuid[:8],
                         "status": str(trace.evaluation.status),
                         "latency_us": perf.latency_ms * 1e3 if perf else None,
                         "graph_us": perf.graph_latency_ms * 1e3 if perf and perf.graph_latency_ms else None})
        rows.append({"variant": name, "probe_lines": host[-6:]})
        for row in rows[-(len(workloads) + 1):]:
            print(json.dumps(row), flush=True)
    (args.out / "worker_host_ab.json").write_text(json.dumps(rows, indent=1))
    medians = [float(m) for r in rows for line in r.get("probe_lines", [])
               for m in re.findall(r"replay ([0-9.]+)", line)]
    print(f"probe lines with a replay median: {len(medians)}")


if __name__ == "__main__":
    main()
