"""H10: returns a torch.Tensor subclass whose __torch_function__ computes the real result only when
the checker touches it (outside the timed region); the timed call does nothing.
Expected: OUTPUT_NOT_TENSOR.
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



class _Lazy(torch.Tensor):
    @staticmethod
    def __new__(cls, x, weight, eps):
        self = torch.Tensor._make_subclass(cls, torch.empty(x.shape, dtype=torch.bfloat16, device=x.device))
        self._args = (x.clone(), weight.clone(), eps)
        self._done = False
        return self

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, _Lazy) and not a._done:
                a._done = True
                x, w, eps = a._args
                _rmsnorm_rows[(x.shape[0],)](x, w, a.as_subclass(torch.Tensor), eps, H=x.shape[1])
        return super().__torch_function__(func, types, args, kwargs or {})


def run(x, weight, eps):
    return _Lazy(x, weight, eps)
