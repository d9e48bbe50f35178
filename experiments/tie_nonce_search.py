"""Find an input nonce whose correctness trials put a near-tie token into a quick MoE workload
(for the red-team case ``exempt_rows_garbage``, whose ``Case.nonces`` pins one per device kind:
the torch generators draw differently on the CPU and on CUDA).

    python experiments/tie_nonce_search.py --device cuda --count 200

Draws each correctness trial through the gate's own ``WorkloadContext.trials`` (the red-team
gate configuration with that nonce) and prints the nonces whose trials hold a token the strict
rule exempts (``Trial.exemption``: routing within ``ROUTING_TIE_MARGIN`` of a tie).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from kernelwright import definitions
from kernelwright.definitions.moe_fp8.reference import routing_margins
from kernelwright.gate.evaluate import WorkloadContext
from kernelwright.redteam.runner import gate_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workload", type=int, default=2, help="index into the quick variant's public workloads")
    ap.add_argument("--prefix", default="exempt-rows-")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--need-trial", type=int, default=None, help="only nonces with a near-tie in this trial")
    args = ap.parse_args()
    quick = definitions.get("moe").quick_variant()
    workload = quick.public_workloads()[args.workload]
    cfg = gate_config(args.device)
    print(f"workload {workload.uuid} on {args.device}, {cfg.trials} trials")
    for n in range(args.count):
        nonce = f"{args.prefix}{n}"
        hits = []
        for t, trial in enumerate(WorkloadContext(quick, workload, replace(cfg, nonce=nonce)).trials):
            rows = trial.exemption.rows.nonzero().flatten().tolist()
            if rows:
                margins = routing_margins(trial.inputs["routing_logits"], trial.inputs["routing_bias"])
                hits.append((t, rows, float(margins[rows].min())))
        if hits and (args.need_trial is None or any(t == args.need_trial for t, _, _ in hits)):
            print(f"{nonce}: " + "; ".join(f"trial {t} rows {r} min margin {m:.2e}" for t, r, m in hits), flush=True)

if __name__ == "__main__":
    main()
