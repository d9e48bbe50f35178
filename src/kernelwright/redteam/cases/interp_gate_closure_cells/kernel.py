"""The gate's own objects, reached through closure cells: InterpretedFunction.run is the launch
counter's ``run`` wrapper (worker.LaunchCounter.install), whose closure holds ``launch``, whose
closure holds ``lowering`` (the JitBodyCheck).  ``run()`` sets that cell to None, and ``launch``
then calls Triton's original ``run`` straight: no jit-body check, no namespace compare, no frame
check.  The kernel then calls a plain numpy helper on the interpreter's handles and stores its
result with tl.store (so the ablation's dropped stores leave the poison).  The counter's ``run``
itself stays in place, so the integrity snapshot (which lists InterpretedFunction's attributes,
not closure cells) sees nothing, and the launches are still counted.
Found by the eleventh CPU red-team pass (2026-12-07).  Expected: GATE_TAMPERED -- the integrity
snapshot compares what the closure cells of the functions it lists hold, and of the functions those
cells hold (the launch counter's run -> launch -> the check).  A cell set and put back inside one
call is not seen (docs/gate.md section 3, "Tampering that rewrites the detector").  CPU only.
"""
import sys

import numpy as np
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction, TensorHandle

_done = [False]


def _cell(fn, name):
    return fn.__closure__[fn.__code__.co_freevars.index(name)]


def _disarm():
    launch = _cell(InterpretedFunction.run, "launch").cell_contents
    cell = _cell(launch, "lowering")
    if cell.cell_contents is not None:
        cell.cell_contents = None
        print("redteam: interp_gate_closure_cells fired (the JitBodyCheck cell is None)", file=sys.stderr, flush=True)


def _np_rms(xv, wv, eps):
    d, w = np.asarray(xv.handle.data), np.asarray(wv.handle.data)
    r = (d / np.sqrt((d * d).mean() + eps) * w).astype(np.float32)
    return tl.tensor(TensorHandle(r, tl.float32), xv.type)


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _np_rms(xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _disarm()
    _rms[(x.shape[0],)](x, weight, y, float(eps), H=x.shape[1])
