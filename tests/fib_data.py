"""Where the FlashInfer-Bench test data (definition JSONs, the 19 MoE workload lines) lives.

In order: ``$KW_FIB_DATA`` (when set it must hold the data), ``<checkout>/../shared/fib`` (CI and
the workbench keep ``shared/`` beside the checkout), then the copies shipped in
``tests/data/fib`` (tests/data/fib/README.md says where they come from).  When none holds the
data, ``require_fib`` skips, except under ``CI=true``, where it fails: in CI the upstream-equality
tests must run.
"""

import os
from pathlib import Path
from typing import List, Optional

import pytest

MARKER = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048.json"
SHIPPED = Path(__file__).resolve().parent / "data" / "fib"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "fib"


def candidates() -> List[Path]:
    """The folders searched, in order."""
    env = os.environ.get("KW_FIB_DATA")
    return [Path(env)] if env else [SHARED, SHIPPED]


def fib_dir() -> Optional[Path]:
    """The first candidate holding the data, or None."""
    return next((d for d in candidates() if (d / MARKER).is_file()), None)


def require_fib() -> Path:
    """The data folder; skips the test when there is none (fails under ``CI=true`` or when
    ``$KW_FIB_DATA`` names a folder without the data)."""
    found = fib_dir()
    if found is not None:
        return found
    where = ", ".join(str(d) for d in candidates())
    message = f"FlashInfer-Bench test data ({MARKER}) not found in {where}"
    if os.environ.get("KW_FIB_DATA"):
        pytest.fail(f"{message}: $KW_FIB_DATA is set but holds no data")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}: under CI=true the upstream-equality tests must run")
    pytest.skip(f"{message} (set KW_FIB_DATA)")
