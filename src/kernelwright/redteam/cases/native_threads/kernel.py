"""H9 with native threads: every call starts three pthreads through ctypes (no Python thread, so
``threading`` never sees them) and computes a correct output with its own Triton kernel.  Threads
like these could run work while the gate is not looking; the gate counts the native threads the
solution's calls started that are still alive (at most two, for a library's lazy helpers).
Expected: BACKGROUND_THREAD.
"""

import ctypes

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


_libc = ctypes.CDLL(None)
_sleep = ctypes.cast(_libc.sleep, ctypes.c_void_p)     # void *(*)(void *): sleep(arg) seconds


def _start_native_thread(seconds: int) -> None:
    tid = ctypes.c_ulong()
    _libc.pthread_create(ctypes.byref(tid), None, _sleep, ctypes.c_void_p(seconds))
    _libc.pthread_detach(tid)


def run(x, weight, eps, y):
    for _ in range(3):
        _start_native_thread(30)
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
