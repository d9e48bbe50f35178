"""Routing near-ties of the MoE definition and the references they allow (docs/gate.md, section 2a).

A token whose group or expert choice is within ``ROUTING_TIE_MARGIN`` of a tie may be routed the
other way by a correct kernel (another sigmoid, another summation order), and one expert lost or
gained moves that token's row by up to about 1.0 of its norm.  Such a token is exempt from the
per-row strict bound against the reference alone: its row must be within the bound against the
reference or against one of the references of the routings the tie allows
(``alternative_routings``, ``routing_alternatives``).  Only the exempt tokens are recomputed.

Not part of the definition's reference text (``reference.py`` is): this is the gate's side.
"""

from __future__ import annotations

import itertools
from typing import Any, List, Mapping, Tuple

import torch

from kernelwright.definitions.base import RowAlternatives
from kernelwright.definitions.moe_fp8 import reference

# ~80 fp32 ulps at 1.0.  On the H200 the DeepGEMM pipeline and vLLM's fused_moe each
# had one token routed the other way at T = 11948 and 14107 (row errors 0.54-1.0, whole-tensor
# 0.025); at T = 11948, 22-29 tokens are within 1e-5 of a tie, 0-3 within 1e-6
# (experiments/moe_routing_margins.py).
ROUTING_TIE_MARGIN = 1e-5
# the most routings enumerated per token (the reference's included); a token with more (three or
# more scores inside the margin at one boundary, as an all-equal logits row gives) is not listed
MAX_ROUTINGS = 64


def routing_near_ties(inputs: Mapping[str, Any]) -> torch.Tensor:
    """bool [T]: tokens whose routing is within ROUTING_TIE_MARGIN of a tie (``reference.routing_margins``).

    ``inputs``: routing_logits fp32 [T, 256], routing_bias [256] (any float dtype)."""
    return reference.routing_margins(inputs["routing_logits"], inputs["routing_bias"]) < ROUTING_TIE_MARGIN


def _topk_sets(scores: torch.Tensor, k: int, margin: float) -> List[List[int]]:
    """Top-k index sets of the 1-D ``scores`` that a near-tie allows: ``torch.topk``'s own first,
    then every set that swaps r of its members less than ``margin`` above the first one left out
    for r of the left-out ones less than ``margin`` below the last one kept (r = 1, 2, ...)."""
    values, order = torch.topk(scores, k=k + 1, largest=True, sorted=True)
    kept = order[:k].tolist()
    last_kept, first_out = float(values[k - 1]), float(values[k])
    listed = scores.tolist()
    swap_in = [i for i in kept if listed[i] - first_out < margin]
    swap_out = [j for j in range(len(listed)) if j not in kept and last_kept - listed[j] < margin]
    sets = [kept]
    for r in range(1, min(len(swap_in), len(swap_out)) + 1):
        for drop in itertools.combinations(swap_in, r):
            for add in itertools.combinations(swap_out, r):
                sets.append([i for i in kept if i not in drop] + list(add))
                if len(sets) > MAX_ROUTINGS:
                    return sets
    return sets


def _token_routings(biased: torch.Tensor, group_scores: torch.Tensor, margin: float) -> List[List[int]]:
    """Every top-8 expert set (global ids) one token's near-ties allow, the reference's first:
    each set of kept groups ``_topk_sets`` allows, and inside each the expert sets it allows.
    biased fp32 [E] (s + bias), group_scores fp32 [8]."""
    per_group = biased.numel() // reference.N_GROUP
    routings: List[List[int]] = []
    for groups in _topk_sets(group_scores, reference.TOPK_GROUP, margin):
        allowed = torch.zeros(reference.N_GROUP, dtype=torch.bool, device=biased.device)
        allowed[groups] = True
        pruned = biased.masked_fill(~allowed.repeat_interleave(per_group), torch.finfo(torch.float32).min)
        routings += _topk_sets(pruned, reference.TOP_K, margin)
        if len(routings) > MAX_ROUTINGS:
            break
    return routings


def alternative_routings(routing_logits: torch.Tensor, routing_bias: torch.Tensor,
                         margin: float = ROUTING_TIE_MARGIN) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The routings other than the reference's that a near-tie within ``margin`` allows.

    Args:
        routing_logits: fp32 [K, E], the tokens to route (E = 256); routing_bias: [E].

    Returns:
        (owner int64 [N]: the token (0..K-1) of each alternative, topk_idx int64 [N, 8]: its
        global expert ids, unlisted int64 [M]: tokens with more than ``MAX_ROUTINGS`` routings,
        whose alternatives are not returned).  N = 0 when no token has a near-tie.
    """
    _, biased, group_scores, _ = reference.routing_scores(routing_logits, routing_bias)
    own = reference.deepseek_v3_routing(routing_logits, routing_bias, 1.0)[0].tolist()
    device = biased.device
    owner: List[int] = []
    chosen: List[List[int]] = []
    unlisted: List[int] = []
    for t in range(biased.shape[0]):
        routings = _token_routings(biased[t], group_scores[t], margin)
        if len(routings) > MAX_ROUTINGS:
            unlisted.append(t)
            continue
        distinct = {frozenset(r): r for r in routings}      # two group choices may give one expert set
        distinct.pop(frozenset(own[t]), None)
        others = list(distinct.values())
        owner += [t] * len(others)
        chosen += others
    as_long = lambda v: torch.tensor(v, dtype=torch.int64, device=device)  # noqa: E731
    topk = as_long(chosen) if chosen else torch.zeros((0, reference.TOP_K), dtype=torch.int64, device=device)
    return as_long(owner), topk, as_long(unlisted)


def routing_alternatives(inputs: Mapping[str, Any], rows: torch.Tensor) -> RowAlternatives:
    """The reference's output rows of the tokens ``rows`` (int64 [K], the exempt tokens) under every
    other routing their near-ties allow (``alternative_routings``): for each, step 3 of the
    reference (``reference.local_experts_output``) on that token with that routing's weights,
    rounded to bf16 like the reference's output.  Only these tokens are recomputed.

    ``inputs``: the definition's full inputs (``make_inputs``).  Returns ``RowAlternatives`` with
    ``outputs["output"]`` bf16 [N, H]."""
    rows = rows.to(device=inputs["routing_logits"].device, dtype=torch.int64).reshape(-1)
    logits = inputs["routing_logits"].index_select(0, rows)
    owner, topk_idx, unlisted = alternative_routings(logits, inputs["routing_bias"])
    tokens = rows.index_select(0, owner)
    s = torch.sigmoid(logits.to(torch.float32)).index_select(0, owner)
    # the weights of reference.deepseek_v3_routing, for each alternative's experts
    selected = torch.zeros_like(s).scatter_(1, topk_idx, 1.0)
    weights = s * selected
    weights = weights / (weights.sum(dim=1, keepdim=True) + 1e-20) * float(inputs["routed_scaling_factor"])
    activations = reference.dequantize_activations(inputs["hidden_states"].index_select(0, tokens),
                                                   inputs["hidden_states_scale"].index_select(1, tokens))
    output = reference.local_experts_output(activations, topk_idx, weights, inputs["gemm1_weights"],
                                            inputs["gemm1_weights_scale"], inputs["gemm2_weights"],
                                            inputs["gemm2_weights_scale"], inputs["local_expert_offset"])
    return RowAlternatives(tokens, {"output": output.to(torch.bfloat16)}, rows.index_select(0, unlisted))
