"""CPU only (docs/gate.md, section 3, item 6: "a solution that notices the skipped launches ... and
leaves its outputs unwritten only then", documented, without a case until now): case
``hidden_host_compute`` -- RMSNorm with torch under ``torch._C.DisableTorchFunction()`` (out of the
host-op recorder's sight) and one empty Triton kernel for the launch counter -- that recognises the
provenance ablation.  The ablation is one ``call`` message with ``"ablate": True``; the harness's
``op_call`` frame holds that message as a local, so the solution reads it there (no probe kernel
needed) and returns with the outputs still poisoned: the ablated call's outputs are wrong, which is
what an honest solution's are, and the HOST_COMPUTE rule has nothing to see.
Expected: VENDOR_KERNELS: the host-op profile records the torch work under DisableTorchFunction
(pass rt22).  The ablation call is still recognisable, so host work neither record sees (numpy)
would pass it.  On CUDA the aten kernels show in CUPTI's records
(VENDOR_KERNELS), so the attack exists only on the CPU.
"""

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _empty(y_ptr):
    tl.program_id(0)


def _ablated() -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "op_call":
            msg = f.f_locals.get("msg")
            return bool(isinstance(msg, dict) and msg.get("ablate"))
        f = f.f_back
    return False


def run(x, weight, eps, y):
    _empty[(1,)](y)
    if _ablated():
        return                       # the ablation call: outputs left as the gate poisoned them
    with torch._C.DisableTorchFunction():
        xf = x.float()
        y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))
