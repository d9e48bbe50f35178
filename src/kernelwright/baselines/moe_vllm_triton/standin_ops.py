"""kernelwright stand-ins for the compiled vLLM ops on the Triton fused-MoE path.

vLLM 0.20.0 runs these from ``vllm/_moe_C.abi3.so`` (38.3 MB) and ``vllm/_C.abi3.so`` (88.6 MB),
which do not fit the 64 MiB that travels to the H200 next to ``.whl/``.  Each stand-in keeps the
signature and output contract of the op it replaces, so vLLM's own Python around it runs unchanged:

  ``moe_align_block_size``  (_moe_C)  Triton: per-expert counts, padded offsets, token scatter
  ``moe_sum``               (_moe_C)  ``torch.sum(input, 1, out=output)``: vLLM's kernel calls
                                      ``at::sum_out`` itself for top-k other than 2, 3 and 4
  ``grouped_topk``          (_moe_C)  FlashInfer ``fused_topk_deepseek`` (TensorRT-LLM's NoAuxTc
                                      kernel, the one vLLM's grouped_topk kernel derives from)
  ``swiglu``                (_C ``silu_and_mul``)  Triton, one pass, bf16 in and out; it reads the
                                      halves in the DEFINITION's order (up first, gate second), where
                                      vLLM's op takes the gate first (its weight loader stacks
                                      [gate; up]): same work, no weight reordering

Layouts (T tokens, K = top-k, S = experts counted, BM = the GEMM's BLOCK_SIZE_M):
  topk_ids          [T, K] int32   global expert ids
  expert_map        [S] int32      local id of each global expert, -1 when not on this rank
  sorted_token_ids  [P] int32      flat (token, k) indices grouped by local expert, each group
                                   padded to a multiple of BM with the value T*K
  expert_ids        [ceil(P/BM)] int32  local expert of each BM-row block (0 past the end)
  num_tokens_post_pad [1] int32    sum of the padded group sizes
"""

import functools

import torch
import triton
import triton.language as tl

ALIGN_BLOCK = 1024   # (token, k) pairs per program of the count and scatter kernels
OFFSET_BLOCKS = 64   # BM-row blocks per program of the offsets kernel


@triton.jit
def _expert_of_pair(topk_ids_ptr, expert_map_ptr, offs, numel, num_experts, HAS_MAP: tl.constexpr):
    """(slot, valid) of each pair: its local expert through expert_map, or its global id."""
    in_range = offs < numel
    e = tl.load(topk_ids_ptr + offs, mask=in_range, other=-1)
    valid = in_range & (e >= 0) & (e < num_experts)
    if HAS_MAP:
        e = tl.load(expert_map_ptr + tl.where(valid, e, 0), mask=valid, other=-1)
        valid = valid & (e >= 0)
    return tl.where(valid, e, 0), valid


