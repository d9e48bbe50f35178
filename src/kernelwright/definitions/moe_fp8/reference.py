"""Reference for moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048 (plain PyTorch).

Semantics (FlashInfer-Bench definition of the same name; DeepSeek-V3 MoE layer on one EP rank):
  1. Dequantise every FP8 operand with its 128-block scale to fp32:
     hidden_states [T, H] with hidden_states_scale [H/128, T] (transposed, one scale per token
     per 128 columns); W13 [E_loc, 2I, H] and W2 [E_loc, H, I] with 128x128 block scales.
  2. DeepSeek-V3 no-aux routing over E = 256 experts: s = sigmoid(logits); b = s + bias;
     8 groups of 32, group score = sum of the group's top-2 of b; keep the top-4 groups; pick the
     top-8 experts of b inside the kept groups; weight = s (no bias) over the 8, normalised to
     sum 1 (+1e-20) and multiplied by routed_scaling_factor.
  3. For each local expert e in [local_expert_offset, +E_loc): G = A_e W13_e^T; X1, X2 = the
     two halves of G; C = silu(X2) * X1 (the SECOND half is the gate); O = C W2_e^T;
     out[token] += weight * O, accumulated in fp32; the output is cast to bf16.
Sizes are read from the tensors, so reduced-size variants (smaller H, I) use the same code.
"""

import torch

TOP_K = 8
N_GROUP = 8
TOPK_GROUP = 4
BLOCK = 128


def dequantize_activations(hidden_states, hidden_states_scale):
    """[T, H] fp8 and [H/128, T] fp32 scales -> [T, H] fp32."""
    scale = hidden_states_scale.to(torch.float32).t()  # [T, H/128]
    return hidden_states.to(torch.float32) * torch.repeat_interleave(scale, BLOCK, dim=1)


def dequantize_weight(weight, scale):
    """[N, K] fp8 with [N/128, K/128] fp32 block scales -> [N, K] fp32."""
    expanded = torch.repeat_interleave(torch.repeat_interleave(scale.to(torch.float32), BLOCK, 0), BLOCK, 1)
    return weight.to(torch.float32) * expanded


def routing_scores(routing_logits, routing_bias):
    """(s = sigmoid(logits) [T, E], biased b = s + bias [T, E], group scores [T, 8], b outside the
    top-4 groups set to the fp32 minimum [T, E]), all fp32: steps 2's selections act on these."""
    logits = routing_logits.to(torch.float32)
    num_tokens, num_experts = logits.shape
    s = torch.sigmoid(logits)
    biased = s + routing_bias.to(torch.float32).reshape(-1)
    grouped = biased.view(num_tokens, N_GROUP, num_experts // N_GROUP)
    group_scores = torch.topk(grouped, k=2, dim=2, largest=True, sorted=False).values.sum(dim=2)
    kept_groups = torch.topk(group_scores, k=TOPK_GROUP, dim=1, largest=True, sorted=False).indices
    group_mask = torch.zeros_like(group_scores).scatter_(1, kept_groups, 1.0)
    expert_mask = group_mask.unsqueeze(2).expand(-1, -1, num_experts // N_GROUP).reshape(num_tokens, num_experts)
    pruned = biased.masked_fill(expert_mask == 0, torch.finfo(torch.float32).min)
    return s, biased, group_scores, pruned


def routing_margins(routing_logits, routing_bias):
    """Per token, how far each of the routing's two choices is from a tie, fp32 [T]: the smaller
    of (4th - 5th group score) and (8th - 9th b inside the kept groups).  Below a few fp32 ulps,
    two correct implementations may route the token differently."""
    _, _, group_scores, pruned = routing_scores(routing_logits, routing_bias)
    groups = torch.topk(group_scores, k=TOPK_GROUP + 1, dim=1).values
    experts = torch.topk(pruned, k=TOP_K + 1, dim=1).values
    return torch.minimum(groups[:, TOPK_GROUP - 1] - groups[:, TOPK_GROUP], experts[:, TOP_K - 1] - experts[:, TOP_K])


def deepseek_v3_routing(routing_logits, routing_bias, routed_scaling_factor):
    """Returns (topk_idx [T, 8] int64 global expert ids, weights [T, E] fp32, zero off the top-8)."""
    s, _, _, pruned = routing_scores(routing_logits, routing_bias)
    topk_idx = torch.topk(pruned, k=TOP_K, dim=1, largest=True, sorted=False).indices
    selected = torch.zeros_like(s).scatter_(1, topk_idx, 1.0)
    weights = s * selected
    weights = weights / (weights.sum(dim=1, keepdim=True) + 1e-20) * routed_scaling_factor
    return topk_idx, weights


def local_experts_output(activations, topk_idx, weights, gemm1_weights, gemm1_weights_scale, gemm2_weights,
                         gemm2_weights_scale, local_expert_offset):
    """Step 3: [T, H] fp32, out[token] = sum over the local experts e the token routes to of
    weights[token, e] * O_e(token).  activations [T, H] fp32, topk_idx [T, 8] global ids,
    weights [T, E] fp32 (``deepseek_v3_routing``)."""
    num_tokens, hidden = activations.shape
    num_local = gemm1_weights.shape[0]
    intermediate = gemm2_weights.shape[2]
    num_experts = weights.shape[1]
    output = torch.zeros((num_tokens, hidden), dtype=torch.float32, device=activations.device)
    first = int(local_expert_offset)
    for local in range(num_local):
        expert = first + local
        if expert < 0 or expert >= num_experts:
            continue
        token_idx = torch.nonzero((topk_idx == expert).any(dim=1), as_tuple=False).squeeze(1)
        if token_idx.numel() == 0:
            continue
        w13 = dequantize_weight(gemm1_weights[local], gemm1_weights_scale[local])
        w2 = dequantize_weight(gemm2_weights[local], gemm2_weights_scale[local])
        g1 = activations.index_select(0, token_idx).matmul(w13.t())
        up, gate = g1[:, :intermediate], g1[:, intermediate:]
        c = gate / (1.0 + torch.exp(-gate)) * up
        o = c.matmul(w2.t())
        w_tok = weights.index_select(0, token_idx)[:, expert]
        output.index_add_(0, token_idx, o * w_tok.unsqueeze(1))
    return output


@torch.no_grad()
def run(
    routing_logits,
    routing_bias,
    hidden_states,
    hidden_states_scale,
    gemm1_weights,
    gemm1_weights_scale,
    gemm2_weights,
    gemm2_weights_scale,
    local_expert_offset,
    routed_scaling_factor,
):
    hidden = hidden_states.shape[1]
    intermediate = gemm2_weights.shape[2]
    if gemm1_weights.shape[1] != 2 * intermediate or hidden % BLOCK or intermediate % BLOCK:
        raise ValueError("inconsistent MoE shapes")

    activations = dequantize_activations(hidden_states, hidden_states_scale)
    topk_idx, weights = deepseek_v3_routing(routing_logits, routing_bias, routed_scaling_factor)
    output = local_experts_output(activations, topk_idx, weights, gemm1_weights, gemm1_weights_scale,
                                  gemm2_weights, gemm2_weights_scale, local_expert_offset)
    return output.to(torch.bfloat16)
