"""What both paths of the indexer share: the call's shapes and layout checks, the
order-preserving key, the bisection step, and the all-selected kernel (rows no wider than topk,
whichever path the width would take).

Loops whose trip count depends on device data are `while` loops (the Triton interpreter cannot
take a tensor or a runtime scalar as a `range` bound); everything else has static trip counts.
"""

from typing import NamedTuple

import torch
import triton
import triton.language as tl


class CallShapes(NamedTuple):
    """The shapes of one call (every launch decision is made from these, never from values)."""
    batch: int        # B, rows of q_index_fp8 / block_table / topk_indices
    heads: int        # H = 64
    head_dim: int     # D = 128
    page_size: int    # PS = 64 tokens per page
    row_bytes: int    # D + 4: FP8 bytes of one token, then (per page, after all of them) its fp32 scale
    max_pages: int    # block_table.shape[1]: the width of every row, in pages
    topk: int         # topk_indices.shape[1] = 2048

    @property
    def tokens(self) -> int:
        """Row width in tokens: max_pages * page_size."""
        return self.max_pages * self.page_size

    @property
    def topk_block(self) -> int:
        return triton.next_power_of_2(self.topk)


def call_shapes(q_index_fp8, k_index_cache_fp8, weights, block_table, topk_indices) -> CallShapes:
    """The CallShapes of a call: q_index_fp8 [B, H, D] float8_e4m3fn, k_index_cache_fp8
    [P, PS, 1, D + 4] int8 (contiguous), weights [B, H] fp32, block_table [B, max_pages] int32,
    topk_indices [B, topk] int32.  Raises AssertionError on a layout the kernels do not support
    (non-contiguous K cache, strided inner dimensions)."""
    batch, heads, head_dim = q_index_fp8.shape
    shapes = CallShapes(batch, heads, head_dim, k_index_cache_fp8.shape[1], k_index_cache_fp8.shape[-1],
                        block_table.shape[1], topk_indices.shape[1])
    assert shapes.row_bytes == head_dim + 4 and (shapes.page_size * shapes.row_bytes) % 4 == 0
    assert k_index_cache_fp8.is_contiguous() and q_index_fp8.stride(2) == 1
    assert topk_indices.stride(1) == 1 and block_table.stride(1) == 1 and weights.stride(1) == 1
    return shapes


def k_cache_views(k_index_cache_fp8):
    """The K cache's bytes as (FP8 values [P, PS, 1, D + 4], fp32 words [P, PS, 1, (D + 4) / 4]):
    page p's token t has its FP8 row at byte p*PS*(D+4) + t*D and its scale at fp32 word
    p*PS*(D+4)/4 + PS*D/4 + t."""
    return k_index_cache_fp8.view(torch.float8_e4m3fn), k_index_cache_fp8.view(torch.float32)


@triton.jit
def _order_key(x):
    """fp32 -> int32 with the same order (signed compare); NaN sorts above +inf."""
    bits = x.to(tl.int32, bitcast=True)
    return tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


@triton.jit
def _bisect_step(lo, hi, c_hi, cnt, mid, k):
    """One bisection step on count(key >= mid) = cnt.

    Invariants: count(key >= lo) >= k, count(key >= hi) = c_hi < k (or hi = lo + 1 after an
    exact hit).  An exact hit (cnt == k) ends the search: lo = mid - 1, hi = mid, so that
    'key > lo' selects exactly k keys and no ties are needed.
    """
    ge = cnt >= k
    exact = cnt == k
    new_lo = tl.where(exact, mid - 1, tl.where(ge, mid, lo))
    new_hi = tl.where(ge & (~exact), hi, mid)
    new_c_hi = tl.where(ge & (~exact), c_hi, cnt)
    return new_lo, new_hi, new_c_hi


@triton.jit
def _all_selected_kernel(seq_ptr, bt_ptr, out_ptr, max_pages, stride_btb, stride_ob,
                         TOPK: tl.constexpr, TOPK_BLOCK: tl.constexpr, PS: tl.constexpr):
    """max_pages * PS <= topk: ids of tokens 0..seq_len-1 in order, then -1, grid (B,).

    Written out rather than through long_rows._write_all_selected (the same per row): with the
    row pointers formed first, ptxas gets a different and longer program (sm_90a, offline); this
    is the kernel measured at 3.8-4.5 us on the contest's all-selected workloads."""
    b = tl.program_id(0)
    seq = tl.load(seq_ptr + b)
    seq = tl.minimum(tl.maximum(seq, 0), max_pages * PS)
    offs = tl.arange(0, TOPK_BLOCK)
    valid = offs < seq
    page = tl.load(bt_ptr + b * stride_btb + offs // PS, mask=valid, other=0)
    ids = tl.where(valid, page * PS + offs % PS, -1)
    tl.store(out_ptr + b * stride_ob + offs, ids, mask=offs < TOPK)


def all_selected_launches(shapes: CallShapes, seq_lens, block_table, topk_indices):
    """The one launch of a call whose rows are no wider than topk (max_pages * PS <= topk), as
    [(kernel, grid, args, meta)]: every valid token selected in order, -1 after seq_len."""
    return [(_all_selected_kernel, (shapes.batch,), (
        seq_lens, block_table, topk_indices, shapes.max_pages,
        block_table.stride(0), topk_indices.stride(0)),
        dict(TOPK=shapes.topk, TOPK_BLOCK=shapes.topk_block, PS=shapes.page_size, num_warps=4))]
