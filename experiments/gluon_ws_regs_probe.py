"""Does Gluon's ``warp_specialize`` move registers between partitions on sm_90 (``setmaxnreg``)?
A DeepGEMM-style GEMM1 (a TMA producer warpgroup that gives its
registers to two consumer warpgroups) needs it.  CPU only: compiles a minimal warp-specialised
kernel (a default partition of 8 warps, one 4-warp worker asking for 40 registers) for sm_90a with
Triton's own toolchain and prints the ``setmaxnreg`` instructions of its LLVM IR and PTX.

    python experiments/gluon_ws_regs_probe.py
"""
from __future__ import annotations

import re

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource


@gluon.jit
def _default(x_ptr, out_ptr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, 1024, layout=layout)
    gl.store(out_ptr + offs, gl.load(x_ptr + offs) * 2.0)


@gluon.jit
def _worker(x_ptr, out_ptr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, 128, layout=layout)
    gl.store(out_ptr + 2048 + offs, gl.load(x_ptr + offs))


@gluon.jit
def ws_kernel(x_ptr, out_ptr):
    gl.warp_specialize([(_default, (x_ptr, out_ptr)), (_worker, (x_ptr, out_ptr))], [4], [40])


def main() -> None:
    src = GluonASTSource(fn=ws_kernel, signature=dict(x_ptr="*fp32", out_ptr="*fp32"), constexprs={}, attrs={})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
    print("triton", triton.__version__, "sm_90a, default partition 8 warps, worker 4 warps asking for 40 registers")
    print("ttgir:", [ln.strip() for ln in k.asm["ttgir"].splitlines() if "requestedRegisters" in ln])
    print("llir setmaxnreg:", re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\(i32 (\d+)\)", k.asm["llir"]))
    print("ptx setmaxnreg:", re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", k.asm["ptx"]))


if __name__ == "__main__":
    main()
