"""Killing the judge through the shared buffers (red-team pass rt4, 2026-12-03): on the CPU the
parent maps each buffer set's shared-memory file, and the worker holds the same file's descriptor
(``UntypedStorage._share_fd_cpu_``).  After its first (correct) call this solution truncates the
file of its output buffer to 0 bytes: the parent's next touch of its mapping (the copy of the
outputs, the poison) was a SIGBUS, which killed the trusted process itself, with every verdict of
the run (a bench's rivals included), before any trace was written.  The harness now allocates
CPU buffers in memfds sealed against shrinking (``wire.sealed_shared_tensor``) and the parent
maps only such files (``wire._sealed_problem``): the truncation raises in the solution.
Expected: EXCEPTION (the solution's own PermissionError).  Before the fix: the parent died (bus
error, exit 135) and no trace was written.
"""
import os

import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


_calls = [0]


def run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    _calls[0] += 1
    if _calls[0] == 1 and y.device.type == "cpu":
        fd, _ = y.untyped_storage()._share_fd_cpu_()
        os.ftruncate(fd, 0)
