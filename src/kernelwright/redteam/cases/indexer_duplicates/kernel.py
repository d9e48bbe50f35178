"""Indexer-specific (matched-score exploit): computes the true top-k, then fills the -1 padding of
short rows with copies of the row's best token id, so that a checker comparing score sums or
counting hits scores higher.  Expected: DUPLICATE_INDEX.
"""

import torch
import triton
import triton.language as tl

@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _triton_copy(src, dst):
    n = dst.numel()
    _copy[(triton.cdiv(n, 1024),)](src.contiguous().view(-1), dst.view(-1), n, BLOCK=1024)

from kernelwright.definitions.dsa_indexer.reference import run as _reference


def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, topk_indices):
    ids = _reference(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table)
    for b in range(ids.shape[0]):
        row = ids[b]
        if (row >= 0).any():
            row[row < 0] = int(row[0])   # a plain int: CUDA index_put refuses a value aliasing the target
    _triton_copy(ids, topk_indices)
