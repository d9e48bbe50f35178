"""H1 on a GPU (CUPTI provenance): the indexer's reference (cuBLAS matmuls, torch top-k) does the work;
a Triton copy kernel writes the output.  Expected: VENDOR_KERNELS (most kernel time in
vendor/aten kernels) or NO_KERNELS.
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
    _triton_copy(_reference(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table), topk_indices)
