"""MoE at the contest sizes (H 7168, I 2048) on CPU: the strict errors of an emulation of the shipped
kernel's numerics (tests/solutions/test_moe_fp8_triton.py::_emulate, C re-quantised to e4m3 per 128
columns) and of two near misses, against the reference.  Run from the checkout root with
PYTHONPATH=src; about a minute per line on one thread.  (Run with the first MoE bound, 6e-2: the
``passed`` column of the honest lines holds at 7e-2 too.)"""
import sys, time, torch
sys.path.insert(0, ".")   # run from the checkout root
from tests.solutions.test_moe_fp8_triton import _emulate, _inputs
from kernelwright.definitions import get
from kernelwright.definitions.moe_fp8 import reference as R
from kernelwright.gate.checkers import check_outputs
from kernelwright.redteam.canaries import damaged_outputs
torch.set_num_threads(1)
b = get("moe")
for T, off in [(16, 224), (62, 96)]:
    for seed in range(2):
        t0 = time.time()
        ins = _inputs(T, off, seed, name="moe")
        ref = R.run(**ins)
        emu = _emulate(ins, 128).to(torch.bfloat16)
        c = check_outputs("elementwise", {"output": emu}, {"output": ref}, b.tolerance, ins)
        res = [f"T={T} off={off} seed={seed} honest-emulation: {c.strict['output']} matched {c.matched_ratio:.4f} {c.passed}"]
        args = [ins[n] for n in b.definition.input_names]
        for kind in ("drop_expert", "zero_rows"):
            d = damaged_outputs("moe", kind, args)[0]
            cc = check_outputs("elementwise", {"output": d}, {"output": ref}, b.tolerance, ins)
            res.append(f"   {kind}: {cc.strict['output']} matched {cc.matched_ratio:.4f} contest_ok={cc.failed_rule!=('contest')} passed={cc.passed}")
        print("\n".join(res), f"({time.time()-t0:.0f}s)", flush=True)
