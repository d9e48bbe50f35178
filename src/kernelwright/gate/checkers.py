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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

import torch

from kernelwright.definitions.base import Tolerance
from kernelwright.trace import EvaluationStatus


@dataclass
class CheckResult:
    status: EvaluationStatus
    max_absolute_error: float = 0.0
    max_relative_error: float = 0.0
    matched_ratio: float = 1.0
    reason: Optional[str] = None
    detail: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == EvaluationStatus.PASSED


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
            return CheckResult(EvaluationStatus.INCORRECT_SHAPE, reason="MISSING_OUTPUT", detail=f"output {name!r} missing")
        if tuple(out.shape) != tuple(ref.shape):
            return CheckResult(EvaluationStatus.INCORRECT_SHAPE, reason="SHAPE",
                               detail=f"{name}: shape {tuple(out.shape)} != {tuple(ref.shape)}")
        if out.dtype != ref.dtype:
            return CheckResult(EvaluationStatus.INCORRECT_DTYPE, reason="DTYPE",
                               detail=f"{name}: dtype {out.dtype} != {ref.dtype}")
    return None


def check_elementwise(outputs, expected, tol: Tolerance, allow_ref_neg_inf: bool = False) -> CheckResult:
    bad = check_shapes_dtypes(outputs, expected)
    if bad:
        return bad
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
            worst.reason = "NON_FINITE"
            worst.detail = f"{name}: {nonfinite} non-finite elements (unwritten output or overflow)"
            worst.max_absolute_error = math.inf
            return worst
        if matched < tol.required_matched_ratio:
            worst.status = EvaluationStatus.INCORRECT_NUMERICAL
            worst.reason = "TOLERANCE"
            worst.detail = (f"{name}: matched ratio {matched:.4f} < {tol.required_matched_ratio} "
                            f"(atol {tol.atol}, rtol {tol.rtol})")
            return worst
    worst.extra["matched_ratio"] = worst.matched_ratio
    return worst


def check_topk_indices(outputs, expected, tol: Tolerance, inputs: Mapping[str, Any]) -> CheckResult:
    """The DSA indexer check (validity, then sorted-score comparison)."""
    from kernelwright.definitions.dsa_indexer import reference as ref_mod

    bad = check_shapes_dtypes(outputs, expected)
    if bad:
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
    for b in range(got.shape[0]):
        seq_len = int(seq_lens[b])
        valid_ids = ref_mod.row_token_ids(table[b], seq_len, page_size).cpu() if seq_len > 0 else torch.empty(0, dtype=torch.int64)
        row = got[b]
        chosen = row[row >= 0]
        if (row < -1).any():
            return CheckResult(EvaluationStatus.INCORRECT_NUMERICAL, math.inf, math.inf, 0.0,
                               "INVALID_INDEX", f"row {b}: negative index other than -1 (unwritten output?)")
        if chosen.numel() != torch.unique(chosen).numel():
            return CheckResult(EvaluationStatus.INCORRECT_NUMERICAL, math.inf, math.inf, 0.0,
                               "DUPLICATE_INDEX", f"row {b}: duplicate indices")
        if chosen.numel() and not torch.isin(chosen, valid_ids).all():
            return CheckResult(EvaluationStatus.INCORRECT_NUMERICAL, math.inf, math.inf, 0.0,
                               "INVALID_INDEX", f"row {b}: index outside the row's pages or beyond seq_len")
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
        if nonfinite or matched < tol.required_matched_ratio:
            result.status = EvaluationStatus.INCORRECT_NUMERICAL
            result.reason = "TOLERANCE"
            result.detail = f"row {b}: sorted scores differ (matched {matched:.4f}, {chosen.numel()} valid of {ref_ids.numel()})"
            return result
    result.extra["matched_ratio"] = result.matched_ratio
    return result


def check_outputs(kind: str, outputs, expected, tol: Tolerance, inputs: Mapping[str, Any]) -> CheckResult:
    """Dispatch on the definition's checker kind.  Raises ValueError for an unknown kind."""
    if kind == "elementwise":
        return check_elementwise(outputs, expected, tol)
    if kind == "attention":
        return check_elementwise(outputs, expected, tol, allow_ref_neg_inf=True)
    if kind == "topk_indices":
        return check_topk_indices(outputs, expected, tol, inputs)
    raise ValueError(f"unknown checker kind {kind!r}")
