"""Find an input nonce whose correctness trials put a near-tie token into a quick MoE workload
(for the red-team case ``exempt_rows_garbage``, whose ``Case.nonces`` pins one per device kind:
the torch generators draw differently on the CPU and on CUDA).

    python experiments/tie_nonce_search.py --device cuda --count 200

Draws each correctness trial through the gate's own ``WorkloadContext.trials`` (the red-team
gate configuration with that nonce) and prints the nonces whose trials hold a token the strict
rule exempts (``Trial.exemption``: routing within ``ROUTING_TIE_MARGIN`` of a tie).  For each
such trial it also judges what the case writes (the reference with zeros on those rows) with the
gate's own checker, and says why zeros pass where they do: a token with no local expert under the
reference's routing or under a routing its tie allows has a zero row there, and zeros are then
a correct answer (``--need-reject`` lists only the nonces whose zeros the gate must reject).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from kernelwright import definitions
from kernelwright.definitions.moe_fp8.reference import routing_margins
from kernelwright.gate.checkers import check_outputs
from kernelwright.gate.evaluate import Trial, WorkloadContext
from kernelwright.redteam.runner import gate_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workload", type=int, default=2, help="index into the quick variant's public workloads")
    ap.add_argument("--prefix", default="exempt-rows-")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--need-trial", type=int, default=None, help="only nonces with a near-tie in this trial")
    ap.add_argument("--need-reject", action="store_true",
                    help="only nonces where the gate rejects zeros on the near-tie rows (in --need-trial if given)")
    args = ap.parse_args()
    quick = definitions.get("moe").quick_variant()
    workload = quick.public_workloads()[args.workload]
    cfg = gate_config(args.device)
    print(f"workload {workload.uuid} on {args.device}, {cfg.trials} trials")
    for n in range(args.count):
        nonce = f"{args.prefix}{n}"
        ctx = WorkloadContext(quick, workload, replace(cfg, nonce=nonce))
        hits = []
        for t, trial in enumerate(ctx.trials):
            rows = trial.exemption.rows.nonzero().flatten().tolist()
            if rows:
                margins = routing_margins(trial.inputs["routing_logits"], trial.inputs["routing_bias"])
                rejected, why = _zeros_verdict(ctx, trial, rows)
                hits.append((t, rows, float(margins[rows].min()), rejected, why))
        wanted = [h for h in hits if args.need_trial is None or h[0] == args.need_trial]
        if args.need_reject:
            wanted = [h for h in wanted if h[3]]
        if wanted:
            print(f"{nonce}: " + "; ".join(f"trial {t} rows {r} min margin {m:.2e}: zeros {why}"
                                           for t, r, m, _, why in hits), flush=True)


def _zeros_verdict(ctx: WorkloadContext, trial: Trial, rows):
    """(rejected, why): the gate's checker on the reference output with zeros on ``rows``, and the
    norms that decide it (each row's reference norm and its alternatives' norms)."""
    out = trial.expected["output"].clone()
    out[rows] = 0
    check = check_outputs(ctx.builtin.checker, {"output": out}, trial.expected, ctx.builtin.tolerance,
                          trial.inputs, trial.exemption)
    alt = trial.exemption.alternatives
    owner, refs = alt.rows.tolist(), alt.outputs["output"].float()
    norms = []
    for r in rows:
        own = float(trial.expected["output"][r].float().norm())
        others = [float(refs[i].norm()) for i, o in enumerate(owner) if o == r]
        norms.append(f"row {r} reference norm {own:.3g}, alternatives {[round(x, 3) for x in others]}")
    verdict = "pass" if check.passed else f"rejected {check.reason}"
    return not check.passed, f"{verdict} ({'; '.join(norms)})"

if __name__ == "__main__":
    main()