@triton.jit
def _align_count_kernel(topk_ids_ptr, expert_map_ptr, counts_ptr, numel, num_experts,
                        HAS_MAP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    slot, valid = _expert_of_pair(topk_ids_ptr, expert_map_ptr, offs, numel, num_experts, HAS_MAP)
    tl.atomic_add(counts_ptr + slot, tl.full([BLOCK], 1, tl.int32), mask=valid)


@triton.jit
def _align_offsets_kernel(counts_ptr, cursor_ptr, expert_ids_ptr, sorted_ids_ptr, total_ptr,
                          numel, num_slots, num_blocks, num_sorted,
                          S: tl.constexpr, BM: tl.constexpr, BLOCKS: tl.constexpr):
    """Every program rebuilds the padded exclusive offsets of the S slots (cheap) and labels its
    BLOCKS blocks with their expert and fills their rows with the padding value; program 0 also
    writes the scatter cursors (= offsets) and the padded total."""
    s = tl.arange(0, S)
    counts = tl.load(counts_ptr + s, mask=s < num_slots, other=0)
    padded = (counts + BM - 1) // BM * BM
    end = tl.cumsum(padded, axis=0)
    total = tl.sum(padded, axis=0)
    if tl.program_id(0) == 0:
        tl.store(cursor_ptr + s, end - padded, mask=s < num_slots)
        tl.store(total_ptr, total)
    b = tl.program_id(0) * BLOCKS + tl.arange(0, BLOCKS)
    row0 = b * BM
    owner = tl.sum((end[None, :] <= row0[:, None]).to(tl.int32), axis=1)  # slots ending before the block
    tl.store(expert_ids_ptr + b, tl.where(row0 < total, owner, 0), mask=b < num_blocks)
    rows = row0[:, None] + tl.arange(0, BM)[None, :]
    tl.store(sorted_ids_ptr + rows, tl.full([BLOCKS, BM], 0, tl.int32) + numel, mask=rows < num_sorted)


@triton.jit
def _align_scatter_kernel(topk_ids_ptr, expert_map_ptr, cursor_ptr, sorted_ids_ptr, numel, num_experts,
                          HAS_MAP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    slot, valid = _expert_of_pair(topk_ids_ptr, expert_map_ptr, offs, numel, num_experts, HAS_MAP)
    pos = tl.atomic_add(cursor_ptr + slot, tl.full([BLOCK], 1, tl.int32), mask=valid)
    tl.store(sorted_ids_ptr + pos, offs.to(tl.int32), mask=valid)


def moe_align_block_size(topk_ids, num_experts, block_size, sorted_token_ids, experts_ids,
                         num_tokens_post_pad, expert_map=None):
    """Stand-in for ``torch.ops._moe_C.moe_align_block_size`` (same arguments, fills the three
    output tensors).  With ``expert_map`` pairs of experts mapped to -1 are left out and
    ``experts_ids`` holds local ids (what vLLM's wrapper expects with
    ``ignore_invalid_experts=True``); without it, ids >= num_experts are left out.  The order of
    the pairs inside an expert's group is unspecified (atomics), as in vLLM's kernel.

    Args: topk_ids [T, K] int32/int64; sorted_token_ids [P] int32; experts_ids [ceil(P/BM)]
    int32; num_tokens_post_pad [1] int32; expert_map [num_experts] int32 or None."""
    numel = topk_ids.numel()
    dev = topk_ids.device
    counts = torch.zeros((num_experts,), dtype=torch.int32, device=dev)
    cursor = torch.empty((num_experts,), dtype=torch.int32, device=dev)
    has_map = expert_map is not None
    map_arg = expert_map if has_map else counts
    flat = topk_ids.reshape(-1)
    pair_grid = (max(1, triton.cdiv(numel, ALIGN_BLOCK)),)
    _align_count_kernel[pair_grid](flat, map_arg, counts, numel, num_experts,
                                   HAS_MAP=has_map, BLOCK=ALIGN_BLOCK)
    num_blocks = experts_ids.numel()
    _align_offsets_kernel[(max(1, triton.cdiv(num_blocks, OFFSET_BLOCKS)),)](
        counts, cursor, experts_ids, sorted_token_ids, num_tokens_post_pad, numel, num_experts, num_blocks,
        sorted_token_ids.numel(), S=triton.next_power_of_2(num_experts), BM=block_size, BLOCKS=OFFSET_BLOCKS)
    _align_scatter_kernel[pair_grid](flat, map_arg, cursor, sorted_token_ids, numel, num_experts,
                                     HAS_MAP=has_map, BLOCK=ALIGN_BLOCK)


def moe_sum(input, output):
    """Stand-in for ``torch.ops._moe_C.moe_sum``: output [T, H] = input [T, K, H] summed over K."""
    torch.sum(input, dim=1, out=output)


@triton.jit
def _swiglu_kernel(x_ptr, out_ptr, inter, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    up = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    gate = tl.load(x_ptr + row * stride_x + inter + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (gate * tl.sigmoid(gate) * up).to(out_ptr.dtype.element_ty),
             mask=mask)


def swiglu(output, input, block: int = 1024):
    """Stand-in for ``torch.ops._C.silu_and_mul`` in the definition's order:
    output [R, I] = silu(input[:, I:]) * input[:, :I], computed in fp32 from input [R, 2I]."""
    rows, inter = output.shape
    if rows == 0:
        return output
    _swiglu_kernel[(rows, triton.cdiv(inter, block))](input, output, inter, input.stride(0), output.stride(0),
                                                      BLOCK=min(block, triton.next_power_of_2(inter)))
    return output


@functools.lru_cache(maxsize=None)
def _flashinfer_fused_topk_deepseek():
    try:
        from flashinfer.fused_moe import fused_topk_deepseek
    except Exception:
        return None
    return fused_topk_deepseek


def has_grouped_topk() -> bool:
    """Whether ``grouped_topk`` can run (FlashInfer importable)."""
    return _flashinfer_fused_topk_deepseek() is not None


def grouped_topk(scores, num_expert_group, topk_group, topk, renormalize, routed_scaling_factor, bias,
                 scoring_func=0):
    """Stand-in for ``torch.ops._moe_C.grouped_topk`` with sigmoid scoring and renormalised
    weights (DeepSeek-V3): returns (weights [T, topk] fp32 = sigmoid of the selection over its
    sum times routed_scaling_factor, ids [T, topk] int32).  scores: raw logits [T, E] fp32."""
    fused = _flashinfer_fused_topk_deepseek()
    if fused is None:
        raise NotImplementedError("grouped_topk stand-in needs FlashInfer (flashinfer.fused_moe.fused_topk_deepseek)")
    if scoring_func != 1 or not renormalize:
        raise NotImplementedError("grouped_topk stand-in: only sigmoid scoring with renormalised weights")
    num_tokens = scores.shape[0]
    values = torch.empty((num_tokens, topk), dtype=torch.float32, device=scores.device)
    indices = torch.empty((num_tokens, topk), dtype=torch.int32, device=scores.device)
    fused(scores, bias, num_expert_group, topk_group, topk, float(routed_scaling_factor), values, indices, True)
    return values, indices
