"""Off-clock work through a key of the returned dict (found by a second red-team pass,
2026-11-30): a plain dict whose key is a str subclass with its own ``__eq__``.  Looking the output
up by name compares with that key, so the real kernel ran inside the harness after the clock
stopped, while the timed call launched a no-op.  Expected: OUTPUT_NOT_TENSOR (returned dicts must
have plain str keys).
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

@triton.jit
def _noop(p):
    pass

class _Key(str):
    __hash__ = str.__hash__
    def __eq__(self, other):
        job = self.__dict__.pop("job", None)
        if job is not None:
            x, weight, eps, y = job
            _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
        return str.__eq__(self, other)

def run(x, weight, eps):
    y = torch.empty_like(x)
    _noop[(1,)](x)
    k = _Key("y")
    k.job = (x, weight, eps, y)
    return {k: y}
