"""The contest's indexer baseline recipe on Hopper, with the per-step metadata PRECOMPUTED:
``prepare`` (untimed) builds the DeepGEMM schedule (``get_paged_mqa_logits_metadata``) and the
token-level page table; the call runs only ``deep_gemm.fp8_paged_mqa_logits`` and
``flashinfer.top_k_page_table_transform`` (this is how the 2026-11-29 H200 anchor was measured).
Same APIs, shapes and quirks as ``indexer_deepgemm_flashinfer`` (see there).

Not destination-passing: the FlashInfer result is returned as is (no extra copy kernel).
"""

import functools

import torch
import triton
import triton.language as tl

PAGE_SIZE = 64
TOPK = 2048
SPLIT_KV = 256


@functools.lru_cache(maxsize=None)
def _deep_gemm():
    try:
        from vllm.third_party import deep_gemm  # the copy inside the vllm 0.20.0 wheel
    except ImportError:
        import deep_gemm
    return deep_gemm


@functools.lru_cache(maxsize=None)
def _top_k_page_table_transform():
    from flashinfer import top_k_page_table_transform
    return top_k_page_table_transform


@triton.jit
def _token_table_kernel(bt_ptr, out_ptr, bt_stride, max_pages, width,
                        PAGE: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    slot = j // PAGE
    inside = slot < max_pages
    page = tl.load(bt_ptr + b * bt_stride + slot, mask=inside & (j < width), other=0)
    tl.store(out_ptr + b * width + j, tl.where(inside, page * PAGE + j % PAGE, -1), mask=j < width)


def logits_width(max_num_pages: int) -> int:
    return -(-max_num_pages * PAGE_SIZE // SPLIT_KV) * SPLIT_KV


def token_table(block_table, width: int):
    batch, max_pages = block_table.shape
    out = torch.empty((batch, width), dtype=torch.int32, device=block_table.device)
    block = 1024
    _token_table_kernel[(batch, triton.cdiv(width, block))](
        block_table, out, block_table.stride(0), max_pages, width, PAGE=PAGE_SIZE, BLOCK=block)
    return out


@torch.no_grad()
def prepare(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    dg = _deep_gemm()
    batch = q_index_fp8.shape[0]
    width = logits_width(block_table.shape[1])
    context_lens = seq_lens.view(batch, 1).contiguous()
    return {"context_lens": context_lens, "width": width,
            "schedule": dg.get_paged_mqa_logits_metadata(context_lens, PAGE_SIZE, dg.get_num_sms()),
            "table": token_table(block_table, width)}


@torch.no_grad()
def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, *, state):
    dg = _deep_gemm()
    logits = dg.fp8_paged_mqa_logits(q_index_fp8.unsqueeze(1), k_index_cache_fp8.view(torch.uint8),
                                     weights, state["context_lens"], block_table, state["schedule"],
                                     state["width"], False)
    return _top_k_page_table_transform()(logits, state["table"], seq_lens, TOPK)
