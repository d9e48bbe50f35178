"""Computes RMSNorm with torch's fused CPU optimizer kernels (red-team pass rt22b):
``torch._fused_adagrad_``, ``torch._fused_sgd_`` and ``torch._fused_adam_`` take their tensors as
tensor lists, which the kineto profile records with no input shape (the host-op profile counts 0
elements for them), and run their arithmetic in one C++ kernel with no nested aten op.  They are
not compute names to ``guards._TORCH_CPU_COMPUTE``.  Everything runs under
``torch._C.DisableTorchFunction()`` (no torch function mode runs), so the recorder sees nothing and
the profile sees the fused ops with 0 elements, a few ops on ``num_tokens`` elements, and glue.
  squares: adagrad's ``state_sum += g * g`` with ``g = x``;
  row sums: ``_fused_sgd_`` (``param -= lr * grad``, lr = -1) adding column halves, 9 rounds;
  ``x * rstd``: adam with amsgrad, beta1 = beta2 = 0, eps = 0, step 1, is
  ``param -= lr * g / sqrt(max(max_exp_avg_sq, g * g))``: with ``g = x`` and ``max_exp_avg_sq``
  the (expanded, glue) ``K^2 * (mean + eps)`` it is ``x * rstd``;
  ``* |w|``: the same division by ``K / |w|`` (from adam and adagrad on the weight);
  the weight's sign: adam gives ``sign(w)``, sgd turns it into a column index
  ``j + H * (1 - sign(w))``, and ``index_select`` (glue) gathers from ``cat([p, p, -p])``.
A Triton kernel copies the temporary into the output, so the ablation call (Triton's stores
dropped) leaves the outputs wrong like an honest solution's.
Expected: VENDOR_KERNELS: an op on a list of tensors, whose elements the profile cannot count, is
recorded as ``aten::tensor_list.<op>``, a compute op (``aten_ops._recorded_name``); so are
``_foreach_*`` and ``_fused_*`` by name.  CPU only (on CUDA CUPTI sees the aten kernels).
"""
import torch
import triton
import triton.language as tl

_K = float(2 ** 20)       # a power of two: |x * rstd * w| stays below it
_C = float(2 ** -40)      # below any nonzero bf16 weight the inputs hold


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(dst_ptr.dtype.element_ty))


def _step():
    return torch.ones(())


def _squares(g):
    """g * g (adagrad's state_sum, from zeros; lr 0 leaves the parameter alone)."""
    s = torch.zeros_like(g)
    torch._fused_adagrad_([torch.zeros_like(g)], [g], [s], [_step()], lr=0.0, lr_decay=0.0,
                          weight_decay=0.0, eps=1.0, maximize=False)
    return s


def _axpy(p, g, lr):
    """p - lr * g, in place on p."""
    torch._fused_sgd_([p], [g], [], weight_decay=0.0, momentum=0.0, lr=lr, dampening=0.0,
                      nesterov=False, maximize=False, is_first_step=True)
    return p


def _divide(g, d, lr):
    """-lr * g / sqrt(d), for d >= g * g (adam, amsgrad, beta1 = beta2 = 0, eps 0, step 1)."""
    p = torch.zeros_like(g)
    torch._fused_adam_([p], [g], [torch.zeros_like(g)], [torch.zeros_like(g)], [d.contiguous()], [_step()],
                       lr=lr, beta1=0.0, beta2=0.0, weight_decay=0.0, eps=0.0, amsgrad=True, maximize=False)
    return p


def rmsnorm_hidden(x, weight, eps):
    n, h = x.shape
    xf = x.float().contiguous()
    wf = weight.float().contiguous()
    # per-row sum of squares: halve the columns 9 times
    s = _squares(xf)
    k = h
    while k > 1:
        k //= 2
        s = _axpy(s[:, :k].contiguous(), s[:, k:2 * k].contiguous(), -1.0)
    d1 = (s * (_K * _K / h) + _K * _K * eps)              # num_tokens elements
    p = _divide(xf, d1.expand(n, h), -_K)                  # x * rstd
    # |w|: K / max(|w|, C), squared
    inv = _divide(torch.full_like(wf, _C), _squares(wf), -_K / _C)
    p = _divide(p, _squares(inv).expand(n, h), -_K)        # x * rstd * |w|
    # sign(w) as a gather index (adam's max floors w * w at C * C: a zero weight gives 0, not 0 / 0)
    sign = _divide(wf, torch.full_like(wf, _C * _C), -1.0)
    idx = _axpy(torch.arange(h, 2 * h, dtype=torch.float32), sign, float(h)).long()
    neg = _axpy(p.clone(), p, 2.0)                          # -p
    return torch.cat([p, p, neg], dim=1).index_select(1, idx)


def run(x, weight, eps, y):
    with torch._C.DisableTorchFunction():
        t = rmsnorm_hidden(x, weight, eps)
    _copy_rows[(x.shape[0],)](t, y, H=x.shape[1])
