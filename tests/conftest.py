"""Test set-up shared by every test.

Without CUDA, Triton kernels run through the interpreter (``TRITON_INTERPRET=1`` must be set
before triton is imported, so it is set here, first).  Tests marked ``gpu`` are skipped
without a CUDA device.
"""

import os

import pytest

try:
    import torch

    _HAS_CUDA = torch.cuda.is_available()
except Exception:  # pragma: no cover - torch is a hard dependency
    _HAS_CUDA = False

if not _HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if _HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
