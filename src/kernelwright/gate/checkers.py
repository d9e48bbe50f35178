"""Output checkers, one per definition kind, all computed in the trusted parent process.

* ``elementwise`` — flashinfer-bench ``compute_error_stats``: an element fails only where
  |x-y| > atol AND |x-y|/(|y|+1e-8) > rtol; the output fails when the matched ratio is below the
  required one.  Any non-finite element in the solution's output fails.
* ``attention`` — elementwise on ``output`` and ``lse``, except that a -inf LSE is accepted
  where the reference itself gives -inf (a row whose indices are all padding); anywhere else a
  non-finite value fails.
* ``topk_indices`` — flashinfer-bench PR #354: every non-negative index must be a token of a
  page in that row's block table below seq_len, with no duplicates; then the weighted-ReLU
  scores at the returned indices, sorted, are compared with the sorted scores at the reference
  indices (-1 maps to -inf; a shared -inf matches).

Beside each contest rule, the definition's strict rule (``definitions.base.StrictRule``): the
relative L2 error of every floating-point output, and per row where the definition says so (MoE
tokens, attention (token, head) rows); for the indexer, the same two bounds on the sorted
recomputed scores.  A check passes only when both rules do, unless the tolerance is
``contest_rule_only`` (``--contest-rule``); the strict errors are computed and recorded either
way.  A contest failure keeps its reason (``TOLERANCE``, ``NON_FINITE``, ...); a check that only
the strict rule rejects gets ``STRICT_TOLERANCE``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch

from kernelwright.definitions.base import RowAlternatives, StrictRule, Tolerance
from kernelwright.gate import guards
from kernelwright.gate.guards import STRICT_TOLERANCE
from kernelwright.trace import EvaluationStatus


@dataclass
class CheckResult:
    """One check of a solution's outputs.  ``max_*_error`` and ``matched_ratio`` are the contest
    rule's statistics; ``strict`` maps each output name to its strict errors
    (``{"rel_l2": float, "row_rel_l2": float | None}``, empty when the definition has no strict
    rule or the outputs could not be compared); ``rule`` says which rules judged
    (``Tolerance.rule``) and ``failed_rule`` which one rejected (``"contest"``, ``"strict"`` or
    None)."""

    status: EvaluationStatus
    max_absolute_error: float = 0.0
    max_relative_error: float = 0.0
    matched_ratio: float = 1.0
    reason: Optional[str] = None
    detail: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)
    rule: str = "contest"
    strict: Dict[str, Dict[str, Optional[float]]] = field(default_factory=dict)
    failed_rule: Optional[str] = None

    @property
    def passed(self) -> bool:
        return self.status == EvaluationStatus.PASSED

    def verdict_record(self, tol: Tolerance) -> Dict[str, Any]:
        """What a trace records of this check (``Correctness.extra``): the contest matched ratio,
        the rule that judged, which one rejected, the strict errors per output and the strict
        thresholds."""
        record: Dict[str, Any] = {"matched_ratio": self.matched_ratio, "rule": self.rule}
        if self.failed_rule:
            record["failed_rule"] = self.failed_rule
        if tol.strict is not None:
            record["strict"] = {name: dict(errs) for name, errs in self.strict.items()}
            record["strict_thresholds"] = {"max_rel_l2": tol.strict.max_rel_l2,
                                           "max_row_rel_l2": tol.strict.max_row_rel_l2,
                                           "row_axes": tol.strict.row_axes}
        return record


def worst_strict(results: List[CheckResult]) -> Dict[str, Dict[str, Optional[float]]]:
    """Per output, the largest strict errors over several checks (e.g. the correctness trials)."""
    worst: Dict[str, Dict[str, Optional[float]]] = {}
    for res in results:
        for name, errs in res.strict.items():
            into = worst.setdefault(name, {"rel_l2": None, "row_rel_l2": None})
            for key, value in errs.items():
                if value is not None and (into.get(key) is None or value > into[key]):
                    into[key] = value
    return worst


def _ratio(num: float, den: float) -> float:
    """num / den, with 0/0 = 0 and x/0 = inf (a nonzero output where the reference is all zero)."""
    if den > 0:
        return num / den
    return 0.0 if num == 0 else math.inf


@dataclass
class RowExemption:
    """The rows of one check's inputs that a near-tie decides (``StrictRule.exempt_rows``: bool
    [rows]) and their alternative references (``StrictRule.alternatives``), computed in the parent
    from the full inputs (``row_exemption``) so that a sampled iteration need not keep them."""

    rows: torch.Tensor
    alternatives: RowAlternatives

    def for_output(self, name: str) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        """(exempt bool [rows], (owner int64 [N], alternative rows [N, ...]), unlisted int64 [M])
        for output ``name``; no alternatives where the definition gave none for it."""
        alt = self.alternatives
        refs = alt.outputs.get(name)
        if refs is None:
            refs, owner = torch.zeros((0,)), torch.zeros((0,), dtype=torch.int64)
        else:
            owner = alt.rows
        unlisted = alt.unlisted if alt.unlisted is not None else torch.zeros((0,), dtype=torch.int64)
        return self.rows, (owner, refs), unlisted


def row_exemption(tol: Tolerance, inputs: Optional[Mapping[str, Any]]) -> Optional[RowExemption]:
    """The near-tie rows of ``inputs`` and their alternative references under ``tol``'s strict rule
    (None when the rule has no exemption or there are no inputs).  Costs one reference of the
    exempt rows per alternative (MoE: a few tokens, none at T <= 16 in most draws)."""
    rule = tol.strict
    if rule is None or rule.exempt_rows is None or inputs is None:
        return None
    rows = torch.as_tensor(rule.exempt_rows(inputs)).reshape(-1).to(torch.bool)
    return RowExemption(rows, rule.alternatives(inputs, rows.nonzero().reshape(-1)))


def _row_ratios(diff_norms: torch.Tensor, ref_norms: torch.Tensor) -> torch.Tensor:
    """diff / ref per row (float64), with 0/0 = 0 and x/0 = inf (as ``_ratio``)."""
    safe = torch.where(ref_norms > 0, ref_norms, torch.ones_like(ref_norms))
    zero_ref = torch.where(diff_norms == 0, torch.zeros_like(diff_norms), torch.full_like(diff_norms, math.inf))
    return torch.where(ref_norms > 0, diff_norms / safe, zero_ref)


def _explain_exempt_rows(x_rows: torch.Tensor, errors: torch.Tensor, judged: torch.Tensor,
                         owner: torch.Tensor, refs: torch.Tensor):
    """Per-row errors with every exempt row's alternatives taken into account: a row's error is
    its smallest against the reference (``errors``) and its alternatives (``refs`` [N, ...] of rows
    ``owner`` [N]); a row is judged where the reference or one of its alternatives is nonzero.
    x_rows float32 [rows, cols].  Returns (errors, judged)."""
    if owner.numel() == 0:
        return errors, judged
    owner = owner.to(device=x_rows.device)
    alt = refs.to(device=x_rows.device, dtype=torch.float32).reshape(owner.numel(), -1)
    norm = lambda t: torch.linalg.vector_norm(t, dtype=torch.float64, dim=1)  # noqa: E731
    alt_norms = norm(alt)
    alt_errors = _row_ratios(norm(x_rows.index_select(0, owner) - alt), alt_norms)
    best = torch.full_like(errors, math.inf).scatter_reduce(0, owner, alt_errors, reduce="amin")
    judged = judged.clone()
    judged[owner[alt_norms > 0]] = True
    return torch.minimum(errors, best), judged


def strict_errors(out: torch.Tensor, ref: torch.Tensor, rule: StrictRule, allow_ref_neg_inf: bool = False,
                  exempt: Optional[torch.Tensor] = None,
                  alternatives: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
                  unlisted: Optional[torch.Tensor] = None) -> Dict[str, Optional[float]]:
    """The strict errors of one output against its reference (``StrictRule`` gives the formulas).

    Args:
        out, ref: tensors of the same shape (any floating dtype; compared in float32, norms
            accumulated in float64).
        rule: which per-row bound applies (``row_axes``).
        allow_ref_neg_inf: exclude positions where both are -inf (attention LSE).
        exempt: bool, one per row (``rule.exempt_rows`` of the inputs): rows decided by a
            near-tie; each is judged by its smallest error against the reference and against
            its ``alternatives``.
        alternatives: (owner int64 [N], rows [N, *row shape]): the exempt rows' references
            under the other routings their ties allow (``RowExemption.for_output``).
        unlisted: int64 [M], exempt rows whose alternatives were too many to list: skipped.

    Returns:
        ``{"rel_l2": float, "row_rel_l2": float | None}`` (None where no per-row bound applies),
        plus, when ``exempt`` is given, ``"exempt_rows"`` (exempt rows judged),
        ``"alternative_rows"`` (rows within the bound only against an alternative) and, where
        any, ``"unlisted_rows"``; inf for any non-finite value other than an excluded -inf pair.
    """
    x = out.to(torch.float32)
    y = ref.to(torch.float32)
    row_applies = rule.max_row_rel_l2 is not None and x.dim() > rule.row_axes
    excluded = (torch.isneginf(x) & torch.isneginf(y)) if allow_ref_neg_inf else None
    ok = torch.isfinite(x) & torch.isfinite(y)
    if excluded is not None:
        ok = ok | excluded
    if not bool(ok.all()):
        return {"rel_l2": math.inf, "row_rel_l2": math.inf if row_applies else None}
    if excluded is not None and bool(excluded.any()):
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        x, y = torch.where(excluded, zero, x), torch.where(excluded, zero, y)
    diff = x - y
    norm = lambda t, **kw: torch.linalg.vector_norm(t, dtype=torch.float64, **kw)  # noqa: E731
    errors: Dict[str, Optional[float]] = {"rel_l2": _ratio(float(norm(diff)), float(norm(y))), "row_rel_l2": None}
    if row_applies:
        rows = math.prod(x.shape[:rule.row_axes])
        x_rows = x.reshape(rows, -1)
        y_rows = norm(y.reshape(rows, -1), dim=1)
        row_errors = _row_ratios(norm(diff.reshape(rows, -1), dim=1), y_rows)
        judged = y_rows > 0
        if exempt is not None:
            row_errors, judged, counts = _exempt_errors(x_rows, row_errors, judged, exempt, alternatives, unlisted,
                                                        rule)
            errors.update(counts)
        errors["row_rel_l2"] = float(row_errors[judged].max()) if bool(judged.any()) else 0.0
    return errors


def _exempt_errors(x_rows, row_errors, judged, exempt, alternatives, unlisted, rule: StrictRule):
    """``strict_errors``'s part for the exempt rows: the rows' errors with their alternatives
    (``_explain_exempt_rows``) and the unlisted rows left out.  Returns (row errors, judged rows,
    the counts it records: ``exempt_rows``, ``alternative_rows``, ``unlisted_rows``)."""
    skip = exempt.reshape(-1).to(device=judged.device, dtype=torch.bool)
    none = (torch.zeros((0,), dtype=torch.int64), torch.zeros((0,)))
    owner, refs = alternatives if alternatives is not None else none
    against_reference = row_errors
    row_errors, judged = _explain_exempt_rows(x_rows, row_errors, judged, owner, refs)
    bound = rule.max_row_rel_l2
    counts = {"exempt_rows": float(int((skip & judged).sum())),
              "alternative_rows": float(int((skip & (against_reference > bound) & (row_errors <= bound)).sum()))}
    if unlisted is not None and unlisted.numel():
        judged = judged.clone()
        judged[unlisted.to(judged.device)] = False
        counts["unlisted_rows"] = float(unlisted.numel())
    return row_errors, judged, counts


def strict_violation(name: str, errors: Mapping[str, Optional[float]], rule: StrictRule) -> Optional[str]:
    """A one-line description of how ``errors`` break ``rule``, or None when they do not."""
    if errors["rel_l2"] > rule.max_rel_l2:
        return f"{name}: relative L2 error {errors['rel_l2']:.4g} > {rule.max_rel_l2:g} (strict rule)"
    row = errors.get("row_rel_l2")
    if row is not None and rule.max_row_rel_l2 is not None and row > rule.max_row_rel_l2:
        return f"{name}: worst per-row relative L2 error {row:.4g} > {rule.max_row_rel_l2:g} (strict rule)"
    return None


def _judge(contest: CheckResult, tol: Tolerance, strict: Dict[str, Dict[str, Optional[float]]]) -> CheckResult:
    """Attach the strict errors to a contest check and apply the strict rule where it judges."""
    contest.rule = tol.rule
    contest.strict = strict
    if not contest.passed:
        contest.failed_rule = "contest"
        return contest
    if tol.strict is not None and not tol.contest_rule_only:
        for name, errors in strict.items():
            problem = strict_violation(name, errors, tol.strict)
            if problem:
                contest.status = EvaluationStatus.INCORRECT_NUMERICAL
                contest.reason = STRICT_TOLERANCE
                contest.detail = problem
                contest.failed_rule = "strict"
                return contest
    return contest


def _finite_stats(x: torch.Tensor, y: torch.Tensor, tol: Tolerance, allowed_nonfinite: Optional[torch.Tensor] = None):
    x = x.to(torch.float32)
    y = y.to(torch.float32)
    both_inf = allowed_nonfinite if allowed_nonfinite is not None else torch.zeros_like(x, dtype=torch.bool)
    bad_nonfinite = (~torch.isfinite(x)) & ~both_inf
    # a finite output where the reference is inf or NaN: |x - y| / |y| is inf/inf = NaN there,
    # which compares False with every threshold, so without this it would count as matched
    ref_nonfinite = (~torch.isfinite(y)) & ~both_inf
    abs_err = (x - y).abs()
    abs_err = torch.where(both_inf, torch.zeros_like(abs_err), abs_err)
    rel_err = abs_err / (y.abs() + 1e-8)
    rel_err = torch.where(both_inf, torch.zeros_like(rel_err), rel_err)
    n = abs_err.numel()
    if n == 0:
        return 0.0, 0.0, 1.0, 0
    exceed = ((abs_err > tol.atol) & (rel_err > tol.rtol)) | bad_nonfinite | ref_nonfinite
    matched = 1.0 - float(exceed.sum().item()) / n
    finite_abs = abs_err[torch.isfinite(abs_err)]
    finite_rel = rel_err[torch.isfinite(rel_err)]
    max_abs = float(finite_abs.max().item()) if finite_abs.numel() else math.inf
    max_rel = float(finite_rel.max().item()) if finite_rel.numel() else math.inf
    return max_abs, max_rel, matched, int(bad_nonfinite.sum().item())


def check_shapes_dtypes(outputs: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor]) -> Optional[CheckResult]:
    for name, ref in expected.items():
        out = outputs.get(name)
        if out is None:
            return CheckResult(EvaluationStatus.INCORRECT_SHAPE, reason=guards.MISSING_OUTPUT, detail=f"output {name!r} missing")
        if tuple(out.shape) != tuple(ref.shape):
            return CheckResult(EvaluationStatus.INCORRECT_SHAPE, reason=guards.SHAPE,
                               detail=f"{name}: shape {tuple(out.shape)} != {tuple(ref.shape)}")
        if out.dtype != ref.dtype:
            return CheckResult(EvaluationStatus.INCORRECT_DTYPE, reason=guards.DTYPE,
                               detail=f"{name}: dtype {out.dtype} != {ref.dtype}")
    return None


def check_elementwise(outputs, expected, tol: Tolerance, allow_ref_neg_inf: bool = False,
                      inputs: Optional[Mapping[str, Any]] = None,
                      exemption: Optional[RowExemption] = None) -> CheckResult:
    """The contest rule on every output (see the module docstring), then the strict rule on every
    floating-point output.  Rows a near-tie decides are judged against the reference or one of
    their alternatives (``StrictRule``): ``exemption`` where computed beforehand
    (``row_exemption``), else from ``inputs``."""
    bad = check_shapes_dtypes(outputs, expected)
    if bad:
        bad.rule = tol.rule
        bad.failed_rule = "contest"
        return bad
    strict: Dict[str, Dict[str, Optional[float]]] = {}
    if tol.strict is not None:
        if exemption is None:
            exemption = row_exemption(tol, inputs)
        for name, ref in expected.items():
            if ref.is_floating_point():
                exempt, alternatives, unlisted = exemption.for_output(name) if exemption is not None else (None,) * 3
                strict[name] = strict_errors(outputs[name], ref, tol.strict, allow_ref_neg_inf, exempt, alternatives,
                                             unlisted)
    return _judge(_contest_elementwise(outputs, expected, tol, allow_ref_neg_inf), tol, strict)


def _contest_elementwise(outputs, expected, tol: Tolerance, allow_ref_neg_inf: bool) -> CheckResult:
    worst = CheckResult(EvaluationStatus.PASSED)
    worst.matched_ratio = 1.0
    for name, ref in expected.items():
        out = outputs[name]
        allowed = None
        if allow_ref_neg_inf and ref.is_floating_point():
            allowed = torch.isneginf(ref.float()) & torch.isneginf(out.float())
        max_abs, max_rel, matched, nonfinite = _finite_stats(out, ref, tol, allowed)
        worst.max_absolute_error = max(worst.max_absolute_error, max_abs)
        worst.max_relative_error = max(worst.max_relative_error, max_rel)
        worst.matched_ratio = min(worst.matched_ratio, matched)
        if nonfinite:
            worst.status = EvaluationStatus.INCORRECT_NUMERICAL
            worst.reason = guards.NON_FINITE
            worst.detail = f"{name}: {nonfinite} non-finite elements (unwritten output or overflow)"
            worst.max_absolute_error = math.inf
            return worst
        if matched < tol.required_matched_ratio:
            worst.status = EvaluationStatus.INCORRECT_NUMERICAL
            worst.reason = guards.TOLERANCE
            worst.detail = (f"{name}: matched ratio {matched:.4f} < {tol.required_matched_ratio} "
                            f"(atol {tol.atol}, rtol {tol.rtol})")
            return worst
    worst.extra["matched_ratio"] = worst.matched_ratio
    return worst


def check_topk_indices(outputs, expected, tol: Tolerance, inputs: Mapping[str, Any]) -> CheckResult:
    """The DSA indexer check: validity (any violation fails at once, errors inf), then per batch
    row the sorted recomputed scores at the returned indices against those at the reference's
    (the contest rule on every row, then the strict rule: per-row and overall relative L2 of the
    sorted scores, a row that returns a different number of valid indices scoring inf)."""
    from kernelwright.definitions.dsa_indexer import reference as ref_mod

    bad = check_shapes_dtypes(outputs, expected)
    if bad:
        bad.rule = tol.rule
        bad.failed_rule = "contest"
        return bad
    got = outputs["topk_indices"].to(torch.int64).cpu()
    want = expected["topk_indices"].to(torch.int64).cpu()
    q = inputs["q_index_fp8"].to(torch.float32)
    keys_flat = ref_mod.dequantize_k_cache(inputs["k_index_cache_fp8"]).reshape(-1, q.shape[-1])
    seq_lens = inputs["seq_lens"].cpu()
    table = inputs["block_table"]
    page_size = inputs["k_index_cache_fp8"].shape[1]
    weights = inputs["weights"].to(torch.float32)
    result = CheckResult(EvaluationStatus.PASSED)
    strict_sq = [0.0, 0.0]          # sum over rows of ||x - y||^2 and ||y||^2 (sorted scores)
    worst_row = 0.0
    for b in range(got.shape[0]):
        seq_len = int(seq_lens[b])
        valid_ids = ref_mod.row_token_ids(table[b], seq_len, page_size).cpu() if seq_len > 0 else torch.empty(0, dtype=torch.int64)
        row = got[b]
        chosen = row[row >= 0]
        invalid = None
        if (row < -1).any():
            invalid = (guards.INVALID_INDEX, f"row {b}: negative index other than -1 (unwritten output?)")
        elif chosen.numel() != torch.unique(chosen).numel():
            invalid = (guards.DUPLICATE_INDEX, f"row {b}: duplicate indices")
        elif chosen.numel() and not torch.isin(chosen, valid_ids).all():
            invalid = (guards.INVALID_INDEX, f"row {b}: index outside the row's pages or beyond seq_len")
        if invalid is not None:
            res = CheckResult(EvaluationStatus.INCORRECT_NUMERICAL, math.inf, math.inf, 0.0, *invalid)
            strict = {"topk_indices": {"rel_l2": math.inf, "row_rel_l2": math.inf}} if tol.strict else {}
            return _judge(res, tol, strict)
        ref_ids = want[b][want[b] >= 0]
        device = keys_flat.device
        s_got = ref_mod.row_scores(q[b], keys_flat, weights[b], chosen.to(device)) if chosen.numel() else torch.empty(0, device=device)
        s_ref = ref_mod.row_scores(q[b], keys_flat, weights[b], ref_ids.to(device)) if ref_ids.numel() else torch.empty(0, device=device)
        width = got.shape[1]
        pad = lambda s: torch.cat([s.float().cpu(), torch.full((width - s.numel(),), -math.inf)])
        x = torch.sort(pad(s_got), descending=True).values
        y = torch.sort(pad(s_ref), descending=True).values
        both_inf = torch.isneginf(x) & torch.isneginf(y)
        max_abs, max_rel, matched, nonfinite = _finite_stats(x, y, tol, both_inf)
        result.max_absolute_error = max(result.max_absolute_error, max_abs)
        result.max_relative_error = max(result.max_relative_error, max_rel)
        result.matched_ratio = min(result.matched_ratio, matched)
        if (nonfinite or matched < tol.required_matched_ratio) and result.passed:
            result.status = EvaluationStatus.INCORRECT_NUMERICAL
            result.reason = guards.TOLERANCE
            result.detail = f"row {b}: sorted scores differ (matched {matched:.4f}, {chosen.numel()} valid of {ref_ids.numel()})"
        if chosen.numel() != ref_ids.numel():
            worst_row = math.inf
            continue
        xs, ys = x[: ref_ids.numel()].double(), y[: ref_ids.numel()].double()
        d2, y2 = float(((xs - ys) ** 2).sum()), float((ys ** 2).sum())
        if not (math.isfinite(d2) and math.isfinite(y2)):
            worst_row = math.inf
            continue
        strict_sq[0] += d2
        strict_sq[1] += y2
        worst_row = max(worst_row, _ratio(math.sqrt(d2), math.sqrt(y2)))
    result.extra["matched_ratio"] = result.matched_ratio
    strict = {}
    if tol.strict is not None:
        overall = math.inf if math.isinf(worst_row) else _ratio(math.sqrt(strict_sq[0]), math.sqrt(strict_sq[1]))
        strict = {"topk_indices": {"rel_l2": overall, "row_rel_l2": worst_row}}
    return _judge(result, tol, strict)


def check_outputs(kind: str, outputs, expected, tol: Tolerance, inputs: Mapping[str, Any],
                  exemption: Optional[RowExemption] = None) -> CheckResult:
    """Dispatch on the definition's checker kind.  ``exemption``: the near-tie rows of these inputs,
    computed beforehand where ``inputs`` no longer holds what the rule reads (``row_exemption``).

    Raises:
        ValueError: an unknown kind.
    """
    if kind == "elementwise":
        return check_elementwise(outputs, expected, tol, inputs=inputs, exemption=exemption)
    if kind == "attention":
        return check_elementwise(outputs, expected, tol, allow_ref_neg_inf=True, inputs=inputs, exemption=exemption)
    if kind == "topk_indices":
        return check_topk_indices(outputs, expected, tol, inputs)
    raise ValueError(f"unknown checker kind {kind!r}")
