"""Output checkers: the flashinfer-bench error rule, the matched ratio, the -inf LSE rule and the
DSA indexer's validity + sorted-score rule."""

import math

import pytest
import torch

from kernelwright.definitions.base import Tolerance
from kernelwright.gate.checkers import check_elementwise, check_outputs, check_topk_indices
from kernelwright.trace import EvaluationStatus

TOL = Tolerance(atol=1e-2, rtol=1e-2, required_matched_ratio=1.0)


def _check(x, y, tol=TOL, **kw):
    return check_elementwise({"y": x}, {"y": y}, tol, **kw)


def test_element_fails_only_if_abs_and_rel_both_exceed():
    y = torch.tensor([100.0, 1e-4, 1.0])
    # abs error 0.5 > atol, but rel 0.005 <= rtol: matches
    assert _check(torch.tensor([100.5, 1e-4, 1.0]), y).passed
    # rel error 100% > rtol, but abs 1e-4 <= atol: matches
    assert _check(torch.tensor([100.0, 2e-4, 1.0]), y).passed
    # both exceed: fails
    r = _check(torch.tensor([100.0, 1e-4, 1.1]), y)
    assert not r.passed and r.reason == "TOLERANCE" and r.status == EvaluationStatus.INCORRECT_NUMERICAL
    assert r.max_absolute_error == pytest.approx(0.1, rel=1e-5)


def test_matched_ratio():
    y = torch.zeros(10)
    x = y.clone()
    x[:2] = 5.0           # 2 of 10 elements fail: matched 0.8
    assert not _check(x, y, Tolerance(1e-2, 1e-2, 0.9)).passed
    r = _check(x, y, Tolerance(1e-2, 1e-2, 0.8))
    assert r.passed and r.matched_ratio == pytest.approx(0.8)


def test_non_finite_fails_even_within_ratio():
    y = torch.ones(100)
    x = y.clone()
    x[3] = float("nan")
    r = _check(x, y, Tolerance(1e-2, 1e-2, 0.5))
    assert not r.passed and r.reason == "NON_FINITE"
    x[3] = float("inf")
    assert _check(x, y, Tolerance(1e-2, 1e-2, 0.5)).reason == "NON_FINITE"


def test_shape_and_dtype():
    y = torch.zeros(4)
    assert _check(torch.zeros(5), y).reason == "SHAPE"
    r = _check(torch.zeros(4, dtype=torch.float16), y)
    assert r.reason == "DTYPE" and r.status == EvaluationStatus.INCORRECT_DTYPE
    assert check_elementwise({}, {"y": y}, TOL).reason == "MISSING_OUTPUT"


def test_lse_minus_inf_rule():
    ref = torch.tensor([-math.inf, 1.0])
    got_ok = torch.tensor([-math.inf, 1.0])
    assert check_outputs("attention", {"lse": got_ok}, {"lse": ref}, TOL, {}).passed
    # -inf where the reference is finite fails, and so does -inf under the elementwise checker
    assert check_outputs("attention", {"lse": torch.tensor([-math.inf, -math.inf])}, {"lse": ref}, TOL, {}).reason == "NON_FINITE"
    assert check_outputs("elementwise", {"lse": got_ok}, {"lse": ref}, TOL, {}).reason == "NON_FINITE"
    # +inf where the reference has -inf is not accepted
    assert not check_outputs("attention", {"lse": torch.tensor([math.inf, 1.0])}, {"lse": ref}, TOL, {}).passed


@pytest.fixture(scope="module")
def indexer_case():
    from kernelwright import definitions
    from kernelwright.inputs import make_generator

    b = definitions.get("indexer").quick_variant()
    w = b.public_workloads()[0]
    inputs = b.make_inputs(b.definition, w, make_generator(1234, "cpu"), torch.device("cpu"))
    ref = b.reference(**inputs)
    return b, inputs, ref


def _idx(b, got, ref, inputs):
    return check_topk_indices({"topk_indices": got}, {"topk_indices": ref}, b.tolerance, inputs)


