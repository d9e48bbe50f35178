"""How concentrated are one indexer row's scores in the 11-bit histogram bins the scoring epilogue
counts into (one global atomic per score)?  CPU, the definition's random inputs, one full row.

    PYTHONPATH=src python3 experiments/indexer_hist_bins.py --pages 2048 256

Per row width: the nonzero bins, the five hottest bins' share of the row's tokens (how many
atomics land on one address), and the threshold bin's count (the candidates the select searches).
The answer is in docs/next-steps.md (item 3); record results/cpu/2026-12-06-indexer-hist-bins/.
"""

from __future__ import annotations

import argparse

import torch

from kernelwright.definitions.dsa_indexer import reference as R
from kernelwright.tuning import dsa as D

HIST_BITS = 11
TOPK = 2048


def row_scores(pages: int) -> torch.Tensor:
    """The scores of row 0 of the tuning harness's case (batch 1, `pages` block-table slots), fp32."""
    D.DEV = torch.device("cpu")
    inp = D.idx_case(1, pages).sets[0]
    q = inp["q_index_fp8"].float()[0]
    k = R.dequantize_k_cache(inp["k_index_cache_fp8"]).reshape(-1, q.shape[-1])
    tok = torch.arange(int(inp["seq_lens"][0]))
    ids = inp["block_table"][0].long()[tok // 64] * 64 + tok % 64
    return (torch.relu(k[ids] @ q.T) * inp["weights"].float()[0]).sum(1)


def bins_of(scores: torch.Tensor) -> torch.Tensor:
    """The kernel's bin of each score: the top HIST_BITS bits of its order-preserving int32 key."""
    bits = scores.view(torch.int32)
    key = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    return (key >> (32 - HIST_BITS)) + (1 << (HIST_BITS - 1))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, nargs="+", default=[2048, 256])
    args = ap.parse_args(argv)
    for pages in args.pages:
        s = row_scores(pages)
        b = bins_of(s)
        h = torch.bincount(b, minlength=1 << HIST_BITS)
        top = h.sort(descending=True).values[:5] / s.numel()
        thr_bin = int(b[s == s.sort(descending=True).values[TOPK - 1]][0])
        print(f"{pages} pages, {s.numel()} tokens: {int((h > 0).sum())} nonzero bins; hottest bins' share "
              f"{[round(float(x), 3) for x in top]}; threshold bin {thr_bin}: {int(h[thr_bin])} scores, "
              f"{int(h[thr_bin + 1:].sum())} above")


if __name__ == "__main__":
    main()
