"""Strict rule, MoE near-tie rows (docs/gate.md, section 2a): runs the shipped Triton MoE kernel,
then writes zeros on the rows of the tokens whose routing is within 1e-5 of a tie (the 4th/5th
group score or the 8th/9th expert score inside the kept groups: ``moe_fp8.ROUTING_TIE_MARGIN``),
which it finds on the host with numpy (the CPU provenance rule records torch ops only).  Those
rows once were skipped by the per-row bound, so only the whole-tensor bound and the contest rule
saw them: one row of thousands weighs nothing there (at T = 11948, 22-29 such tokens).

The case pins the run's input nonce (``Case.nonces``) so that the quick T = 37 workload's second
correctness trial holds such a token (row 28, margin 7.2e-6, 3e-6 of the output's energy: zeros
pass the whole-tensor bound at 1.7e-3 and the contest rule at 97 % matched).  Expected:
STRICT_TOLERANCE (an exempt row must be within the per-row bound against the reference or the
reference of a routing its tie allows; zeros match neither: row error 1.0).  Before that rule:
PASS.
"""

import numpy as np
import torch
import triton
import triton.language as tl

from kernelwright.solutions.moe_fp8_triton import kernel as _moe

_MARGIN = 1e-5


@triton.jit
def _zero_rows(out_ptr, rows_ptr, H: tl.constexpr):
    row = tl.load(rows_ptr + tl.program_id(0))
    cols = tl.arange(0, H)
    tl.store(out_ptr + row * H + cols, tl.zeros([H], dtype=tl.bfloat16))


def _near_tie_tokens(routing_logits, routing_bias):
    """Tokens within _MARGIN of a routing tie, as the reference's routing_margins (numpy, fp32)."""
    logits = routing_logits.detach().cpu().numpy().astype(np.float32)
    bias = routing_bias.detach().cpu().float().numpy().astype(np.float32)
    biased = (np.float32(1.0) / (np.float32(1.0) + np.exp(-logits)) + bias).astype(np.float32)
    tokens, experts = biased.shape
    group_scores = np.sort(biased.reshape(tokens, 8, experts // 8), axis=2)[:, :, -2:].sum(axis=2)
    ranked = np.sort(group_scores, axis=1)[:, ::-1]
    kept = np.argsort(-group_scores, axis=1, kind="stable")[:, :4]
    mask = np.zeros((tokens, 8), dtype=bool)
    np.put_along_axis(mask, kept, True, axis=1)
    pruned = np.where(np.repeat(mask, experts // 8, axis=1), biased, np.finfo(np.float32).min)
    top = np.sort(pruned, axis=1)[:, ::-1]
    margins = np.minimum(ranked[:, 3] - ranked[:, 4], top[:, 7] - top[:, 8])
    return np.nonzero(margins < _MARGIN)[0]


def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights, gemm1_weights_scale,
        gemm2_weights, gemm2_weights_scale, local_expert_offset, routed_scaling_factor, output):
    _moe.run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights, gemm1_weights_scale,
             gemm2_weights, gemm2_weights_scale, local_expert_offset, routed_scaling_factor, output)
    tied = _near_tie_tokens(routing_logits, routing_bias)
    if len(tied):
        rows = torch.from_numpy(tied.astype(np.int64)).to(output.device)
        _zero_rows[(len(tied),)](output, rows, H=output.shape[1])