def test_indexer_reference_and_order_free(indexer_case):
    b, inputs, ref = indexer_case
    assert _idx(b, ref.clone(), ref, inputs).passed
    shuffled = ref.clone()
    for r in range(shuffled.shape[0]):
        n = int((shuffled[r] >= 0).sum())
        shuffled[r, :n] = shuffled[r, :n].flip(0)
    assert _idx(b, shuffled, ref, inputs).passed


def test_indexer_duplicates_and_invalid(indexer_case):
    b, inputs, ref = indexer_case
    dup = ref.clone()
    dup[0, 1] = dup[0, 0]
    assert _idx(b, dup, ref, inputs).reason == "DUPLICATE_INDEX"
    bad = ref.clone()
    bad[0, 0] = -2
    assert _idx(b, bad, ref, inputs).reason == "INVALID_INDEX"
    oob = ref.clone()
    seq_len = int(inputs["seq_lens"][0])
    table = inputs["block_table"][0]
    page = int(table[seq_len // 64]) if seq_len % 64 else int(table[0]) + 10_000
    beyond = page * 64 + (seq_len % 64)          # the first token after seq_len (or a page not in the row)
    n = int((oob[0] >= 0).sum())
    oob[0, n - 1 if n else 0] = beyond
    assert _idx(b, oob, ref, inputs).reason == "INVALID_INDEX"


def test_indexer_missing_tokens_fail_sorted_scores(indexer_case):
    b, inputs, ref = indexer_case
    fewer = ref.clone()
    n = int((fewer[0] >= 0).sum())
    fewer[0, n - 1] = -1                          # drop one chosen token
    r = _idx(b, fewer, ref, inputs)
    assert not r.passed and r.reason == "TOLERANCE"
    assert _idx(b, torch.full_like(ref, -1), ref, inputs).reason == "TOLERANCE"


def test_unknown_checker():
    with pytest.raises(ValueError):
        check_outputs("nope", {}, {}, TOL, {})


def test_finite_output_where_the_reference_is_infinite_fails():
    """inf/inf is NaN, which compares False with every threshold: such an element must still
    count as a mismatch (found by the 2026-11-29 red-team review)."""
    import math

    import torch

    from kernelwright.gate.checkers import check_elementwise
    from kernelwright.definitions.base import Tolerance
    from kernelwright.trace import EvaluationStatus

    tol = Tolerance(atol=1e-2, rtol=1e-2, required_matched_ratio=1.0)
    ref = torch.tensor([1.0, -math.inf, 2.0])
    assert check_elementwise({"lse": ref.clone()}, {"lse": ref}, tol, allow_ref_neg_inf=True).status \
        == EvaluationStatus.PASSED
    out = torch.tensor([1.0, 5.0, 2.0])
    res = check_elementwise({"lse": out}, {"lse": ref}, tol, allow_ref_neg_inf=True)
    assert res.status == EvaluationStatus.INCORRECT_NUMERICAL


# ---------------------------------------------------------------- the strict rule (issue 25)
from kernelwright.definitions.base import StrictRule  # noqa: E402
from kernelwright.gate.checkers import strict_errors, worst_strict  # noqa: E402

MOE_LIKE = Tolerance(atol=1.0, rtol=0.3, required_matched_ratio=0.9,
                     strict=StrictRule(max_rel_l2=6e-2, max_row_rel_l2=0.1, row_axes=1))


def _big(rows=200, cols=64, seed=0):
    """Outputs of MoE magnitude (~1e4), where atol 1 / rtol 0.3 / 90 % see little."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=g) * 1e4


def test_strict_errors_formulas():
    rule = StrictRule(max_rel_l2=1.0, max_row_rel_l2=1.0, row_axes=1)
    y = torch.tensor([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]])
    x = torch.tensor([[3.0, 4.0], [0.0, 0.0], [0.0, 0.0]])
    errs = strict_errors(x, y, rule)
    assert errs["rel_l2"] == pytest.approx(1.0 / math.sqrt(26.0))
    assert errs["row_rel_l2"] == pytest.approx(1.0)         # the zeroed third row; the all-zero row is skipped
    assert strict_errors(torch.zeros(3), torch.zeros(3), rule) == {"rel_l2": 0.0, "row_rel_l2": None}
    assert strict_errors(torch.ones(3), torch.zeros(3), rule)["rel_l2"] == math.inf
    assert strict_errors(torch.tensor([1.0, math.nan]), torch.ones(2), rule)["rel_l2"] == math.inf


def test_scaled_output_passes_the_contest_rule_and_fails_the_strict_one():
    y = _big()
    for factor in (0.8, 1.25):
        r = check_elementwise({"output": y * factor}, {"output": y}, MOE_LIKE)
        assert r.matched_ratio >= 0.9                          # the contest rule alone would pass it
        assert not r.passed and r.reason == "STRICT_TOLERANCE" and r.failed_rule == "strict"
        assert r.strict["output"]["rel_l2"] == pytest.approx(abs(1 - factor), rel=1e-5)
        assert "relative L2" in r.detail
    contest = check_elementwise({"output": y * 1.25}, {"output": y}, MOE_LIKE.contest_only())
    assert contest.passed and contest.rule == "contest"
    assert contest.strict["output"]["rel_l2"] == pytest.approx(0.25, rel=1e-5)   # recorded, not judged


def test_one_zeroed_row_fails_the_per_row_bound_only():
    y = _big(rows=1000)
    x = y.clone()
    x[17] = 0.0
    r = check_elementwise({"output": x}, {"output": y}, MOE_LIKE)
    assert r.strict["output"]["rel_l2"] < 0.06 < r.strict["output"]["row_rel_l2"] == pytest.approx(1.0)
    assert not r.passed and r.reason == "STRICT_TOLERANCE" and "per-row" in r.detail


def test_a_row_decided_by_a_near_tie_is_judged_against_its_alternatives():
    from dataclasses import replace

    from kernelwright.definitions.base import RowAlternatives

    y = _big(rows=1000)
    x = y.clone()
    x[17] = 0.0                                   # routed the other way: the row is lost
    exempt = torch.zeros(1000, dtype=torch.bool)
    exempt[17] = True

    def alternatives(inputs, rows):               # the tie broken the other way: row 17 lost
        return RowAlternatives(rows, {"output": torch.zeros((rows.numel(), y.shape[1]), dtype=y.dtype)})

    tol = replace(MOE_LIKE, strict=replace(MOE_LIKE.strict, exempt_rows=lambda inputs: inputs["tie"],
                                           alternatives=alternatives))
    r = check_elementwise({"output": x}, {"output": y}, tol, inputs={"tie": exempt})
    assert r.passed and r.strict["output"]["exempt_rows"] == 1.0 and r.strict["output"]["alternative_rows"] == 1.0
    assert r.strict["output"]["row_rel_l2"] < 0.01 and r.strict["output"]["rel_l2"] > 0.02   # still in the total
    x[17] = y[17] * 0.5                           # neither the reference nor the alternative
    assert check_elementwise({"output": x}, {"output": y}, tol, inputs={"tie": exempt}).reason == "STRICT_TOLERANCE"
    x[17] = 0.0
    exempt[17], exempt[18] = False, True          # another row exempt: row 17 is judged against y alone
    assert not check_elementwise({"output": x}, {"output": y}, tol, inputs={"tie": exempt}).passed


def test_moe_routing_near_ties_flag_a_tied_expert_choice():
    from kernelwright.definitions import moe_fp8

    logits = torch.randn(4, 256, generator=torch.Generator().manual_seed(0)) * 0.5
    bias = torch.zeros(256, dtype=torch.bfloat16)
    margins = moe_fp8.reference.routing_margins(logits, bias)
    assert bool((margins >= 0).all())
    # token 2: its 8th and 9th experts inside the kept groups get the same score
    _, _, _, pruned = moe_fp8.reference.routing_scores(logits[2:3], bias)
    order = torch.topk(pruned[0], 9).indices
    logits[2, order[8]] = logits[2, order[7]]
    ties = moe_fp8.routing_near_ties({"routing_logits": logits, "routing_bias": bias})
    assert ties.tolist() == [bool(m < moe_fp8.ROUTING_TIE_MARGIN) for m in margins[:2]] + [True] + \
        [bool(margins[3] < moe_fp8.ROUTING_TIE_MARGIN)]


def test_honest_noise_passes_both_rules():
    y = _big()
    x = y * (1 + 0.02 * torch.randn(y.shape, generator=torch.Generator().manual_seed(1)))
    r = check_elementwise({"output": x.to(torch.bfloat16)}, {"output": y.to(torch.bfloat16)}, MOE_LIKE)
    assert r.passed and r.rule == "contest+strict" and r.failed_rule is None
    assert r.strict["output"]["rel_l2"] == pytest.approx(0.02, rel=0.1)


def test_strict_rule_on_attention_lse_keeps_the_minus_inf_rule():
    tol = Tolerance(1e-2, 1e-2, 1.0, strict=StrictRule(max_rel_l2=2e-2, max_row_rel_l2=3e-2, row_axes=2))
    ref = torch.tensor([[-math.inf, 10.0], [12.0, 11.0]])
    r = check_outputs("attention", {"lse": ref.clone()}, {"lse": ref}, tol, {})
    assert r.passed and r.strict["lse"] == {"rel_l2": 0.0, "row_rel_l2": None}   # [T, H]: no rows beyond the 2 axes
    assert strict_errors(torch.tensor([1.0, 10.0]), torch.tensor([-math.inf, 10.0]), tol.strict, True)["rel_l2"] == math.inf


def test_contest_failure_keeps_its_reason_and_records_strict_errors():
    y = torch.ones(10)
    r = check_elementwise({"y": torch.zeros(10)}, {"y": y},
                          Tolerance(1e-2, 1e-2, 1.0, strict=StrictRule(max_rel_l2=2e-2)))
    assert r.reason == "TOLERANCE" and r.failed_rule == "contest" and r.strict["y"]["rel_l2"] == 1.0
    record = r.verdict_record(Tolerance(1e-2, 1e-2, 1.0, strict=StrictRule(max_rel_l2=2e-2)))
    assert record["rule"] == "contest+strict" and record["failed_rule"] == "contest"
    assert record["strict"]["y"]["rel_l2"] == 1.0 and record["strict_thresholds"]["max_rel_l2"] == 2e-2


def test_worst_strict_takes_the_maximum_per_output():
    from kernelwright.gate.checkers import CheckResult

    a = CheckResult(EvaluationStatus.PASSED, strict={"o": {"rel_l2": 0.1, "row_rel_l2": 0.3}})
    b = CheckResult(EvaluationStatus.PASSED, strict={"o": {"rel_l2": 0.2, "row_rel_l2": None}, "p": {"rel_l2": 0.0}})
    assert worst_strict([a, b]) == {"o": {"rel_l2": 0.2, "row_rel_l2": 0.3}, "p": {"rel_l2": 0.0, "row_rel_l2": None}}


def test_indexer_strict_scores(indexer_case):
    b, inputs, ref = indexer_case
    ok = _idx(b, ref.clone(), ref, inputs)
    assert ok.passed and ok.strict["topk_indices"] == {"rel_l2": 0.0, "row_rel_l2": 0.0}
    fewer = ref.clone()
    n = int((fewer[0] >= 0).sum())
    fewer[0, n - 1] = -1
    r = _idx(b, fewer, ref, inputs)
    assert r.failed_rule == "contest" and r.strict["topk_indices"]["row_rel_l2"] == math.inf
    contest = _idx(b.with_contest_rule(), fewer, ref, inputs)             # --contest-rule: still judged
    assert not contest.passed and contest.rule == "contest" and contest.strict["topk_indices"]["row_rel_l2"] == math.inf


def test_every_builtin_definition_has_a_strict_rule():
    from kernelwright import definitions

    for b in definitions.all_builtins():
        strict = b.tolerance.strict
        assert strict is not None and 0 < strict.max_rel_l2 < 0.2, b.name   # a 0.8x output must fail
        assert b.tolerance.rule == "contest+strict" and b.with_contest_rule().tolerance.rule == "contest"
        assert b.quick_variant().tolerance == b.tolerance
