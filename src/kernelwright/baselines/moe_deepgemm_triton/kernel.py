"""DeepSeek-V3 FP8 block-scale MoE on Hopper as vLLM/SGLang run it with DeepGEMM: everything in
the timed call, no host synchronisation.

  1. routing    FlashInfer ``fused_topk_deepseek`` (TRT-LLM NoAuxTc kernel; fp32 logits with a
                bf16 bias is a supported dtype pair); Triton kernel when FlashInfer is absent
  2. scatter    Triton: per-expert atomic counters, tokens copied into DeepGEMM's masked layout
                [E, max_m, H] with their 1x128 scales written MN-major ([E, H/128, max_m])
  3. GEMM1      ``deep_gemm.m_grouped_fp8_gemm_nt_masked`` (SM90 1D2D kernel), bf16 [E, max_m, 2I]
  4. SwiGLU     Triton: silu(second half) * first half, 1x128 FP8 quantisation
  5. GEMM2      ``deep_gemm.m_grouped_fp8_gemm_nt_masked``, bf16 [E, max_m, H]
  6. combine    Triton: routing-weighted sum over each token's local pairs, bf16 [T, H]

max_m = T rounded up to 64 (a token meets an expert at most once, so no expert can overflow
without knowing the counts on the host); the masked kernels read the per-expert counts on the
device and skip empty tiles.  expected_m (a tuning hint only) = ceil(T * 8 / 256).

Two entry points (two manifests): ``run`` is the pipeline above (``moe_deepgemm_triton``,
manifest.json); ``run_gemms_only`` (``moe_deepgemm_triton_gemms_only``, manifest.gemms_only.json)
is a LOWER BOUND, timing only: the two masked grouped GEMMs alone for the counts this input's
routing gives, with the same max_m / expected_m, so the gap between the two is the cost of
routing, scatter, SwiGLU and combine.  ``prepare_gemms_only`` (untimed) does the routing, the
scatter into the masked layout and one GEMM1 + SwiGLU + FP8 quantisation (plain PyTorch) to get a
realistic GEMM2 input; the call runs only GEMM1 and GEMM2 into scratch buffers.  The output is
NOT written: never claim that entry correct.
"""

import functools

import torch

from .glue import TOP_K, N_GROUP, TOPK_GROUP, combine, route_triton, scatter, swiglu_quant

ROW_ALIGN = 64


@functools.lru_cache(maxsize=None)
def _deep_gemm():
    try:
        from vllm.third_party import deep_gemm  # the copy inside the vllm 0.20.0 wheel
    except ImportError:
        import deep_gemm
    return deep_gemm


@functools.lru_cache(maxsize=None)
def _flashinfer_routing():
    try:
        from flashinfer.fused_moe import fused_topk_deepseek
    except Exception:
        return None
    return fused_topk_deepseek


def routing_backend() -> str:
    return "flashinfer.fused_topk_deepseek" if _flashinfer_routing() is not None else "triton"


def _route(routing_logits, routing_bias, routed_scaling_factor, topk_idx, topk_w):
    fused = _flashinfer_routing()
    if fused is None:
        route_triton(routing_logits, routing_bias, routed_scaling_factor, topk_idx, topk_w)
        return
    fused(routing_logits, routing_bias, N_GROUP, TOPK_GROUP, TOP_K, float(routed_scaling_factor),
          topk_w, topk_idx, True)


def max_rows(num_tokens: int) -> int:
    return max(ROW_ALIGN, -(-num_tokens // ROW_ALIGN) * ROW_ALIGN)


def expected_rows(num_tokens: int, num_experts: int, max_m: int) -> int:
    return max(1, min(max_m, -(-num_tokens * TOP_K // num_experts)))


@torch.no_grad()
def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
        gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, local_expert_offset,
        routed_scaling_factor, output):
    dg = _deep_gemm()
    num_tokens, hidden = hidden_states.shape
    num_local, gemm1_out, _ = gemm1_weights.shape
    inter = gemm1_out // 2
    dev = hidden_states.device
    if num_tokens == 0:
        return output
    max_m = max_rows(num_tokens)
    expected_m = expected_rows(num_tokens, routing_logits.shape[1], max_m)

    topk_idx = torch.empty((num_tokens, TOP_K), dtype=torch.int32, device=dev)
    topk_w = torch.empty((num_tokens, TOP_K), dtype=torch.float32, device=dev)
    _route(routing_logits, routing_bias, routed_scaling_factor, topk_idx, topk_w)

    counts = torch.zeros((num_local,), dtype=torch.int32, device=dev)
    pair_pos = torch.empty((num_tokens, TOP_K), dtype=torch.int32, device=dev)
    a1 = torch.empty((num_local, max_m, hidden), dtype=torch.float8_e4m3fn, device=dev)
    sfa1 = torch.empty((num_local, hidden // 128, max_m), dtype=torch.float32, device=dev)
    scatter(topk_idx, hidden_states, hidden_states_scale, local_expert_offset, a1, sfa1, counts,
            pair_pos)

    d1 = torch.empty((num_local, max_m, gemm1_out), dtype=torch.bfloat16, device=dev)
    dg.m_grouped_fp8_gemm_nt_masked((a1, sfa1.transpose(1, 2)), (gemm1_weights, gemm1_weights_scale),
                                    d1, counts, expected_m)

    a2 = torch.empty((num_local, max_m, inter), dtype=torch.float8_e4m3fn, device=dev)
    sfa2 = torch.empty((num_local, inter // 128, max_m), dtype=torch.float32, device=dev)
    swiglu_quant(d1, counts, a2, sfa2)

    d2 = torch.empty((num_local, max_m, hidden), dtype=torch.bfloat16, device=dev)
    dg.m_grouped_fp8_gemm_nt_masked((a2, sfa2.transpose(1, 2)), (gemm2_weights, gemm2_weights_scale),
                                    d2, counts, expected_m)

    combine(d2, pair_pos, topk_w, output)
    return output


# --------------------------------------------------------------------------- the GEMMs-only lower bound
def _routing_torch(routing_logits, routing_bias):
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
def prepare_gemms_only(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
            gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, local_expert_offset,
            routed_scaling_factor):
    dg = _deep_gemm()
    num_tokens, hidden = hidden_states.shape
    num_local, gemm1_out, _ = gemm1_weights.shape
    inter = gemm1_out // 2
    dev = hidden_states.device
    max_m = max_rows(num_tokens)
    expected_m = expected_rows(num_tokens, routing_logits.shape[1], max_m)

    experts = _routing_torch(routing_logits, routing_bias) - int(local_expert_offset)
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
def run_gemms_only(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
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
