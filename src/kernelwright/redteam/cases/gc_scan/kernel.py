"""H19 (garbage collector): scans gc.get_objects() for a tensor shaped like the output that is not one
of its arguments and copies it (finds reference outputs kept alive anywhere in the process).
The reference outputs never exist in the worker.  Expected: NON_FINITE / TOLERANCE / STALE_OUTPUT.
"""

import torch
import triton
import triton.language as tl

import gc


def run(x, weight, eps, y):
    mine = {x.data_ptr(), weight.data_ptr(), y.data_ptr()}
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and obj.shape == y.shape and obj.dtype == y.dtype \
                and obj.data_ptr() not in mine:
            y.copy_(obj)
            return
