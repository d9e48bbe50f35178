"""How many MoE tokens the strict rule's near-tie exemption skips (``moe_fp8.routing_near_ties``):
per T and seed, the tokens whose group or expert choice is within 1e-7 ... 1e-3 of a tie, on the
routing inputs the definition draws (``synth_routing_logits`` / ``synth_routing_bias``, as its
``make_inputs``).  CPU; ``python experiments/moe_routing_margins.py [--tokens 1,16,901,11948,14107]``.
Answer: results/cpu/2026-12-02-moe-routing-margins/."""

import argparse

import torch

from kernelwright.definitions import moe_fp8
from kernelwright.inputs import make_generator, synth_routing_bias, synth_routing_logits

MARGINS = (1e-7, 1e-6, 1e-5, 1e-4, 1e-3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="1,16,901,11948,14107")
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args()
    cpu = torch.device("cpu")
    print(f"exempt below ROUTING_TIE_MARGIN = {moe_fp8.ROUTING_TIE_MARGIN:g}")
    print("T      seed  " + "  ".join(f"<{m:g}" for m in MARGINS) + "   (tokens)")
    for t in (int(x) for x in args.tokens.split(",")):
        for seed in range(args.seeds):
            gen = make_generator(seed, cpu)
            logits = synth_routing_logits(t, 256, gen, cpu)
            bias = synth_routing_bias(256, gen, cpu)
            margins = moe_fp8.reference.routing_margins(logits, bias)
            counts = "  ".join(f"{int((margins < m).sum()):>5}" for m in MARGINS)
            print(f"{t:<6} {seed:>4}  {counts}")


if __name__ == "__main__":
    main()
