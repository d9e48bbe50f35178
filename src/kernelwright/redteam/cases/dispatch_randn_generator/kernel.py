"""Off-clock work through an operator overload the dispatcher watch does not list (red-team pass
rt19): the integrity snapshot compares the dispatcher tables of the aten operators the harness
runs between timed iterations (case ``dispatch_fill``), by name and default overload only
(``aten::randn``); the input regeneration (``inputs.random_tensor``: ``torch.randn(shape,
dtype=..., device=..., generator=gen)``) dispatches ``aten::randn.generator``, another operator
entry.  The solution registers its own CPU/CUDA kernel for it at import: it draws exactly what
randn's composite kernel draws (``empty`` then ``normal_(0, 1, generator)``, bit for bit) and,
once a spec's x and weight are drawn, computes that iteration's outputs with its Triton kernel,
off the clock; the timed call only copies them.  A twin (four draws: the donor's too) and the
correctness calls (the parent fills the inputs, nothing is drawn) get the honest kernel, so every
checked output is right (the structure of case ``inputs_global_hook``).
Expected: GATE_TAMPERED.  Works the same on CUDA (a kernel for the CUDA key).
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
def _copy(src, dst, n, N: tl.constexpr):
    o = tl.arange(0, N)
    m = o < n
    tl.store(dst + o, tl.load(src + o, mask=m), mask=m)


_drawn = []      # tensors drawn since the last call
_stash = []      # (fingerprint of x, precomputed y)


def _randn_generator(*args, **kwargs):
    names = ("size", "generator", "dtype", "layout", "device", "pin_memory")
    a = dict(zip(names, args))
    a.update(kwargs)
    out = torch.empty(a["size"], dtype=a.get("dtype"), layout=a.get("layout"), device=a.get("device"),
                      pin_memory=bool(a.get("pin_memory") or False))
    out.normal_(0.0, 1.0, generator=a.get("generator"))     # randn's composite kernel, bit for bit
    _drawn.append(out)
    if len(_drawn) == 2 and out.dim() == 1 and _drawn[0].dim() == 2 and out.dtype == torch.bfloat16:
        x, w = _drawn
        y = torch.empty_like(x)
        _rmsnorm_rows[(x.shape[0],)](x, w, y, 1e-6, H=x.shape[1])
        _stash[:] = [(x[0, :16].clone(), y)]
    return out


_lib = torch.library.Library("aten", "IMPL")
for _key in ("CPU", "CUDA"):
    _lib.impl("randn.generator", _randn_generator, _key)


def run(x, weight, eps, y):
    fresh_spec = len(_drawn) == 2
    _drawn.clear()
    if fresh_spec and _stash:
        fp, stash = _stash.pop()
        if torch.equal(fp, x[0, :16]):
            _copy[(1,)](stash, y, y.numel(), N=triton.next_power_of_2(y.numel()))
            return
    _stash.clear()
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
