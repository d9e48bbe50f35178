import triton
import triton.language as tl


@triton.jit
def inv_rms(x, H: tl.constexpr, eps):
    return 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)


@triton.jit
def scale(x, r, w):
    return x * r * w
