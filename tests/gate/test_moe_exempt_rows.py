"""MoE's routing-tie exemption (``moe_fp8.routing_near_ties``, ``StrictRule.exempt_rows``), as
the 2026-12-03 red-team pass (rt3) found it: computed on the parent's own inputs (the trials' and
``sample_trial``'s, never the worker's buffers), but an exempt row may hold anything within the
whole-tensor bound, a zeroed row included.  A solution can compute the margins itself and leave
those rows unwritten; it gains nothing measurable (about 2 tokens in 1000), so this documents an
open, bounded hole rather than closing it (closing it needs the alternative routing's reference)."""
import torch

from kernelwright.definitions import moe_fp8
from kernelwright.gate.checkers import strict_errors, strict_violation


def test_a_zeroed_exempt_row_passes_the_strict_rule_up_to_the_whole_tensor_bound():
    logits = torch.randn(1000, 256, generator=torch.Generator().manual_seed(0))
    logits[5] = 0.5                                   # every expert ties: margin 0
    bias = torch.zeros(256, dtype=torch.bfloat16)
    exempt = moe_fp8.routing_near_ties({"routing_logits": logits, "routing_bias": bias})
    assert bool(exempt[5])
    ref = torch.randn(1000, 32, generator=torch.Generator().manual_seed(1))
    out = ref.clone()
    out[5] = 0.0                                      # the tied token left unwritten
    rule = moe_fp8.STRICT
    errors = strict_errors(out, ref, rule, exempt=exempt)
    assert errors["exempt_rows"] >= 1 and strict_violation("out", errors, rule) is None   # open
    assert strict_violation("out", strict_errors(out, ref, rule), rule) is not None       # without it
