"""Shared pieces of the cluster tests: small demo solutions and a tiny quick plan on CPU."""

from __future__ import annotations

from typing import List, Optional

from kernelwright import definitions
from kernelwright.gate.bench import BenchPlan, Candidate
from kernelwright.gate.evaluate import GateConfig
from kernelwright.trace import BuildSpec, Solution, SourceFile

DEMO = "demo_rmsnorm_h512"

# RMSNorm over a block of rows per program (one program for the quick sizes: cheap under the
# Triton interpreter)
TRITON_RMSNORM = '''
import triton
import triton.language as tl


@triton.jit
def _rmsnorm(x, w, y, rows, n, eps, BM: tl.constexpr, BN: tl.constexpr):
    r = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    c = tl.arange(0, BN)[None, :]
    m = (r < rows) & (c < n)
    v = tl.load(x + r * n + c, mask=m, other=0.0).to(tl.float32)
    g = tl.load(w + c, mask=c < n, other=0.0).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(v * v, 1) / n + eps)
    tl.store(y + r * n + c, (v * inv[:, None] * g * SCALE).to(tl.bfloat16), mask=m)


def run(x, weight, eps, y):
    rows, n = x.shape
    _rmsnorm[(triton.cdiv(rows, 64),)](x, weight, y, rows, n, eps, BM=64, BN=triton.next_power_of_2(n))
'''

BROKEN = "def run(x, weight, eps, y)\n    pass\n"     # a syntax error: COMPILE_ERROR


def solution(name: str, code: str, language: str = "triton") -> Solution:
    return Solution(name=name, definition=DEMO, author="tests",
                    spec=BuildSpec(language=language, target_hardware=["cpu"], entry_point="kernel.py::run"),
                    sources=[SourceFile(path="kernel.py", content=code)])


def good() -> Solution:
    return solution("rms_triton", TRITON_RMSNORM.replace("SCALE", "1.0"))


def wrong(scale: float = 1.5, name: str = "rms_triton_wrong") -> Solution:
    """Numerically wrong (every output scaled by ``scale``): INCORRECT_NUMERICAL."""
    return solution(name, TRITON_RMSNORM.replace("SCALE", repr(scale)))


def broken() -> Solution:
    return solution("rms_broken", BROKEN, "python")


def quick_builtin():
    return definitions.get("demo").quick_variant()


def quick_config() -> GateConfig:
    """What ``kernelwright bench --device cpu --quick`` uses."""
    cfg = GateConfig(device="cpu")
    cfg.warmup, cfg.iterations, cfg.graph_iterations = 2, 5, 5
    cfg.reference_iterations = 2
    return cfg


def plan(candidates: List[Solution], limit: Optional[int] = None) -> BenchPlan:
    b = quick_builtin()
    workloads = b.public_workloads()
    return BenchPlan(b, workloads[:limit] if limit else workloads, [Candidate(s, s.name) for s in candidates])


def statuses(run) -> dict:
    """{(definition, solution, workload): status} of a BenchRun."""
    return {(t.definition, t.solution, t.workload.uuid): t.evaluation.status.value
            for ts in run.traces.values() for t in ts}
