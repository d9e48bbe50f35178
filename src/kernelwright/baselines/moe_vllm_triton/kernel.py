"""DeepSeek-V3 FP8 block-scale MoE on one EP rank the way vLLM 0.20.0 runs it with its Triton
``fused_moe`` (``fused_experts(..., use_fp8_w8a8=True, block_shape=[128, 128])``), from the
wheel's own files (``vllm_fused_moe.py``).  Everything is in the timed call, no host sync.

The steps of vLLM's ``fused_experts_impl``, each a vLLM function unless marked:

  1. routing   ``fused_grouped_topk`` (vLLM's DeepSeek path with VLLM_USE_FUSED_MOE_GROUPED_TOPK=1,
               the default) over the stand-in op (FlashInfer ``fused_topk_deepseek``); without
               FlashInfer, vLLM's ``grouped_topk`` torch code, eager (vLLM torch.compiles it;
               see vllm_fused_moe.py for why not here)
  2. config    ``try_get_optimal_moe_config``: the shipped
               ``E=32,N=2048,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json``
               entry nearest to T (vLLM's default heuristic on other GPUs)
  3. align     ``_prepare_expert_assignment`` -> ``moe_align_block_size`` with the EP
               ``expert_map`` (global id -> local id, -1 off this rank) and
               ``ignore_invalid_experts=True``: non-local pairs are left out; the op is a Triton
               stand-in (``standin_ops.py``)
  4. GEMM1     ``dispatch_fused_moe_kernel`` (``fused_moe_kernel``) on the FP8 hidden states as
               given, with their 1x128 scales as the [T, H/128] view ``hidden_states_scale.t()``
               (vLLM quantises bf16 input here; the definition's input is already quantised)
               -> bf16 [T, 8, 2I]
  5. SwiGLU    stand-in for ``silu_and_mul`` (definition's half order) -> bf16 [T*8, I]
  6. quant     ``moe_kernel_quantize_input`` -> ``per_token_group_quant_fp8`` (group 128, vLLM's
               Triton kernel; UE8M0 scales when vLLM would pick them, see vllm_fused_moe.py)
  7. GEMM2     ``dispatch_fused_moe_kernel`` with the routing weights multiplied in, into a
               zeroed [T, 8, H] bf16 cache (rows of non-local pairs stay 0)
  8. sum       ``moe_sum`` stand-in (torch.sum over the 8, as vLLM's op does for top-k 8) -> output

Layouts: routing_logits [T, 256] fp32; routing_bias [256] bf16; hidden_states [T, H] fp8 e4m3;
hidden_states_scale [H/128, T] fp32; gemm1_weights [E, 2I, H] fp8 (rows [0, I) up, [I, 2I) gate)
with gemm1_weights_scale [E, 2I/128, H/128] fp32; gemm2_weights [E, H, I] fp8 with
gemm2_weights_scale [E, H/128, I/128] fp32; output [T, H] bf16 (E = 32 local experts).
"""

import functools

import torch
import triton.language as tl

from . import standin_ops
from .vllm_fused_moe import load

TOP_K = 8
N_GROUP = 8
TOPK_GROUP = 4
BLOCK_SHAPE = [128, 128]
CONFIG_DTYPE = "fp8_w8a8"


def uses_fused_routing() -> bool:
    """vLLM's own condition in ``grouped_topk`` (the env flag, default on, and the compiled op
    present), with the stand-in op in place of ``_moe_C``'s."""
    return bool(load().envs.VLLM_USE_FUSED_MOE_GROUPED_TOPK) and standin_ops.has_grouped_topk()


def routing_backend() -> str:
    if uses_fused_routing():
        return "vllm fused_grouped_topk (FlashInfer fused_topk_deepseek)"
    return "vllm grouped_topk (eager torch)"


def route(hidden_states, routing_logits, routing_bias, routed_scaling_factor):
    """vLLM's DeepSeek-V3 routing: (weights [T, 8] fp32, global expert ids [T, 8] int32)."""
    router = load().router
    kwargs = dict(hidden_states=hidden_states, gating_output=routing_logits, topk=TOP_K, renormalize=True,
                  num_expert_group=N_GROUP, topk_group=TOPK_GROUP, scoring_func="sigmoid",
                  routed_scaling_factor=float(routed_scaling_factor), e_score_correction_bias=routing_bias)
    if uses_fused_routing():
        return router.fused_grouped_topk(**kwargs)
    return router.grouped_topk(**kwargs)


