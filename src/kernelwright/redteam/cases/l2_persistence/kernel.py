"""H22 (CUDA only): sets a persisting L2 access-policy window over its inputs and raises the
persisting-L2 limit, so that "cold L2" timing keeps its inputs cached (karpathy/llm.c #851).  The
gate resets persisting lines and the limit to 0 before every timed iteration, and reports a limit
the solution set.  Expected: SUSPICIOUS with L2_PERSISTENCE (kept out of any best selection).
"""

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

import ctypes


class _Window(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class _AttrValue(ctypes.Union):
    _fields_ = [("accessPolicyWindow", _Window), ("pad", ctypes.c_char * 64)]


def _cudart():
    with open("/proc/self/maps") as fh:
        paths = sorted({line.split()[-1] for line in fh if "libcudart.so" in line})
    for path in paths + ["libcudart.so", "libcudart.so.12"]:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _persist(t):
    lib = _cudart()
    if lib is None:
        return
    lib.cudaDeviceSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
    max_persist = ctypes.c_int(0)                          # cudaDevAttrMaxPersistingL2CacheSize = 108
    lib.cudaDeviceGetAttribute(ctypes.byref(max_persist), 108, torch.cuda.current_device())
    size = max(1 << 20, min(64 << 20, max_persist.value or (16 << 20)))
    lib.cudaDeviceSetLimit(0x06, size)                     # cudaLimitPersistingL2CacheSize
    value = _AttrValue()
    value.accessPolicyWindow = _Window(t.data_ptr(), min(t.numel() * t.element_size(), size), 1.0, 2, 1)
    lib.cudaStreamSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.cudaStreamSetAttribute(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), 1, ctypes.byref(value))


def run(x, weight, eps, y):
    _persist(x)
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
