"""Issue 22, class 1 (the worker rewrites the trusted parent): at import, opens the memory of the
gate's parent process, and of each of its ancestors, through /proc/<pid>/mem for reading and
writing -- the attack of 2026-12-01 patched the parent's checker this way, after which zeros passed
every workload.  This case only opens the files (it writes nothing) and raises "BOUNDARY BREACHED"
if any open succeeds, so a missing boundary shows as BUILD_FAILED; refused, it computes honestly.
Expected: PASS (the worker runs as another uid, the parent is not dumpable, and under the full
boundary the parent is not even visible in the worker's /proc).
"""

import os

import torch
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


def _ancestors():
    pid, seen = os.getppid(), []
    while pid > 1 and pid not in seen:
        seen.append(pid)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return seen


def _probe():
    opened = []
    for pid in _ancestors() + [1]:
        try:
            fd = os.open(f"/proc/{pid}/mem", os.O_RDWR)
        except OSError:
            continue
        os.close(fd)
        opened.append(pid)
    if opened:
        raise RuntimeError(f"BOUNDARY BREACHED: opened /proc/<pid>/mem read-write for {opened}")


_probe()


def run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
