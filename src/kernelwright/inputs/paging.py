"""Stand-ins for captured paged-KV metadata, and the DeepGEMM FP8 K-cache packing.

Rules the synthesis keeps (so every workload is valid input for the definitions):
  * a block-table row never repeats a page, and rows use disjoint pages;
  * seq_lens are consistent with max_num_pages: every row fits its block table, and at least
    one row needs all max_num_pages pages (the width the contest recorded);
  * sparse-attention rows hold distinct valid token ids, with -1 padding only where the row's
    context has fewer tokens than topk.
"""

from __future__ import annotations

import torch


def synth_seq_lens(
    batch_size: int, max_num_pages: int, page_size: int, gen: torch.Generator,
    device: torch.device | str,
) -> torch.Tensor:
    """[B] int32 context lengths in [1, max_num_pages*page_size]; row 0 of a random permutation
    spans all max_num_pages pages."""
    cap = max_num_pages * page_size
    lens = torch.randint(1, cap + 1, (batch_size,), device=device, generator=gen)
    full_low = (max_num_pages - 1) * page_size + 1
    longest = torch.randint(full_low, cap + 1, (1,), device=device, generator=gen)
    pick = torch.randint(0, batch_size, (1,), device=device, generator=gen)
    lens[pick] = longest
    return lens.to(torch.int32)


def synth_block_table(
    batch_size: int, max_num_pages: int, num_pages: int, gen: torch.Generator,
    device: torch.device | str,
) -> torch.Tensor:
    """[B, max_num_pages] int32 page ids, distinct across the whole table.

    Raises:
        ValueError: the cache has fewer pages than the table needs.
    """
    need = batch_size * max_num_pages
    if need > num_pages:
        raise ValueError(f"block table needs {need} distinct pages, cache has {num_pages}")
    perm = torch.randperm(num_pages, device=device, generator=gen)[:need]
    return perm.view(batch_size, max_num_pages).to(torch.int32)


def pack_index_k_cache(keys: torch.Tensor) -> torch.Tensor:
    """Quantise keys [P, page, D] (any float) to DeepGEMM's paged FP8 layout.

    Per token: scale = amax(|k|)/448 (1 where the row is all zero), fp8 = k/scale.  Per page the
    bytes are page*D FP8 values (token-major) followed by page fp32 scales; viewed as int8
    [P, page, 1, D+4].
    """
    num_pages, page_size, head_dim = keys.shape
    k = keys.to(torch.float32)
    amax = k.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    fp8 = (k / scale).to(torch.float8_e4m3fn)
    value_bytes = fp8.view(torch.uint8).reshape(num_pages, page_size * head_dim)
    scale_bytes = scale.reshape(num_pages, page_size).contiguous().view(torch.uint8)
    packed = torch.cat([value_bytes, scale_bytes.reshape(num_pages, page_size * 4)], dim=1)
    return packed.view(torch.int8).view(num_pages, page_size, 1, head_dim + 4)


def random_index_k_cache(
    num_pages: int, page_size: int, head_dim: int, gen: torch.Generator, device: torch.device | str
) -> torch.Tensor:
    """A valid packed K cache from randn bf16 keys (flashinfer-bench PR #354 convention)."""
    keys = torch.randn((num_pages, page_size, head_dim), device=device, generator=gen)
    return pack_index_k_cache(keys.to(torch.bfloat16))


def synth_sparse_indices(
    num_tokens: int, topk: int, num_pages: int, page_size: int, gen: torch.Generator,
    device: torch.device | str, short_fraction: float = 0.15,
) -> torch.Tensor:
    """[T, topk] int32 selected token ids.

    Each query token belongs to its own request with its own pages.  Most requests are longer
    than topk (all topk slots hold distinct valid ids, drawn from the request's tokens); about
    ``short_fraction`` are shorter, so only their L tokens are valid and the rest is -1.
    """
    out = torch.full((num_tokens, topk), -1, dtype=torch.int32, device=device)
    for t in range(num_tokens):
        short = bool(torch.rand(1, device=device, generator=gen).item() < short_fraction)
        if short:
            length = int(torch.randint(1, topk, (1,), device=device, generator=gen).item())
        else:
            length = int(torch.randint(topk, 4 * topk + 1, (1,), device=device, generator=gen).item())
        pages_needed = min(num_pages, (length + page_size - 1) // page_size)
        length = min(length, pages_needed * page_size)
        pages = torch.randperm(num_pages, device=device, generator=gen)[:pages_needed]
        tokens = (pages[:, None] * page_size + torch.arange(page_size, device=device)).reshape(-1)[:length]
        count = min(topk, length)
        chosen = tokens[torch.randperm(length, device=device, generator=gen)[:count]]
        out[t, :count] = chosen.to(torch.int32)
    return out


def synth_request_sparse_indices(
    num_tokens: int, topk: int, context: int, num_pages: int, page_size: int, gen: torch.Generator,
    device: torch.device | str,
) -> torch.Tensor:
    """[T, topk] int32 selected token ids of T query tokens of ONE request (a chunk of prefill or a
    multi-token decode step), the serving-envelope case where rows overlap.

    The request's ``context`` tokens live on ceil(context / page_size) distinct pages drawn from the
    cache's ``num_pages``.  Query row t sits at causal position context - T + t and selects
    min(topk, position + 1) distinct tokens among the first position + 1 of the request (a random
    subset: a stand-in for the indexer's top-k), then -1.  Rows of one request share most of
    their tokens when the context is short.

    Raises:
        ValueError: the cache has fewer pages than the request needs, or ``context`` < T.
    """
    pages_needed = (context + page_size - 1) // page_size
    if pages_needed > num_pages:
        raise ValueError(f"a context of {context} tokens needs {pages_needed} pages, the cache has {num_pages}")
    if context < num_tokens:
        raise ValueError(f"context {context} is shorter than the {num_tokens} query tokens")
    pages = torch.randperm(num_pages, device=device, generator=gen)[:pages_needed]
    tokens = (pages[:, None] * page_size + torch.arange(page_size, device=device)).reshape(-1)[:context]
    out = torch.full((num_tokens, topk), -1, dtype=torch.int32, device=device)
    for t in range(num_tokens):
        visible = context - num_tokens + t + 1
        count = min(topk, visible)
        chosen = torch.randperm(visible, device=device, generator=gen)[:count]
        out[t, :count] = tokens[chosen].to(torch.int32)
    return out
