"""DSA lightning-indexer top-k (dsa_topk_indexer_fp8_h64_d128_topk2048_ps64) in Triton.

Inputs (DeepSeek-V3.2 indexer, decode):
  q_index_fp8        [B, H=64, D=128]        float8_e4m3fn
  k_index_cache_fp8  [P, PS=64, 1, D+4=132]  int8, DeepGEMM paged layout read as bytes: per page
                     PS*D FP8 bytes (token-major) then PS fp32 scales
  weights            [B, H] fp32
  seq_lens           [B] int32 (on the device, never read by the host)
  block_table        [B, max_pages] int32
  topk_indices       [B, topk] int32, written in full (destination-passing style)

score[t] = sum_h relu(q[b, h] . k_t * scale_t) * weights[b, h] for t < seq_len; the output holds
the global ids (page * PS + offset) of the top min(topk, seq_len) tokens, then -1.

Dispatch on the block table's width, a shape (never on seq_lens; no host synchronisation,
CUDA-graph capturable), path_for():
  * max_pages * PS <= topk: every valid token is selected; one launch, grid (B,)
    (common.all_selected_launches).
  * max_pages < LONG_ROW_MIN_PAGES: short_rows (one program, or a few, per row; a fused
    score + resident top-k launch, or score + top-k launches), every contest workload.
  * max_pages >= LONG_ROW_MIN_PAGES: long_rows (work items of a few pages over every SM, a
    histogram threshold from atomics in the scoring epilogue, a parallel filter and candidate
    select).
On CUDA the launches of a call are captured once per call signature (the path, and data
pointers, shapes, strides and dtypes of every tensor argument) into a CUDA graph that later
calls replay.
"""

import torch

from . import long_rows, short_rows
from .common import all_selected_launches, call_shapes, k_cache_views
from .launch_cache import LaunchCache, launch_record as _launch_record, signature as _sig

# Block-table widths (pages) from which the long-row path runs.  Measured 2026-12-01 on the H200
# with experiments/indexer_envelope.py (device time): long_rows wins from 256 pages (16K tokens)
# up (64 x 16K: 66.3 us against 86.5; 1 x 128K: 38.6 against 528.6), short_rows at 128 pages and
# below (64 x 8K: 44.3 against 50.4; 1 x 8K: 19.1 against 29.9); no width between 129 and 255
# pages was measured.  Every contest workload has max_num_pages <= 91.
LONG_ROW_MIN_PAGES = 256
FORCE_PATH = None       # None: path_for's dispatch; "short_rows" / "long_rows": that path at every
                        # width wider than topk (experiments comparing the two paths)
_PATHS = {"short_rows": short_rows.launches, "long_rows": long_rows.launches}
# Register caps per thread (Triton's maxnreg compile option): {kernel (one of this solution's
# @triton.jit functions): cap} applies to every launch of that kernel; a kernel not named gets the
# registers ptxas chooses.  The long-row score kernel at 96 (5 programs per SM instead of 3) and
# the fused short-row kernel at 128 (2 instead of 1): by device time 8-10 % faster at 16K-32K
# tokens and 6 % at 4K over the serving envelope, the rest unchanged (gate A/B on the H200,
# results/h200/2026-12-02-records-4/idx-caps-ab-sweep; docs/kernels/indexer.md, "Registers and
# occupancy").  Not part of the launch-cache key: a change takes effect on calls through
# _launch, or after _entries.clear().
# The long rows' filter at 128 (two 8-warp programs per SM at its 4096-token tiles; see
# long_rows._SMALL_FILTER_TOKENS for the measurement).
MAXNREG = {long_rows._score_kernel: 96, short_rows._fused_kernel: 128, long_rows._filter_kernel: 128}


def path_for(max_pages: int, page_size: int, topk: int) -> str:
    """The path of a call whose block table is max_pages wide: "all_selected" (rows no wider
    than topk), "long_rows" (max_pages >= LONG_ROW_MIN_PAGES) or "short_rows"; FORCE_PATH, when
    set, replaces the last two."""
    if max_pages * page_size <= topk:
        return "all_selected"
    if FORCE_PATH is not None:
        return FORCE_PATH
    return "long_rows" if max_pages >= LONG_ROW_MIN_PAGES else "short_rows"


def with_register_cap(fn, meta: dict) -> dict:
    """The launch options ``meta`` of kernel ``fn`` with its MAXNREG cap (registers per thread)
    added, if it has one; otherwise ``meta`` itself."""
    cap = MAXNREG.get(fn) if MAXNREG else None
    return dict(meta, maxnreg=cap) if cap else meta


def _launch(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, topk_indices,
            warmup=False, record=None):
    """The launches of one call (``warmup``: compile only; ``record``: a list that receives
    each launch's compiled kernel and full arguments).  Returns the per-call scratch tensors
    (short_rows: [scores]; long_rows: [scores, candidate keys, candidate ids])."""
    if q_index_fp8.shape[0] == 0 or topk_indices.shape[1] == 0:
        return []
    shapes = call_shapes(q_index_fp8, k_index_cache_fp8, weights, block_table, topk_indices)
    path = path_for(shapes.max_pages, shapes.page_size, shapes.topk)
    if path == "all_selected":
        launches, scratch = all_selected_launches(shapes, seq_lens, block_table, topk_indices), []
    else:
        launches, scratch = _PATHS[path](shapes, q_index_fp8, *k_cache_views(k_index_cache_fp8),
                                         weights, seq_lens, block_table, topk_indices)
    for fn, grid, args, meta in launches:
        meta = with_register_cap(fn, meta)
        if warmup:
            fn.warmup(*args, grid=grid, **meta)
            continue
        compiled = fn[grid](*args, **meta)
        if record is not None:
            record.append(_launch_record(fn, compiled, grid, args, meta))
    return scratch


# ---------------------------------------------------------------------------------------------
# CUDA-graph replay of the launches (launch_cache.py, the same module as in the attention
# solution): the key is everything a captured launch bakes in -- FORCE_PATH, and the data
# pointers, shapes, strides and dtypes of every input and output.  Every replay recomputes from
# the current input contents.

LAUNCH = "graph"        # "graph": replay a captured CUDA graph per call signature;
                        # "direct": call the compiled kernels' launchers with recorded arguments;
                        # None: the Triton JIT dispatcher on every call
_SLOTS = 8              # small LRU of call signatures (the gate rotates 2 buffer sets)
_cache = LaunchCache(_launch, _SLOTS)
_entries = _cache.entries


def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, topk_indices):
    """Writes the top-k token ids of every row into ``topk_indices`` ([B, topk] int32) and
    returns it.  Shapes and dtypes as in the module docstring; raises AssertionError on a
    layout it does not support (non-contiguous K cache, strided inner dimensions)."""
    args = (q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, topk_indices)
    if LAUNCH and q_index_fp8.is_cuda and not torch.cuda.is_current_stream_capturing():
        key = (FORCE_PATH, _sig(q_index_fp8), _sig(k_index_cache_fp8), _sig(weights), _sig(seq_lens),
               _sig(block_table), _sig(topk_indices))
        if _cache(key, args, LAUNCH):
            return topk_indices
    _launch(*args)
    return topk_indices
