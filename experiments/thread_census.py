"""Which library step starts native threads in a fresh process?  (H200 diagnostic for the open
BACKGROUND_THREAD finding, docs/gate.md: with cupti_iterations=0 an honest MoE solution left
three unnamed native threads after its first call at a new T.)

Prints the native thread count and the names of the threads each step added, for the steps a
Triton solution's first calls go through: CUDA context, a torch matmul, a first Triton compile and
launch, a second compile (another constexpr), the MoE solution's first call at two T values (eager
run + CUDA-graph capture), a CUPTI attach/detach.  Usage: python experiments/thread_census.py
"""
import os
import sys

import torch


def threads():
    base = f"/proc/{os.getpid()}/task"
    out = {}
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/comm") as fh:
                out[int(tid)] = fh.read().strip()
        except OSError:
            pass
    return out


seen = threads()


def step(label):
    global seen
    now = threads()
    new = sorted(name for tid, name in now.items() if tid not in seen)
    gone = len([tid for tid in seen if tid not in now])
    print(f"{label:<40} threads {len(now):3d}  new {new}  ended {gone}", flush=True)
    seen = now


step("import torch")
torch.cuda.init()
x = torch.randn(64, 64, device="cuda")
(x @ x).sum().item()
step("CUDA context + matmul")
torch.randn(1 << 20).sum()
step("CPU thread pool")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _copy(src, dst, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(dst + o, tl.load(src + o) * 2)


a = torch.arange(128, device="cuda", dtype=torch.float32)
b = torch.empty_like(a)
_copy[(1,)](a, b, N=128)
torch.cuda.synchronize()
step("first Triton compile + launch")
_copy[(1,)](a, b, N=64)
torch.cuda.synchronize()
step("second Triton compile")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
from kernelwright import definitions  # noqa: E402
from kernelwright.solutions.moe_fp8_triton import kernel as K  # noqa: E402

from kernelwright.gate import fresh  # noqa: E402

d = definitions.get("moe")
dev = torch.device("cuda")
for T in (1, 32, 901):
    w = next(w for w in d.public_workloads() if w.axes["seq_len"] == T)
    ins = fresh.expand(d, w, 1234 + T, dev)
    out = torch.empty((T, 7168), dtype=torch.bfloat16, device=dev)
    step(f"(T={T}) inputs")
    K.run(**ins, output=out)
    torch.cuda.synchronize()
    step(f"MoE first call T={T} (eager + capture)")
    K.run(**ins, output=out)
    torch.cuda.synchronize()
    step(f"MoE replay T={T}")

try:
    from kernelwright.gate import timing as TM  # noqa: E402
    tr = TM.cupti_tracer()
    tr.begin()
    _copy[(1,)](a, b, N=128)
    torch.cuda.synchronize()
    tr.end()
    tr.drain()
    step("CUPTI window (attach, trace, detach)")
except Exception as exc:  # noqa: BLE001
    print("CUPTI step failed:", type(exc).__name__, exc, flush=True)