@functools.lru_cache(maxsize=64)
def expert_map(num_experts: int, first_local: int, num_local: int, device: torch.device):
    """[num_experts] int32: local id of each global expert, -1 off this rank (vLLM's EP map; a
    constant of the layer, built once per rank as vLLM builds it at load)."""
    table = torch.full((num_experts,), -1, dtype=torch.int32)
    lo, hi = max(first_local, 0), min(first_local + num_local, num_experts)
    if hi > lo:
        table[lo:hi] = torch.arange(lo - first_local, hi - first_local, dtype=torch.int32)
    return table.to(device)


def tuned_config(gemm1_weights, gemm2_weights, num_tokens: int):
    """vLLM's kernel config for T tokens (tile sizes, GROUP_SIZE_M, warps, stages)."""
    return load().fused_moe.try_get_optimal_moe_config(
        gemm1_weights.size(), gemm2_weights.size(), TOP_K, CONFIG_DTYPE, num_tokens, block_shape=BLOCK_SHAPE)


def config_source(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
                  *_ignored) -> str:
    """Which kernel config vLLM picks for these inputs, in words (for the self-check)."""
    fm = load().fused_moe
    num_local, inter = gemm1_weights.shape[0], gemm1_weights.shape[1] // 2
    name = fm.get_config_file_name(num_local, inter, CONFIG_DTYPE, BLOCK_SHAPE)
    table = fm.get_moe_configs(num_local, inter, CONFIG_DTYPE, *BLOCK_SHAPE)
    num_tokens = hidden_states.shape[0]
    if not table:
        return f"vLLM default config (no {name})"
    key = min(table, key=lambda m: abs(m - num_tokens))
    return f"{name} entry {key}: {table[key]}"


def _gemm(a, a_scale, w, w_scale, c, topk_weights, assignment, mul_routed_weight, top_k, config):
    sorted_token_ids, expert_ids, num_tokens_post_padded = assignment
    load().fused_moe.dispatch_fused_moe_kernel(
        a, w, c, a_scale, w_scale, None, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
        mul_routed_weight, top_k, config, compute_type=tl.bfloat16, use_fp8_w8a8=True, use_int8_w8a8=False,
        use_int8_w8a16=False, use_int4_w4a16=False, per_channel_quant=False, block_shape=BLOCK_SHAPE)


@torch.no_grad()
def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
        gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, local_expert_offset,
        routed_scaling_factor, output):
    vllm = load()
    num_tokens, hidden = hidden_states.shape
    num_local, gemm1_out, _ = gemm1_weights.shape
    num_experts = routing_logits.shape[1]
    if num_tokens == 0:
        return output
    dev = hidden_states.device

    topk_weights, topk_ids = route(hidden_states, routing_logits, routing_bias, routed_scaling_factor)
    config = tuned_config(gemm1_weights, gemm2_weights, num_tokens)
    assignment = vllm.fused_moe._prepare_expert_assignment(
        topk_ids, config, num_tokens, TOP_K, num_experts,
        expert_map(num_experts, int(local_expert_offset), num_local, dev),
        block_shape=BLOCK_SHAPE, ignore_invalid_experts=True)

    # vLLM's buffers: cache1 and cache3 share memory (cache1 is consumed before GEMM2 writes)
    cache13 = torch.empty(num_tokens * TOP_K * max(gemm1_out, hidden), dtype=torch.bfloat16, device=dev)
    cache1 = cache13[: num_tokens * TOP_K * gemm1_out].view(num_tokens, TOP_K, gemm1_out)
    cache3 = cache13[: num_tokens * TOP_K * hidden].view(num_tokens, TOP_K, hidden)
    cache2 = torch.empty((num_tokens * TOP_K, gemm1_out // 2), dtype=torch.bfloat16, device=dev)

    _gemm(hidden_states, hidden_states_scale.t(), gemm1_weights, gemm1_weights_scale, cache1, topk_weights,
          assignment, False, TOP_K, config)
    standin_ops.swiglu(cache2, cache1.view(-1, gemm1_out))
    a2, a2_scale = vllm.utils.moe_kernel_quantize_input(
        A=cache2, A_scale=None, quant_dtype=torch.float8_e4m3fn, per_act_token_quant=False,
        block_shape=BLOCK_SHAPE)
    cache3.zero_()
    _gemm(a2, a2_scale, gemm2_weights, gemm2_weights_scale, cache3, topk_weights, assignment, True, 1, config)
    vllm.ops.moe_sum(cache3, output)
    return output
