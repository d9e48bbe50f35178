"""Find an input nonce whose correctness trials put a near-tie token into a quick MoE workload
(for the red-team case ``exempt_rows_garbage``, whose ``Case.nonces`` pins one per device kind:
the torch generators draw differently on the CPU and on CUDA).

    python experiments/tie_nonce_search.py --device cuda --count 200

Draws each trial's inputs exactly as the gate does (``seed_for(salt, split, workload uuid, nonce,
"trial", t)``, the red-team gate configuration) and prints the nonces with a token whose routing
margin (``moe_fp8.reference.routing_margins``) is under ``ROUTING_TIE_MARGIN``.
"""

from __future__ import annotations

import argparse

import torch

from kernelwright import definitions
from kernelwright.definitions.moe_fp8.reference import routing_margins
from kernelwright.definitions.moe_fp8.ties import ROUTING_TIE_MARGIN
from kernelwright.inputs import make_generator, seed_for
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
        for t in range(cfg.trials):
            gen = make_generator(seed_for(cfg.salt, cfg.split, workload.uuid, nonce, "trial", t), args.device)
            inputs = quick.make_inputs(quick.definition, workload, gen, args.device)
            m = routing_margins(inputs["routing_logits"], inputs["routing_bias"])
            rows = torch.nonzero(m < ROUTING_TIE_MARGIN).flatten().tolist()
            if rows:
                hits.append((t, rows, float(m.min())))
        if hits and (args.need_trial is None or any(t == args.need_trial for t, _, _ in hits)):
            print(f"{nonce}: " + "; ".join(f"trial {t} rows {r} min margin {mm:.2e}" for t, r, mm in hits), flush=True)


if __name__ == "__main__":
    main()
