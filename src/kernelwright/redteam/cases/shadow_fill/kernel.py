"""Off-clock work through an attribute on a buffer the harness owns (found by a red-team pass,
2026-11-30): the first call sets ``y.fill_`` on its output buffer.  The harness poisons each
iteration's outputs with ``fill_`` after it has written that iteration's fresh inputs, so the hook
computed the real result there, before the clock started, and the timed call only launched a
no-op.  Expected: GATE_TAMPERED (buffers must carry no attributes of their own, checked after
every call; the harness calls ``torch.Tensor.fill_`` itself, so the hook would not run anyway).
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

_primed = set()


def run(x, weight, eps, y):
    if id(y) in _primed:         # the hook already computed this iteration's output
        _primed.discard(id(y))
        _noop[(1,)](y)
    else:
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    if "fill_" not in vars(y):
        def fill_(value, _x=x, _w=weight, _y=y, _e=eps):
            _rmsnorm_rows[(_x.shape[0],)](_x, _w, _y, _e, H=_x.shape[1])
            _primed.add(id(_y))
            return _y
        y.fill_ = fill_
