"""H12 (forged buffers, no patching): at import, finds the worker's pipe with the garbage collector
and sends the parent a forged "load" reply and then a forged "alloc" reply, before the real ones.
The forged buffer sets are shaped for the first quick workload (1 x 512 tokens) and every set is
the same three tensors in shared memory: the parent's fill of one set's inputs lands in all of
them, and the worker computes on buffers the parent never reads.  Expected: GATE_TAMPERED (the
parent checks that no two buffers share memory, and pings after the alloc reply: the real load
reply answers the ping).  The forged tensors live in memfds sealed against shrinking, as the
harness's own do since rt4, so that the checks above, not the seal check of ``gate/wire.py``,
are what stops them."""

import fcntl
import gc
import multiprocessing.connection as _mpc
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


def _sealed(*shape):
    n = 2
    for s in shape:
        n *= s
    fd = os.memfd_create("forged", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, n)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    storage = torch.UntypedStorage._new_shared_fd_cpu(fd, n)
    os.close(fd)
    return torch.empty(0, dtype=torch.bfloat16).set_(storage, 0, shape, torch.empty(shape, device="meta").stride())


def _forge():
    x, w, y = _sealed(1, 512), _sealed(512), _sealed(1, 512)
    quiet = {"tampered": [], "op_wall_s": 0.01}
    load = {"ok": True, "threads": 1, "children": 0, "py_threads": 1, "py_threads_before": 1,
            "threads_before": 1, "counts_launches": False, "integrity_gaps": [], **quiet}
    alloc = {"ok": True, "sets": [{"inputs": [x, w], "outputs": [y]} for _ in range(2)], "samples": [], **quiet}
    for obj in gc.get_objects():
        if isinstance(obj, _mpc.Connection) and obj.writable and not obj.closed:
            try:
                obj.send(load)
                obj.send(alloc)
                return
            except Exception:
                continue


_forge()


def run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
