"""MoE's routing near-ties under the strict rule (``moe_fp8.ties``, ``StrictRule.exempt_rows`` and
``alternatives``; docs/gate.md, section 2a).  A token within ``ROUTING_TIE_MARGIN`` of a tie is
judged against the reference or the reference of a routing its tie allows: a correct kernel that
breaks the tie the other way passes, anything else on that row (zeros, a scaled row: red-team
case ``exempt_rows_garbage``) fails the per-row bound as any other row would.  Before, the row
was skipped (the 2026-12-03 red-team pass, rt3)."""
from dataclasses import replace

import pytest
import torch

from kernelwright import definitions
from kernelwright.definitions import moe_fp8
from kernelwright.definitions.base import StrictRule
from kernelwright.definitions.moe_fp8 import reference, ties
from kernelwright.gate.checkers import check_outputs, row_exemption, strict_errors, strict_violation
from kernelwright.gate.evaluate import GateConfig, WorkloadContext
from kernelwright.inputs import make_generator

MOE = definitions.get("moe").quick_variant()


def _inputs(tokens=6, seed=0):
    """Quick-size MoE inputs (H = 256, I = 128) with every local expert's weights."""
    w = [x for x in MOE.public_workloads() if x.axes["seq_len"] == 5][0]
    w = w.model_copy(update={"axes": {"seq_len": tokens}})
    return MOE.make_inputs(MOE.definition, w, make_generator(seed, "cpu"), torch.device("cpu"))


def _tie_experts(inputs, token):
    """Make ``token``'s 8th and 9th experts inside its kept groups tie (the 9th's logit moved until
    their biased scores agree to fp32 rounding); returns their global ids."""
    logits, bias = inputs["routing_logits"], inputs["routing_bias"].float()
    _, biased, _, pruned = reference.routing_scores(logits[token:token + 1], inputs["routing_bias"])
    order = torch.topk(pruned[0], 9).indices
    eighth, ninth = int(order[7]), int(order[8])
    s8 = torch.sigmoid(logits[token, eighth]) + bias[eighth] - bias[ninth]   # b9 = b8
    logits[token, ninth] = torch.log(s8 / (1 - s8))
    return eighth, ninth


def test_an_exact_expert_tie_has_one_alternative_swapping_the_two():
    inputs = _inputs()
    eighth, ninth = _tie_experts(inputs, 3)
    assert bool(ties.routing_near_ties(inputs)[3])
    owner, topk, unlisted = ties.alternative_routings(inputs["routing_logits"][3:4], inputs["routing_bias"])
    own = set(reference.deepseek_v3_routing(inputs["routing_logits"][3:4], inputs["routing_bias"], 1.0)[0][0].tolist())
    assert owner.tolist() == [0] and unlisted.numel() == 0
    assert set(topk[0].tolist()) ^ own == {eighth, ninth}     # the two swapped, the other seven kept


def test_no_near_tie_no_alternative_and_nothing_recomputed():
    inputs = _inputs(tokens=5, seed=1)
    assert not bool(ties.routing_near_ties(inputs).any())
    alt = ties.routing_alternatives(inputs, torch.zeros((0,), dtype=torch.int64))
    assert alt.rows.numel() == 0 and alt.outputs["output"].shape == (0, inputs["hidden_states"].shape[1])


