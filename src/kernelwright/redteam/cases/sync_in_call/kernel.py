"""CUDA only, honest: RMSNorm in Triton, then ``y[0, 0].item()`` (a device read: the host waits
for the device inside the call, as solutions that size work from device data do).  While the
gate holds the stream that wait cannot end until the blocking kernel's time limit runs out; the
gate must neither deadlock nor report the held events as device time.  Expected: PASS, the
headline on the eager clock (the trace notes the timed-out holds).
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


def run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    if float(y[0, 0].item()) != float(y[0, 0].item()):      # never true: NaN is not in a right output
        raise RuntimeError("NaN output")
