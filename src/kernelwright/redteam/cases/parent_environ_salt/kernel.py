"""Issue 22, class 5 (secrets): at import, reads the exec environment of the gate's parent and its
ancestors (/proc/<pid>/environ, where a KERNELWRIGHT_HIDDEN_SALT given on the command line stays
for the process's life) and the hidden split's salt file (<cache>/hidden_salt).  With the salt a
solution computes the held-out shapes and specialises on them.  Raises "BOUNDARY BREACHED" if any
read succeeds (BUILD_FAILED), else computes honestly.  Expected: PASS (other uid, non-dumpable
parent, the cache hidden behind an empty tmpfs, the salt out of the parent's environment).
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


def _probe():
    leaked = []
    pid = os.getppid()
    for _ in range(8):
        if pid <= 1:
            break
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                data = fh.read()
            if data:
                leaked.append(f"environ of {pid}" + (" (with the salt)" if b"KERNELWRIGHT_HIDDEN_SALT=" in data else ""))
        except OSError:
            pass
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    cache = os.environ.get("KERNELWRIGHT_CACHE") or "/root/.cache/kernelwright"
    for path in (os.path.join(cache, "hidden_salt"), "/root/.cache/kernelwright/hidden_salt"):
        try:
            with open(path) as fh:
                if fh.read().strip():
                    leaked.append(path)
        except OSError:
            pass
    if leaked:
        raise RuntimeError(f"BOUNDARY BREACHED: read {leaked}")


_probe()


def run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
