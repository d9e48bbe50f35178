"""How many block-wide counts does the indexer's search for the k-th largest score take per row?
CPU, the definition's random inputs (the tuning harness's cases), every scored row of a batch.

    PYTHONPATH=src python3 experiments/indexer_select_steps.py [--pages 48 64 128 256] [--batches 8 16]

Each search starts from [min key, max key + 1] over one row's order keys, as the short rows'
resident select does without its histogram, and follows common._kth_key step by step:
  bisect     one pivot, the midpoint in key space (the select's path for batches > 8 until now);
  keyline    one pivot, the count line in key space alternating with the midpoint (the path
             inside the histogram bin);
  multi-P    P pivots per step on the count line in score space, spread k -+ SPREAD * (c_lo - c_hi)
             (common._kth_key_multi, the spreads it uses).
Prints the mean and the most steps per row width; record results/cpu/2026-12-07-indexer-select-steps/.
"""

from __future__ import annotations

import argparse

import torch

from kernelwright.definitions.dsa_indexer import reference as R
from kernelwright.tuning import dsa as D

TOPK = 2048
SPREADS = {2: 0.06, 3: 0.1, 4: 0.1}


def row_keys(batch: int, pages: int) -> list:
    """The int64 order keys of every row longer than TOPK of the harness's case (batch, pages)."""
    D.DEV = torch.device("cpu")
    inp = D.idx_case(batch, pages).sets[0]
    k = R.dequantize_k_cache(inp["k_index_cache_fp8"]).reshape(-1, inp["q_index_fp8"].shape[-1])
    rows = []
    for b in range(batch):
        n = int(inp["seq_lens"][b])
        if n <= TOPK:
            continue
        tok = torch.arange(n)
        ids = inp["block_table"][b].long()[tok // 64] * 64 + tok % 64
        s = (torch.relu(k[ids] @ inp["q_index_fp8"].float()[b].T) * inp["weights"].float()[b]).sum(1)
        bits = s.view(torch.int32)
        rows.append(torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits).long())
    return rows


def key_float(key: int) -> float:
    bits = key if key >= 0 else key ^ 0x7FFFFFFF
    return torch.tensor([bits], dtype=torch.int64).to(torch.int32).view(torch.float32).item()


def float_key(x: float) -> int:
    bits = int(torch.tensor([x], dtype=torch.float32).view(torch.int32))
    return bits ^ 0x7FFFFFFF if bits < 0 else bits


def steps_single(keys: torch.Tensor, k: int, line: bool) -> int:
    lo, hi, c_lo, c_hi = int(keys.min()), int(keys.max()) + 1, keys.numel(), 0
    steps, interp = 0, line
    while hi - lo > 1:
        w = hi - lo
        mid = lo + (w * (2 * (c_lo - k) + 1)) // (2 * (c_lo - c_hi)) if interp else lo + w // 2
        mid = min(max(mid, lo + 1), hi - 1)
        cnt = int((keys >= mid).sum())
        steps += 1
        if cnt == k:
            break
        lo, c_lo, hi, c_hi = (mid, cnt, hi, c_hi) if cnt > k else (lo, c_lo, mid, cnt)
        if line:
            interp = (not interp) or 2 * (hi - lo) <= w
    return steps


def steps_multi(keys: torch.Tensor, k: int, pivots: int) -> int:
    lo, hi, c_lo, c_hi = int(keys.min()), int(keys.max()) + 1, keys.numel(), 0
    spread, steps = SPREADS[pivots], 0
    while hi - lo > 1:
        f_lo, f_hi, n = key_float(lo), key_float(hi - 1), c_lo - c_hi
        mids = []
        for i in range(pivots):
            target = k - 0.5 + max(spread * n, 1.0) * (2 * i / (pivots - 1) - 1)
            target = min(max(target, c_hi + 0.5), c_lo - 0.5)
            mids.append(min(max(float_key(f_lo + (f_hi - f_lo) * (c_lo - target) / n), lo + 1), hi - 1))
        steps += 1
        counts = [int((keys >= m).sum()) for m in mids]
        if k in counts:
            break
        for m, c in zip(mids, counts):
            if c > k and m > lo:
                lo, c_lo = m, c
            if c < k and m < hi:
                hi, c_hi = m, c
    return steps


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, nargs="+", default=[48, 64, 128, 256])
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 16])
    args = ap.parse_args(argv)
    methods = {"bisect": lambda x: steps_single(x, TOPK, False), "keyline": lambda x: steps_single(x, TOPK, True)}
    methods.update({f"multi-{p}": (lambda x, p=p: steps_multi(x, TOPK, p)) for p in SPREADS})
    print(f"{'tokens':>7} {'rows':>5} " + " ".join(f"{m:>12}" for m in methods))
    for pages in args.pages:
        rows = [r for b in args.batches for r in row_keys(b, pages)]
        cells = []
        for fn in methods.values():
            st = [fn(r) for r in rows]
            cells.append(f"{sum(st) / len(st):5.1f} / {max(st):3d}")
        print(f"{pages * 64:>7} {len(rows):>5} " + " ".join(f"{c:>12}" for c in cells))


if __name__ == "__main__":
    main()