def _tied_check():
    """A T = 6 quick input whose token 0 has an expert tie, its 8th expert local (the rank's 32
    experts are the 8th's block; breaking the tie the other way moves the row by 1.4 of its norm);
    the inputs, the reference and the exemption."""
    inputs = _inputs()
    eighth, _ = _tie_experts(inputs, 0)
    inputs["local_expert_offset"] = 32 * (eighth // 32)
    expected = {"output": MOE.reference(**inputs)}
    exemption = row_exemption(MOE.tolerance, inputs)
    return inputs, expected, exemption


def test_the_tie_broken_the_other_way_is_within_the_per_row_bound_and_counted():
    """A kernel that routes the tied token the other way writes the alternative row: 1.4 of the
    row's norm away from the reference, within the per-row bound against the alternative.  (At
    T = 6 that one row still breaks the whole-tensor bound and the contest rule, as it did before:
    the per-row bound is what the alternatives are for; at T = 11948 the whole-tensor bound does
    not notice one row.)"""
    inputs, expected, exemption = _tied_check()
    assert exemption.rows.nonzero().reshape(-1).tolist() == [0]
    assert exemption.alternatives.rows.tolist() == [0]                 # only the exempt token recomputed
    alternative = exemption.alternatives.outputs["output"][0]
    out = expected["output"].clone()
    out[0] = alternative
    y = expected["output"]
    exempt, alternatives, unlisted = exemption.for_output("output")
    errors = strict_errors(out, y, MOE.tolerance.strict, exempt=exempt, alternatives=alternatives, unlisted=unlisted)
    assert errors["row_rel_l2"] < 0.01 and errors["exempt_rows"] == 1.0 and errors["alternative_rows"] == 1.0
    against_reference = strict_errors(out, y, MOE.tolerance.strict, exempt=exempt)     # no alternatives
    assert against_reference["row_rel_l2"] > 1.0


@pytest.mark.parametrize("damage", ["zeros", "scaled 0.6"])
def test_anything_else_on_an_exempt_row_fails_the_per_row_bound(damage):
    inputs, expected, exemption = _tied_check()
    out = expected["output"].clone()
    out[0] = 0.0 if damage == "zeros" else (out[0].float() * 0.6).to(out.dtype)
    r = check_outputs(MOE.checker, {"output": out}, expected, MOE.tolerance, inputs, exemption)
    assert not r.passed and r.reason in ("STRICT_TOLERANCE", "TOLERANCE"), r.strict
    assert r.strict["output"]["row_rel_l2"] >= 0.39


def test_an_exempt_row_with_a_zero_reference_is_judged_against_its_nonzero_alternative():
    """A tie between a non-local and a local expert of a token routed to no other local expert:
    the reference row is zero, the alternative's is not; zeros and the alternative pass, a row
    matching neither fails (before, rows with a zero reference were never judged)."""
    y = torch.ones(40, 8)
    y[1] = 0.0
    alt = torch.full((1, 8), 0.3)
    exempt = torch.zeros(40, dtype=torch.bool)
    exempt[1] = True
    rule = moe_fp8.STRICT
    errors = lambda x: strict_errors(x, y, rule, exempt=exempt, alternatives=(torch.tensor([1]), alt))  # noqa: E731
    assert strict_violation("o", errors(y.clone()), rule) is None
    x = y.clone()
    x[1] = 0.3
    assert strict_violation("o", errors(x), rule) is None and errors(x)["alternative_rows"] == 1.0
    x[1] = 0.15
    assert errors(x)["row_rel_l2"] == pytest.approx(0.5) and strict_violation("o", errors(x), rule)


def test_a_row_with_too_many_routings_to_list_is_skipped_and_counted():
    """Every logit of a token equal: every expert ties, far more routings than MAX_ROUTINGS; the row
    is not listed (``unlisted_rows``) and the per-row bound skips it."""
    inputs = _inputs()
    inputs["routing_logits"][2] = 0.5
    inputs["routing_bias"] = torch.zeros_like(inputs["routing_bias"])
    exemption = row_exemption(MOE.tolerance, inputs)
    assert exemption.alternatives.unlisted.tolist() == [2] and 2 not in exemption.alternatives.rows.tolist()
    expected = {"output": MOE.reference(**inputs)}
    out = expected["output"].clone()
    out[2] = 0.0
    r = check_outputs(MOE.checker, {"output": out}, expected, MOE.tolerance, inputs, exemption)
    assert r.strict["output"]["unlisted_rows"] == 1.0 and r.strict["output"]["row_rel_l2"] < 0.1


def test_a_sampled_iteration_keeps_its_exemption_not_its_inputs():
    """The gate keeps only the references of sampled iterations (at full size the inputs are GBs):
    the exemption and its alternative rows are computed while the inputs exist."""
    ctx = WorkloadContext(MOE, MOE.quick_workloads()[2], GateConfig(device="cpu"))
    trial = ctx.sample_trial(12345)
    assert trial.inputs == {} and trial.exemption is not None
    assert trial.exemption.rows.shape == (trial.expected["output"].shape[0],)
    r = check_outputs(MOE.checker, trial.expected, trial.expected, MOE.tolerance, trial.inputs, trial.exemption)
    assert r.passed and "exempt_rows" in r.strict["output"]


def test_an_exemption_needs_its_alternatives():
    with pytest.raises(ValueError):
        StrictRule(max_rel_l2=0.1, max_row_rel_l2=0.1, exempt_rows=lambda inputs: None)
    assert replace(moe_fp8.STRICT).alternatives is ties.routing_alternatives
