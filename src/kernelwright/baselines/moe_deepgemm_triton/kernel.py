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
