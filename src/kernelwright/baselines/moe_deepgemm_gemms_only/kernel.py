"""LOWER BOUND, timing only: DeepGEMM's two masked grouped FP8 GEMMs alone, for the token counts
this input's routing gives.  ``prepare`` (untimed) does the routing, the scatter into the masked
layout and one GEMM1 + SwiGLU + FP8 quantisation (plain PyTorch) to get a realistic GEMM2 input;
the call runs only GEMM1 and GEMM2 into scratch buffers.  The output is NOT written: never claim
this entry correct.  Same max_m / expected_m rules as the complete DeepGEMM baseline, so the gap
between the two is the cost of routing, scatter, SwiGLU and combine.
"""

import functools

import torch

TOP_K = 8
N_GROUP = 8
TOPK_GROUP = 4
ROW_ALIGN = 64


@functools.lru_cache(maxsize=None)
def _deep_gemm():
    try:
        from vllm.third_party import deep_gemm  # the copy inside the vllm 0.20.0 wheel
    except ImportError:
        import deep_gemm
    return deep_gemm


def _routing(routing_logits, routing_bias):
    """DeepSeek-V3 no-aux routing (selection only): top-8 global expert ids [T, 8]."""
    logits = routing_logits.float()
    num_tokens, num_experts = logits.shape
    biased = torch.sigmoid(logits) + routing_bias.float()
    grouped = biased.view(num_tokens, N_GROUP, num_experts // N_GROUP)
    group_scores = grouped.topk(2, dim=2).values.sum(dim=2)
    kept = group_scores.topk(TOPK_GROUP, dim=1).indices
    mask = torch.zeros_like(group_scores).scatter_(1, kept, 1.0)
    mask = mask.unsqueeze(2).expand_as(grouped).reshape(num_tokens, num_experts)
    return biased.masked_fill(mask == 0, float("-inf")).topk(TOP_K, dim=1).indices


def _quant_rows(x):
    """[..., K] fp32 -> fp8 with 1x128 scales [..., K/128]."""
    blocks = x.view(*x.shape[:-1], x.shape[-1] // 128, 128)
    scale = blocks.abs().amax(dim=-1).clamp_min(1e-10) / 448.0
    return (blocks / scale.unsqueeze(-1)).view_as(x).to(torch.float8_e4m3fn), scale


@torch.no_grad()
def prepare(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
            gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, local_expert_offset,
            routed_scaling_factor):
    dg = _deep_gemm()
    num_tokens, hidden = hidden_states.shape
    num_local, gemm1_out, _ = gemm1_weights.shape
    inter = gemm1_out // 2
    dev = hidden_states.device
    max_m = max(ROW_ALIGN, -(-num_tokens // ROW_ALIGN) * ROW_ALIGN)
    expected_m = max(1, min(max_m, -(-num_tokens * TOP_K // routing_logits.shape[1])))

    experts = _routing(routing_logits, routing_bias) - int(local_expert_offset)
    a1 = torch.zeros((num_local, max_m, hidden), dtype=torch.float8_e4m3fn, device=dev)
    sfa1 = torch.ones((num_local, hidden // 128, max_m), dtype=torch.float32, device=dev)
    counts = torch.zeros((num_local,), dtype=torch.int32, device=dev)
    for e in range(num_local):
        tokens = torch.nonzero((experts == e).any(dim=1)).squeeze(1)
        n = tokens.numel()
        counts[e] = n
        if n:
            a1[e, :n] = hidden_states.index_select(0, tokens)
            sfa1[e, :, :n] = hidden_states_scale.index_select(1, tokens)

    d1 = torch.empty((num_local, max_m, gemm1_out), dtype=torch.bfloat16, device=dev)
    dg.m_grouped_fp8_gemm_nt_masked((a1, sfa1.transpose(1, 2)), (gemm1_weights, gemm1_weights_scale),
                                    d1, counts, expected_m)
    up, gate = d1.float().split(inter, dim=-1)
    a2, s2 = _quant_rows(torch.nn.functional.silu(gate) * up)
    sfa2 = s2.transpose(1, 2).contiguous()  # [E, I/128, max_m]
    d2 = torch.empty((num_local, max_m, hidden), dtype=torch.bfloat16, device=dev)
    return {"a1": a1, "sfa1": sfa1, "a2": a2.contiguous(), "sfa2": sfa2, "d1": d1, "d2": d2,
            "counts": counts, "expected_m": expected_m, "pairs": int(counts.sum().item()),
            "active": int((counts > 0).sum().item()), "max_m": max_m}


@torch.no_grad()
def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
        gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, local_expert_offset,
        routed_scaling_factor, output, *, state):
    dg = _deep_gemm()
    s = state
    dg.m_grouped_fp8_gemm_nt_masked((s["a1"], s["sfa1"].transpose(1, 2)),
                                    (gemm1_weights, gemm1_weights_scale), s["d1"], s["counts"],
                                    s["expected_m"])
    dg.m_grouped_fp8_gemm_nt_masked((s["a2"], s["sfa2"].transpose(1, 2)),
                                    (gemm2_weights, gemm2_weights_scale), s["d2"], s["counts"],
                                    s["expected_m"])
    return output
