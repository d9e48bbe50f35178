"""H20 against rivals (found by a red-team pass, 2026-11-30): at import, rewrites the shipped demo
solution's source in the installed kernelwright package and restores its modification time; a
real attack appends a sleep to the rival's ``run``, so every later run measures the rival slower.
The gate watched only its own sources (gate, definitions, inputs, trace), not the shipped
solutions, the baselines or the report code.  To stay harmless this case writes back the same
bytes; the changed inode ctime is what the gate sees.  Expected: FILE_TAMPERED (the whole package
is watched), or BUILD_FAILED where the package is read-only.
"""
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


@triton.jit
def _noop(p):
    pass

import importlib.util
import os

_spec = importlib.util.find_spec("kernelwright")
if _spec is not None and _spec.submodule_search_locations:
    _path = os.path.join(list(_spec.submodule_search_locations)[0], "solutions", "demo_rmsnorm_triton", "kernel.py")
    if os.path.isfile(_path):
        _st = os.stat(_path)
        with open(_path, "rb") as _fh:
            _data = _fh.read()
        with open(_path, "r+b") as _fh:
            _fh.write(_data)
        os.utime(_path, ns=(_st.st_atime_ns, _st.st_mtime_ns))


def run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
