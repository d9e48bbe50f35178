"""H12 (forged buffers, no patching): at import, finds the worker's pipe with the garbage collector
and sends the parent a forged "load" reply and then a forged "alloc" reply, before the real ones.
The forged buffer sets are shaped for the first quick workload (1 x 512 tokens) and every set is
the same three tensors in shared memory: the parent's fill of one set's inputs lands in all of
them, and the worker computes on buffers the parent never reads.  Expected: GATE_TAMPERED (the
parent checks that no two buffers share memory, and pings after the alloc reply: the real load
reply answers the ping)."""

import gc
import multiprocessing.connection as _mpc

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


def _forge():
    x = torch.zeros(1, 512, dtype=torch.bfloat16).share_memory_()
    w = torch.zeros(512, dtype=torch.bfloat16).share_memory_()
    y = torch.zeros(1, 512, dtype=torch.bfloat16).share_memory_()
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
