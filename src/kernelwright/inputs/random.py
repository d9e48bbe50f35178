"""Random tensors by the FlashInfer-Bench convention (``bench/utils.py:_rand_tensor``) and seeds."""

from __future__ import annotations

import hashlib
from typing import Sequence

import torch

_INT_RANGES = {
    torch.int8: (-128, 128),
    torch.int16: (-1024, 1024),
    torch.int32: (-1024, 1024),
    torch.int64: (-1024, 1024),
}


def seed_for(*parts: object) -> int:
    """A 63-bit seed derived from any parts (e.g. workload uuid, trial, split salt)."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def make_generator(seed: int, device: torch.device | str) -> torch.Generator:
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(seed))
    return gen


def random_tensor(
    shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator, device: torch.device | str
) -> torch.Tensor:
    """float: randn; fp8: randn clamped to +-2 then cast; bool: 0/1; int: randint in the
    flashinfer-bench ranges ([-128,128) for int8, [-1024,1024) otherwise).

    Raises:
        ValueError: unsupported dtype.
    """
    shape = tuple(int(s) for s in shape)
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return torch.randn(shape, dtype=dtype, device=device, generator=gen)
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        base = torch.randn(shape, dtype=torch.float32, device=device, generator=gen)
        return base.clamp_(-2.0, 2.0).to(dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, dtype=torch.bool, device=device, generator=gen)
    if dtype in _INT_RANGES:
        low, high = _INT_RANGES[dtype]
        return torch.randint(low, high, shape, dtype=dtype, device=device, generator=gen)
    raise ValueError(f"no random convention for dtype {dtype}")


def random_offsets(length: int, total: int, dtype: torch.dtype, gen: torch.Generator,
                   device: torch.device | str) -> torch.Tensor:
    """Offsets of ``length - 1`` consecutive segments that tile ``[0, total)``: a non-decreasing
    ``[length]`` tensor from 0 to ``total`` (an ``indptr`` / ``cu_seqlens``), the cut points drawn
    uniformly (segments may be empty).

    Raises:
        ValueError: ``length`` < 1, ``total`` < 0, or ``length`` 1 with ``total`` != 0.
    """
    length, total = int(length), int(total)
    if length < 1 or total < 0 or (length == 1 and total != 0):
        raise ValueError(f"no offsets of length {length} end at {total}")
    inner = torch.randint(0, total + 1, (length - 2,), generator=gen, device=device) if length > 2 else \
        torch.empty(0, dtype=torch.int64, device=device)
    inner = torch.sort(inner).values
    ends = [torch.zeros(1, dtype=torch.int64, device=device)] + ([inner] if length > 2 else []) + \
        ([torch.full((1,), total, dtype=torch.int64, device=device)] if length > 1 else [])
    return torch.cat(ends).to(dtype)
