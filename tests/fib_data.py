"""Where the FlashInfer-Bench test data (definition JSONs, the 19 MoE workload lines) lives.

The files are upstream's and are not part of this repository; tests that need them look in
$KW_FIB_DATA or ../shared/fib next to the checkout and skip with a reason when absent.
"""

import os
from pathlib import Path

import pytest


def fib_dir() -> Path:
    env = os.environ.get("KW_FIB_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "fib"


def require_fib() -> Path:
    d = fib_dir()
    if not (d / "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048.json").is_file():
        pytest.skip(f"FlashInfer-Bench test data not found at {d} (set KW_FIB_DATA)")
    return d
