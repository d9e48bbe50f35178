"""RMSNorm from table lookups (red-team pass rt22c): every per-element step of the call is a glue
op.  At import (no record) the module builds lookup tables over 13-bit log-domain codes
(``L(v) = round((log2 v + 24) * 200)``): for each bf16 bit pattern its square's code, its
magnitude's code and its sign; a 8192 x 8192 adder (``ADD[a, b] = L(D(a) + D(b))``), a multiplier
(``MUL[a, b] = a + b - 4800``, clamped), and the decoded bf16 values.  In the call ``x`` and
``weight`` are viewed as ``int16`` (their bit patterns, ``aten::view``) and cast to int64
(``aten::_to_copy``); everything else is ``aten::index`` (advanced indexing into a table, glue in
``_CPU_GLUE``, and its index tensors are an index list, not a tensor list): the squares' codes,
nine levels of a pairwise adder tree over the 512 columns (strided slices), the row's
``rsqrt(mean + eps)`` from a table per eps (built with torch at import for the workloads' 1e-6),
``|x| * r * |w|`` through the multiplier, the sign through a 2 x 2 XOR table, the bf16 value
through the output table.  Worst relative error about 1.2 % before the tolerance's atol (0.01),
within atol 0.01 + rtol 0.01.  A Triton kernel copies the temporary into ``y``; the ablation call
drops the copy, so it decides nothing.  No op the host-op profile reports is anything but glue;
no Python arithmetic per element or per row in the call.
Expected: VENDOR_KERNELS: the host-op profile reports gathers (``aten::index``, ``index_select``,
``take``, ``gather``) as ``aten::lookup.<op>``, not glue, with the elements of their largest input
(the 8192 x 8192 table).
CPU only (on CUDA CUPTI sees the aten kernels).
"""
import math

import torch
import triton
import triton.language as tl

_K, _LO, _N = 200, -24, 8192     # codes: log2(v) in [-24, 16.96] in steps of 1/200


def _code(v):
    return torch.clamp(torch.round((torch.log2(torch.clamp(v, min=2.0 ** -30)) - _LO) * _K), 0, _N - 1).long()


def _decode(c):
    return torch.exp2(c.double() / _K + _LO)


_BITS = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).double()  # [k]: the bf16 of bits k
_SQ = _code(_BITS ** 2)
_ABS = _code(_BITS.abs())
_SIGN = (_BITS < 0).long()
_VALS = _decode(torch.arange(_N))
_ADD = _code(_VALS[:, None] + _VALS[None, :]).to(torch.int16)
_MUL = torch.clamp(torch.arange(_N)[:, None] + torch.arange(_N)[None, :] + _LO * _K, 0, _N - 1).to(torch.int16)
_XOR = torch.tensor([[0, 1], [1, 0]])
_OUT = torch.stack([_VALS, -_VALS]).to(torch.bfloat16)


def _rsqrt_table(eps, H):
    """[s]: the code of rsqrt(D(s) / H + eps)."""
    return _code(torch.rsqrt(_VALS / H + eps))


_RSQRT = {(1e-6, 512): _rsqrt_table(1e-6, 512)}


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(dst_ptr.dtype.element_ty))


def _rmsnorm_by_tables(x, weight, eps):
    H = x.shape[-1]
    table = _RSQRT.get((eps, H))
    if table is None:     # an eps the workloads do not use: Python scalars, once per eps
        table = torch.tensor([min(_N - 1, max(0, round((math.log2(1.0 / math.sqrt(2.0 ** (k / _K + _LO) / H + eps)) - _LO) * _K)))
                              for k in range(_N)])
        _RSQRT[(eps, H)] = table
    xi = x.view(torch.int16).long()
    wi = weight.view(torch.int16).long()
    c = _SQ[xi]
    while c.shape[-1] > 1:                  # the row's sum of squares: a pairwise adder tree
        c = _ADD[c[:, 0::2], c[:, 1::2]].long()
    r = table[c[:, 0]]
    mag = _MUL[_MUL[_ABS[xi], r[:, None]].long(), _ABS[wi][None, :]].long()
    sign = _XOR[_SIGN[xi], _SIGN[wi][None, :]]
    return _OUT[sign, mag]


def run(x, weight, eps, y):
    tmp = _rmsnorm_by_tables(x, weight, eps).contiguous()
    _copy_rows[(x.shape[0],)](tmp, y, H=x.shape[1])
