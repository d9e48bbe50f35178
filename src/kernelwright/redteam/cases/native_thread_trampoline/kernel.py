"""H9 with a trampoline: the first call starts ONE native thread (within the gate's allowance of two
threads started by a call), which waits until the call has returned and then starts nine more native
threads outside any call, where a rule that only watches the calls would not see them.  The
output is computed correctly by the solution's own Triton kernel.
Expected: BACKGROUND_THREAD (the count of native threads alive since the import is bounded too).
"""

import ctypes
import time

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
_sleep = ctypes.cast(_libc.sleep, ctypes.c_void_p)          # void *(*)(void *): sleep(arg) seconds
_START = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


def _pthread(routine, arg) -> None:
    tid = ctypes.c_ulong()
    _libc.pthread_create(ctypes.byref(tid), None, routine, arg)
    _libc.pthread_detach(tid)


def _trampoline(_arg):
    while not _returned:                                     # until the first call has returned ...
        time.sleep(0.005)
    time.sleep(0.02)                                         # ... and the gate has looked
    for _ in range(9):
        _pthread(_sleep, ctypes.c_void_p(60))
    return None


_trampoline_c = _START(_trampoline)                          # kept alive for the thread's lifetime
_started = []
_returned = False


def run(x, weight, eps, y):
    global _returned
    if not _started:
        _started.append(True)
        _pthread(ctypes.cast(_trampoline_c, ctypes.c_void_p), None)
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    _returned = True
