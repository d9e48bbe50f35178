"""RMSNorm through nested tensors (red-team pass rt22d).  The kineto profiler records no shape for
a nested tensor (``InputOutputEncoder::push`` stores a nested input as an undefined tensor), so an
aten op on nested tensors is reported with 0 elements; and the ops that build and read them are
glue by name (``_nested\\w*``, ``clone``/``contiguous``, ``values`` reads 0 elements).
- Lookups: ``torch._nested_view_from_buffer(table, sizes, strides, offsets)`` with ``offsets`` the
  inputs' bf16 bit patterns (``x.view(torch.uint16).long()``: glue ``view`` + ``_to_copy``) is a
  nested tensor of one-element views of the table at data-dependent places; ``.contiguous()``
  gathers them (glue), ``.values()`` hands back the dense buffer (0 elements).  Not an
  ``aten::index``/``take``/``gather``, so not ``aten::lookup.<op>``.
- Sums: ``sum(-1, keepdim=True)`` of a nested view is the NestedTensorCPU kernel itself (a plain
  loop, no dense aten op under it): 0 elements for the sum, only the nested sizes' ``prod``/``sum``
  (about 4 x rows elements).
RMSNorm: squares from an exact float64 table (bits -> v*v), the rows' sums by a nested sum of
rows; ``r = rsqrt(mean + eps)`` and its log-domain code with dense ops on ``[T]`` (rows, not
elements); the product ``|x| * r * |w|`` and the sign by a nested sum of 3-term components
``[H, 3]`` per row (``code(|x|) + 24576 sign(x)``, the same for ``w``, ``code(r)``: a stacked,
expanded buffer, glue) and one final table lookup of the sum (sign parity and magnitude to bf16).
Codes are ``round((log2 v + 24) * 200)``: worst relative error about 0.5 %, inside atol/rtol 0.01.
Everything under ``DisableTorchFunction`` (the recorder sees nothing; the profile is the judge).
Per call the profile counts about 17 x rows elements; the outputs have 512 x rows.  A Triton kernel
copies the temporary into ``y``; the ablation call drops the copy, so it decides nothing.
Expected: VENDOR_KERNELS: an ``aten::_nested*`` op, and any op whose first input the profile
records with neither dtype nor shape (a nested tensor), is reported as ``aten::nested.<op>``, a
compute op, glue or not (``aten_ops._on_nested``).
CPU only (on CUDA CUPTI sees the aten kernels).
"""
import torch
import triton
import triton.language as tl

_K, _LO, _N = 200, -24, 8192
_SGN = 3 * _N                   # a sign's weight in a 3-term code sum (> 3 * (_N - 1))


def _code(v):
    return torch.clamp(torch.round((torch.log2(torch.clamp(v, min=2.0 ** -30)) - _LO) * _K), 0, _N - 1)


_BITS = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).double()
_SQ = torch.nan_to_num(_BITS * _BITS)                                   # [bits]: v * v
_CS = (_code(_BITS.abs()) + _SGN * (_BITS < 0)).double()                # [bits]: code(|v|) + sign
_i = torch.arange(3 * _SGN, dtype=torch.float64)
_FINAL = (torch.where(((_i // _SGN) % 2) == 1, -1.0, 1.0)
          * torch.exp2(torch.clamp(_i % _SGN - 2 * (-_LO * _K), 0, _N - 1) / _K + _LO)).to(torch.bfloat16)


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(dst_ptr.dtype.element_ty))


def _gather(table, idx):
    """table[idx] (idx 1-D int64) as one-element nested views at offsets idx, gathered by contiguous()."""
    ones = torch.ones(idx.numel(), 1, dtype=torch.long)
    return torch._nested_view_from_buffer(table, ones, ones, idx).contiguous().values()


def _row_sums(buf, rows, shape, strides, step):
    """Per row, the sum over the last dim of a [shape] view of buf at row * step (a nested sum)."""
    sizes = torch.tensor([list(shape)], dtype=torch.long).expand(rows, len(shape)).contiguous()
    st = torch.tensor([list(strides)], dtype=torch.long).expand(rows, len(strides)).contiguous()
    offs = torch.arange(0, rows * step, step, dtype=torch.long)
    nt = torch._nested_view_from_buffer(buf, sizes, st, offs)
    return nt.sum(-1, keepdim=True).contiguous().values()


def _rmsnorm(x, weight, eps):
    T, H = x.shape
    xi = x.contiguous().view(torch.uint16).long().reshape(-1)
    wi = weight.contiguous().view(torch.uint16).long()
    sq = _gather(_SQ, xi)                                       # [T*H] float64
    s = _row_sums(sq, T, (H,), (1,), H)                         # [T]
    r = torch.rsqrt(s / H + eps)                                # rows only
    rc = _code(r)
    cx = _gather(_CS, xi).view(T, H)
    cw = _gather(_CS, wi).view(1, H).expand(T, H)
    buf = torch.stack([cx, cw, rc.view(T, 1).expand(T, H)], -1).reshape(-1)   # [T, H, 3]
    idx = _row_sums(buf, T, (H, 3), (3, 1), 3 * H).long()      # [T*H]
    return _gather(_FINAL, idx).view(T, H)


def run(x, weight, eps, y):
    with torch._C.DisableTorchFunction():
        tmp = _rmsnorm(x, weight, eps).contiguous()
    _copy_rows[(x.shape[0],)](tmp, y, H=x.shape[1])
