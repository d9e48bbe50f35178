"""H12 (forged results, no patching): from inside a timed call, sends the parent a complete forged
"time" reply (latencies of 1 us) through the worker's own pipe, found with the garbage collector.
Nothing is monkey-patched, so integrity snapshots see nothing; the harness's real reply follows
later.  Every call sleeps 20 ms.  Expected: GATE_TAMPERED (after every timing reply the parent
sends a ping with a random nonce; the pong must come next, and here the real reply comes instead).
"""

import gc
import multiprocessing.connection as _mpc
import time

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


_calls = [0]


def _forge():
    fake = [0.001] * 64
    reply = {"ok": True, "samples": {"latency_ms": fake, "wall_ms": fake, "graph_latency_ms": [], "graph_error": None,
                                     "kernel_sum_ms": [], "kernel_span_ms": [], "kernels": {"_rmsnorm_rows": [64, 64.0]},
                                     "empty_wall_ms": [], "cupti_error": None, "launches": {"triton::_rmsnorm_rows": [1, 1.0]},
                                     "host_ops": {}, "min_launches": 1},
             "threads_before": 1, "threads_after": 1, "children_before": 0, "children_after": 0, "py_threads": 1,
             "last_specs": {}, "sampled": {}, "l2_limit": None, "tampered": [], "op_wall_s": 1.0}
    for obj in gc.get_objects():
        if isinstance(obj, _mpc.Connection) and obj.writable and not obj.closed:
            try:
                obj.send(reply)
                return
            except Exception:
                continue


def run(x, weight, eps, y):
    _calls[0] += 1
    if _calls[0] == 5:          # the first timed iteration after the three correctness calls and one warm-up
        _forge()
    time.sleep(0.02)
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
